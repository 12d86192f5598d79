"""The wheel installed outside the checkout, as a site installs it: built with `python -m build`, checked by
check-wheel-contents and twine, installed into a fresh venv in a temporary folder with constraints.txt's pins
(packages from this machine's pip cache and indexes, as `make venv` got them), and run there with the current folder
outside the checkout and JOBAWARE_HOME in a temporary folder.

First the light install (`pip install jobaware`, the daemons' base, on Python 3.11 and 3.12): no torch, KFP, MLflow,
BentoML or Great Expectations; the plugins, the deployment files, the mail, the event-log reader, the Slurm store and
reports work; a command that needs an extra says which in one line. Then `jobaware[all]` into the same venv (reusing
what the light install put there): `jobaware demo` trains all six capabilities on the bundled data and serves them,
one service answers /readyz, and `data validate` passes on bundled data. Nothing but `jobaware` lands in site-packages.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from harness.ports import free_port
from harness.wheel import Venv, add, build, install
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
HEAVY = ("torch", "kfp", "mlflow", "bentoml", "great_expectations", "sklearn", "scipy", "matplotlib")
OLD_TOP_LEVEL = ("serving", "adapters", "pipelines", "components")


def python312() -> str | None:
    """A Python 3.12 that runs: pyenv's (its shim answers 127 where 3.12 is not the chosen version), else PATH's."""
    for candidate in (*sorted(Path("/root/.pyenv/versions").glob("3.12*/bin/python3.12")), shutil.which("python3.12")):
        if candidate and subprocess.run([str(candidate), "-c", ""], capture_output=True).returncode == 0:
            return str(candidate)
    return None


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> tuple[Path, Path]:
    wheel, sdist = build(tmp_path_factory.mktemp("dist"))
    for check in (["check_wheel_contents", str(wheel)], ["twine", "check", "--strict", str(wheel), str(sdist)]):
        done = subprocess.run([sys.executable, "-m", *check], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    return wheel, sdist


class Site:
    """A venv outside the checkout and a folder to run in, with its own JOBAWARE_HOME."""

    def __init__(self, venv: Venv, folder: Path):
        self.venv, self.folder = venv, folder
        self.env = {"PATH": f"{venv.bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(folder),
                    "JOBAWARE_HOME": str(folder / "home"), "JOBAWARE_CONFIG": "/nonexistent", "LANG": "C.UTF-8"}

    def run(self, *args, timeout: float = 600, program: str = "jobaware") -> subprocess.CompletedProcess:
        return subprocess.run([str(self.venv.bin / program), *map(str, args)], capture_output=True, text=True,
                              cwd=self.folder, env=self.env, timeout=timeout)

    def python(self, code: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.venv.bin / "python"), "-c", code], capture_output=True, text=True,
                              cwd=self.folder, env=self.env, timeout=120)


def make_site(tmp_path_factory, wheel: Path, python: str) -> Site:
    folder = tmp_path_factory.mktemp(f"site-{Path(python).name}")
    assert not folder.resolve().is_relative_to(ROOT.resolve())
    venv = install(wheel, folder / "venv", python=python)
    print(f"\nlight install ({Path(python).name}): {venv.seconds:.1f} s, {venv.size() / 2**20:.0f} MiB", flush=True)
    (folder / "work").mkdir()
    return Site(venv, folder / "work")


@pytest.fixture(scope="module")
def light(dist, tmp_path_factory) -> Site:
    return make_site(tmp_path_factory, dist[0], "python3.11")


def only_jobaware_in_site_packages(site: Site) -> None:
    record = next(site.venv.site_packages().glob(f"jobaware-{VERSION}.dist-info")) / "RECORD"
    tops = {line.split(",")[0].split("/")[0] for line in record.read_text().splitlines()}
    assert tops == {"jobaware", f"jobaware-{VERSION}.dist-info", ".."}, tops  # `..`: bin/jobaware, bin/jobaware-mail
    imports = site.python("import importlib.util, json; print(json.dumps({name: importlib.util.find_spec(name) is "
                          f"not None for name in {OLD_TOP_LEVEL!r}}}))")
    assert json.loads(imports.stdout) == dict.fromkeys(OLD_TOP_LEVEL, False), imports.stderr


def daemons_commands(site: Site) -> None:
    """What the login node and the daemons run, from the light install."""
    version = site.run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"jobaware {VERSION}", version
    heavy = site.python(f"import importlib.util; print([m for m in {HEAVY!r} if importlib.util.find_spec(m)])")
    assert heavy.stdout.strip() == "[]", heavy
    only_jobaware_in_site_packages(site)
    plugins = site.run("slurm", "plugins", "--output", "plugins")
    assert plugins.returncode == 0, plugins.stderr
    assert "jobaware" in (site.folder / "plugins" / "job_submit.lua").read_text()
    assert (site.folder / "plugins" / "cli_filter.lua").is_file()
    for kind, name in (("systemd", "jobaware-collector.service"), ("k8s", "overlays/production/kustomization.yaml")):
        assert site.run("deploy", kind, "--output", kind).returncode == 0
        assert (site.folder / kind / name).is_file()
    mail = site.run("--help", program="jobaware-mail")
    assert mail.returncode == 0 and mail.stdout.startswith("usage: jobaware-mail"), mail
    logs = site.python("from jobaware.packaged import bundled; print(bundled('data', 'real', 'condor-more'))")
    parsed = site.run("hold", "parse", "--input", logs.stdout.strip(), "--output", "events.parquet", "--json")
    assert parsed.returncode == 0 and json.loads(parsed.stdout)["events"] > 1000, parsed.stdout + parsed.stderr
    store = f"sqlite:{site.folder / 'store.db'}"
    made = site.python(f"from jobaware.store import open_store\nwith open_store({store!r}) as s:\n"
                       "    s.put_checkpoint('install', {'polled': 0})")
    assert made.returncode == 0, made.stderr
    for report in (["report", "jobs"], ["report", "waste"]):
        done = site.run(*report, "--store", store, "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["since"], (report, done.stderr)
    card = site.run("card", "42", "--store", store, "--json")  # no Slurm here: squeue's refusal, in one line
    assert card.returncode in (0, 1) and "unexpected" not in card.stdout and "Traceback" not in card.stderr, card
    nrel = site.python("from jobaware.packaged import bundled; print(bundled('data', 'real', 'nrel', "
                       "'eagle_sample_jobs.csv'))").stdout.strip()
    for args, extra in ((["serve", "failure"], "serve"), (["pipeline", "run", "failure"], "train"),
                        (["data", "validate", "failure", "--input", nrel], "train"),
                        (["report", "live", "--store", store], "reports")):
        done = site.run(*args)
        assert done.returncode == 1 and done.stderr.strip() == \
            f"error: this command needs jobaware[{extra}]: pip install 'jobaware[{extra}]'", (args, done.stderr)


def test_the_light_install_runs_the_daemons_commands(light):
    daemons_commands(light)


def test_the_light_install_on_python_3_12(dist, tmp_path_factory):
    python = python312()
    if python is None:
        pytest.skip("no Python 3.12 here (this machine's is pyenv's 3.12.1)")
    daemons_commands(make_site(tmp_path_factory, dist[0], python))


def test_the_full_install_trains_serves_and_validates(dist, light):
    """`jobaware[all]` over the light install: the main job on the embedded default, as `make run` runs it."""
    started = time.monotonic()
    seconds = add(light.venv, dist[0], "all")
    full = light
    print(f"\n[all] over the light install: {seconds:.1f} s, {full.venv.size() / 2**20:.0f} MiB", flush=True)
    only_jobaware_in_site_packages(full)
    contracts = full.run("data", "validate", "failure", "--input",
                         full.python("from jobaware.packaged import bundled; print(bundled('data', 'real', 'nrel', "
                                     "'eagle_sample_jobs.csv'))").stdout.strip())
    assert contracts.returncode == 0 and "expectations met on 700 rows" in contracts.stdout, contracts.stderr
    first = free_port()
    log = (full.folder / "demo.log").open("w")
    demo = subprocess.Popen([str(full.venv.bin / "jobaware"), "demo", "--first-port", str(first)], stdout=log,
                            stderr=subprocess.STDOUT, cwd=full.folder, env=full.env, start_new_session=True)
    try:
        deadline = time.monotonic() + 1500
        while "every capability serving" not in (full.folder / "demo.log").read_text():
            assert demo.poll() is None, (full.folder / "demo.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "demo: not every capability serving in 25 min"
            time.sleep(2)
        with urllib.request.urlopen(f"http://127.0.0.1:{first}/readyz", timeout=10) as answer:
            assert answer.status == 200
        print(f"demo: every capability serving after {time.monotonic() - started:.0f} s from the install's start")
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(10)
        log.close()
    text = (full.folder / "demo.log").read_text()
    for key in ("failure", "hold", "similarity", "resource", "wait", "sizing"):
        assert f"serve {key}" in text, text[-3000:]

