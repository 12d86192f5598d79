"""`jobaware slurm doctor` over deployments written into a temporary folder (slurm.conf files, the plugins, a cache,
a store, a service answering /readyz): a good one passes, each broken part is named with its fix."""

import json
import os
import shutil
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jobaware import capabilities, config, identity
from jobaware.adapters.slurm.doctor import doctor
from jobaware.adapters.slurm.plugins import write_plugins
from jobaware.adapters.slurm.verdicts import users_folder, write_cache
from jobaware.store import open_store
from tests.adapters.slurm.test_verdicts import verdict
from tests.test_cli import run

GOOD = """# a site's slurm.conf
ClusterName=site
Include /etc/slurm/nodes.conf
SlurmUser=root
JobSubmitPlugins=lua
CliFilterPlugins=cli_filter/lua
AccountingStorageType=accounting_storage/slurmdbd
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherParams=OverMemoryKill
NodeName=n1 CPUs=4
PartitionName=debug Nodes=n1 \\
  Default=YES
"""


class Ready(BaseHTTPRequestHandler):
    """A service of the deployment: it answers /readyz and proves it with the site's token (`jobaware.identity`)."""

    token = b""

    def do_GET(self):  # noqa: N802 - the standard library's name
        self.send_response(200 if self.path == "/readyz" else 404)
        nonce = self.headers.get(identity.NONCE)
        if identity.is_nonce(nonce):
            self.send_header(identity.PROOF, identity.proof(self.token, nonce, b""))
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def token(tmp_path, monkeypatch) -> bytes:
    """The site's service token, named as the units name it."""
    monkeypatch.setenv(config.TOKEN_FILE_ENV, str(config.make_service_token(tmp_path / "service.token")))
    return config.service_token()


@pytest.fixture
def service(token):
    handler = type("SiteReady", (Ready,), {"token": token})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def site(tmp_path):
    """A deployment where every check passes (the spool outside pytest's 0700 folder: sbatch's users read it)."""
    etc, spool = tmp_path / "etc", Path(tempfile.mkdtemp(prefix="doctor-spool-"))
    os.chmod(spool, 0o755)
    etc.mkdir()
    (etc / "slurm.conf").write_text(GOOD)
    cache = spool / "verdicts.tsv"
    write_plugins(etc, cache=str(cache))
    write_cache(cache, [verdict(), verdict(user="bob")])
    store = str(tmp_path / "store")
    with open_store(store) as opened:
        opened.put_checkpoint("site", {"sacct_until": int(time.time())})
    yield etc / "slurm.conf", cache, store
    shutil.rmtree(spool)


def services(url: str) -> list[str]:
    """`--service KEY=URL` for every capability with a part on the card."""
    keys = [key for key, capability in capabilities.registry().items() if capability.card is not None]
    return [arg for key in keys for arg in ("--service", f"{key}={url}")]


def failed(checks) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.ok}


def test_a_good_deployment_passes_every_check_through_the_cli(site, service):
    conf, cache, store = site
    done = run("slurm", "doctor", "--conf", conf, "--cache", cache, "--store", store, *services(service), "--json")
    checks = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c["status"] for c in checks] == ["ok"] * len(checks)
    assert {c["check"] for c in checks} >= {"JobSubmitPlugins=lua", "CliFilterPlugins=lua", "job_submit.lua",
                                            "cli_filter.lua", "verdict cache fresh", "readable by SlurmUser root",
                                            "readable by sbatch users", "verdicts private", "service identity",
                                            "service failure", "store shared", "AccountingStorageType",
                                            "JobAcctGatherType", "OOM visible"}


def test_each_broken_part_is_named_with_its_fix(site, tmp_path):
    conf, cache, store = site
    conf.write_text("SlurmUser=nobody\nTaskPlugin=task/cgroup\nJobSubmitPlugins=lua\n")
    (conf.parent / "cli_filter.lua").unlink()
    (conf.parent / "job_submit.lua").write_text('-- my own\nJOBAWARE_CACHE_PATH = "/elsewhere"\n')
    write_cache(cache, [verdict()], stale_after=60, now=int(time.time()) - 120)
    closed = "http://127.0.0.1:9"  # discard: nothing listens
    problems = failed(doctor(conf, cache, str(tmp_path / "absent"), {"failure": closed}))
    assert problems["CliFilterPlugins=lua"] == (f"add `CliFilterPlugins=lua` to {conf} (or `CliFilterPlugins=jobaware`, "
                                                "the compiled filter), then `scontrol reconfigure`")
    assert problems["cli_filter.lua"].startswith(f"{conf.parent / 'cli_filter.lua'} missing: run `jobaware slurm "
                                                 f"plugins --output {conf.parent} --cache {cache} --overwrite`")
    assert "is not a jobaware plugin" in problems["job_submit.lua"]
    assert problems["verdict cache fresh"].startswith(f"{cache}: written 12")
    assert "the adapter has not rewritten it" in problems["verdict cache fresh"]
    assert problems["readable by SlurmUser nobody"].startswith(str(cache))
    assert problems["service failure"].startswith(f"{closed}/readyz: ConnectError: start `jobaware serve failure`")
    assert problems["service identity"].startswith("JOBAWARE_SERVICE_TOKEN_FILE is not set, so any local user")
    assert problems["store"].startswith(f"{tmp_path / 'absent'} does not exist")
    assert problems["AccountingStorageType"].startswith("accounting_storage/none: sacct has no end states")
    assert problems["JobAcctGatherType"].startswith("jobacct_gather/none")
    assert problems["OOM visible"].startswith("no memory limit is enforced")
    assert "CliFilterPlugins" not in conf.read_text() and "readable by sbatch users" not in problems
    # cgroup.conf constraining memory makes OOM visible; a plugin for another cache is named
    (conf.parent / "cgroup.conf").write_text("ConstrainRAMSpace=yes\n")
    write_plugins(conf.parent, cache="/var/spool/other.tsv", force=True)
    problems = failed(doctor(conf, cache, store, {}))
    assert "OOM visible" not in problems and "store shared" not in problems
    assert problems["job_submit.lua"].startswith(f"{conf.parent / 'job_submit.lua'} reads /var/spool/other.tsv, the "
                                                 f"adapter writes {cache}")


def test_missing_cache_user_files_and_a_folder_store(site, tmp_path):
    conf, cache, store = site
    os.unlink(cache.with_name("verdicts.tsv.users"))
    folder = tmp_path / "folder-store"
    with open_store(f"folder:{folder}") as opened:
        opened.put_checkpoint("site", {})
    problems = failed(doctor(conf, cache, f"folder:{folder}", {}))
    assert problems["user files"].startswith(f"{cache}.users missing")
    assert problems["store shared"].startswith(f"{folder} is a folder store (one writer)")
    cache.unlink()
    problems = failed(doctor(conf, cache, store, {}))
    assert problems["verdict cache"].startswith(f"{cache}: cannot read the verdict cache")
    assert problems["verdict cache"].endswith("(is `jobaware slurm adapt --cache` running?)")


def test_the_cli_exits_1_with_a_table_when_a_check_fails(site):
    conf, cache, store = site
    conf.write_text(GOOD.replace("JobSubmitPlugins=lua\n", ""))
    done = run("slurm", "doctor", "--conf", conf, "--cache", cache, "--store", store,
               *services("http://127.0.0.1:9"))
    assert done.returncode == 1, done.stderr
    assert "to fix" in done.stdout and "JobSubmitPlugins=lua" in done.stdout and "FIX" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_file_that_is_no_slurm_conf_is_refused_in_one_line_naming_its_line(site):
    """A table of checks read from a file that is no slurm.conf would be all wrong: the line is named instead."""
    conf, cache, store = site
    conf.write_text(GOOD + "PartitionName=long \\\n  Nodes=n1\nalpha,\x1b[31mbeta\n")
    done = run("slurm", "doctor", "--conf", conf, "--cache", cache, "--store", store)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert done.stderr.startswith(f"error: {conf}:15: not a slurm.conf line (Name=value or Include FILE): "
                                  "'alpha,\\x1b[31mbeta'"), done.stderr


def test_the_compiled_filter_is_looked_for_in_plugin_dir(site, tmp_path):
    conf, cache, store = site
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    conf.write_text(GOOD.replace("CliFilterPlugins=cli_filter/lua", f"CliFilterPlugins=jobaware\nPluginDir=/nowhere:{plugins}"))
    # the site's choices: the command that writes the plugins again keeps them (its defaults would change them)
    write_plugins(conf.parent, cache=str(cache), field="admin_comment", stale_after=900, force=True)
    checks = {c.name: c for c in doctor(conf, cache, store, {})}
    assert checks["CliFilterPlugins=jobaware"].ok and "cli_filter.lua" not in checks
    assert not checks["cli_filter_jobaware.so"].ok
    assert checks["cli_filter_jobaware.so"].detail == (
        f"not in PluginDir /nowhere:{plugins}, so every sbatch fails: run `jobaware slurm plugins --output "
        f"{conf.parent} --cache {cache} --field admin_comment --stale-after 900 --plugin-dir /nowhere --overwrite`")
    (plugins / "cli_filter_jobaware.so").write_bytes(b"\x7fELF...jobaware cli_filter; slurm 0x160508; stale 60; cache "
                                                     b"/x.tsv\0...")
    detail = {c.name: c.detail for c in doctor(conf, cache, store, {})}["cli_filter_jobaware.so"]
    assert detail == (f"{plugins / 'cli_filter_jobaware.so'} reads /x.tsv, the adapter writes {cache}: run `jobaware "
                      f"slurm plugins --output {conf.parent} --cache {cache} --field admin_comment --stale-after 60 "
                      f"--plugin-dir {plugins} --overwrite`")
    (plugins / "cli_filter_jobaware.so").write_bytes(b"\x7fELF...")
    detail = {c.name: c.detail for c in doctor(conf, cache, store, {})}["cli_filter_jobaware.so"]
    assert detail.startswith(f"{plugins / 'cli_filter_jobaware.so'} is not jobaware's compiled filter")


def test_verdicts_every_user_may_read_are_named(site):
    """The adapter writes each user's file 0600 with an ACL entry for its user; one readable by everyone (a file system
    without ACLs, or a hand-made cache) is named: users would read each other's verdicts."""
    conf, cache, store = site
    assert "verdicts private" not in failed(doctor(conf, cache, store, {}))
    os.chmod(users_folder(cache) / "ana.tsv", 0o644)
    problems = failed(doctor(conf, cache, store, {}))
    assert problems["verdicts private"].startswith(f"{users_folder(cache) / 'ana.tsv'}: readable by every user")
    (users_folder(cache) / "#header.tsv").unlink()  # an adapter older than the plugins
    assert failed(doctor(conf, cache, store, {}))["readable by sbatch users"].startswith(
        f"{users_folder(cache) / '#header.tsv'}: the CLI filter runs as each user")
