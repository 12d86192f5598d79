"""job_submit.lua and cli_filter.lua inside a real one-node Slurm: real sbatch, comments read back."""

import os
import pwd
import random
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.adapters.slurm.plugins import write_plugins
from jobaware.adapters.slurm.verdicts import HEADER_FILE, users_folder, write_cache
from tests.adapters.slurm.test_verdicts import verdict

pytestmark = pytest.mark.slow
USER = pwd.getpwuid(os.getuid()).pw_name
# what the cluster's jobs below ask for: -n1, --mem=500, no GPU; the time varies
CACHED = [
    verdict(USER, "", "debug", time=60, nodes=1, cpus=1, mem=500),  # TIMEOUT likely, 7 of 10 ran out of time
    verdict(USER, "", "debug", time=5, nodes=1, cpus=1, mem=500, p_fail=0.05, kind="", resource="cpu",
            n_failed=0, n_timeout=0, model_version="4"),  # a low risk: no advice
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_slurm()
    root = tmp_path_factory.mktemp("slurm-lua")
    write_plugins(root, cache=str(root / "verdicts.tsv"), stale_after=600)
    slurm = SlurmCluster(root, lua_plugins=True).start()
    yield slurm
    slurm.stop()


@pytest.fixture
def cache(cluster):
    path = cluster.root / "verdicts.tsv"
    write_cache(path, CACHED, default_partition="debug")
    return path


def submit(cluster, *args: str, state: Path | None = None) -> tuple[int, str]:
    """sbatch a held job (it stays pending, its comment readable); its id and sbatch's stderr. `state`: the folder
    where cli_filter.lua keeps the time it last said the cache was broken (a fresh one unless given)."""
    state = state or Path(tempfile.mkdtemp(dir=cluster.root))
    done = subprocess.run(["sbatch", "--parsable", "--hold", "-n1", "--mem=500", f"--chdir={cluster.root / 'jobs'}",
                           "--wrap=true", *args], env={**cluster.env, "XDG_RUNTIME_DIR": str(state)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + cluster.logs()
    return int(done.stdout.strip().split(";")[0]), done.stderr


def comment(cluster, job: int) -> str:
    shown = cluster.run("scontrol", "show", "job", str(job))
    return re.search(r"\bComment=(.*?)\s*(?:\n|$)", shown).group(1)


def test_sbatch_gets_the_verdict_in_its_comment_and_advice_on_stderr(cluster, cache):
    job, stderr = submit(cluster, "--time=60")
    assert comment(cluster, job) == "jobaware: failure risk 70%, TIMEOUT likely; 8/10 similar failed; model 3; io-bound"
    assert stderr == ("jobaware: failure risk 70%, TIMEOUT likely: jobs like this one ran out of time in 7 of their "
                      "last 10 runs; ask for more --time than the 60 minutes asked (model 3).\n")
    # a shape not in the cache: 30 minutes (bucket 4) is nearest to 60 (bucket 5); the user's comment stays first
    job, _ = submit(cluster, "--time=30", "--comment=run 7 of the sweep")
    assert comment(cluster, job) == ("run 7 of the sweep | jobaware: failure risk 70%, TIMEOUT likely; 8/10 similar "
                                     "failed; model 3; io-bound; nearest shape")
    # 2 minutes is nearest to the 5-minute shape: a low risk, a comment and no advice
    job, stderr = submit(cluster, "--time=2")
    assert comment(cluster, job) == "jobaware: failure risk 5%; 0/10 similar failed; model 4; cpu-bound; nearest shape"
    assert stderr == ""


def test_a_time_change_gets_the_new_shapes_verdict(cluster, cache):
    job, _ = submit(cluster, "--time=5", "--comment=mine")
    assert comment(cluster, job).startswith("mine | jobaware: failure risk 5%")
    cluster.run("scontrol", "update", f"JobId={job}", "TimeLimit=60")
    assert comment(cluster, job) == "mine | jobaware: failure risk 70%, TIMEOUT likely; 8/10 similar failed; model 3; io-bound"
    cluster.run("scontrol", "update", f"JobId={job}", "Comment=set by hand")
    assert comment(cluster, job) == "set by hand"


def _break(path, how: str) -> None:
    """The cache broken as `how` says; where it is damaged, its header file (which cli_filter.lua reads: the cache
    file is SlurmUser's) alike."""
    damaged = [path, users_folder(path) / HEADER_FILE]
    if how == "missing":
        path.unlink()
    elif how == "stale":  # written 11 minutes ago; the plugins were rendered with --stale-after 600
        write_cache(path, CACHED, now=int(time.time()) - 660)
    elif how == "random bytes":
        for f in damaged:
            f.write_bytes(random.Random(3).randbytes(20_000))
    elif how == "truncated":  # the header file's own header line is all it holds before the trailer
        for f, cut in zip(damaged, (len(path.read_bytes()) // 2, 3)):
            f.write_bytes(f.read_bytes()[:-cut])
    elif how == "wrong fields":  # the 60-minute line loses a field: the 5-minute line is all that is left
        mine = path.with_name(path.name + ".users") / f"{USER}.tsv"  # the plugins read the user's own file
        lines = mine.read_text().split("\n")
        at = next(i for i, line in enumerate(lines) if line.split("\t")[3:4] == ["5"])  # 60 min: bucket 5
        lines[at] = lines[at].rsplit("\t", 1)[0]
        mine.unlink()
        mine.write_text("\n".join(lines))


@pytest.mark.parametrize("how, why", [("missing", "missing"), ("stale", "stale (written 66"),
                                      ("random bytes", "corrupt (not a version 2"), ("truncated", "corrupt (truncated"),
                                      ("wrong fields", None)])
def test_a_broken_cache_fails_open(cluster, cache, how, why, tmp_path):
    _break(cache, how)
    job, stderr = submit(cluster, "--time=60", "--comment=mine", state=tmp_path)
    expected = "mine | jobaware: failure risk 5%; 0/10 similar failed; model 4; cpu-bound; nearest shape" \
        if how == "wrong fields" else "mine"
    assert comment(cluster, job) == expected
    # said on the user's terminal at info level (once a minute for users: test_lua_plugins.py; root, as here, hears
    # it every time and no file is written)
    said = f"sbatch: lua: jobaware: verdict cache {cache} {why}"
    assert stderr == "" if why is None else stderr.startswith(said) and stderr.count("\n") == 1, stderr
    assert submit(cluster, "--time=60", state=tmp_path)[1] == stderr and not list(tmp_path.iterdir())
    if how == "missing":  # the first broken cache of this slurmctld: said in its log at info level
        assert f"jobaware: verdict cache {cache} missing; no verdicts" in (cluster.root / "log" / "slurmctld.log").read_text()
    log = (cluster.root / "log" / "slurmctld.log").read_text().replace(str(cluster.root), "")
    assert "error" not in "\n".join(line for line in log.splitlines() if "lua" in line).lower()


def test_root_never_writes_the_said_file_through_a_link(cluster, cache, tmp_path):
    """Root may run sbatch with another user's $XDG_RUNTIME_DIR (`su` without `-`): links that user put at the said
    file and at its temporary name are never followed (Lua 5.1 cannot open without following links, so root keeps
    no said-file), and the note is said every time."""
    cache.unlink()
    run = tmp_path / "run"
    run.mkdir()
    victims = [tmp_path / "victim", tmp_path / "victim.tmp"]
    for victim in victims:
        victim.write_text("root's own\n")
    (run / ".jobaware-cli-filter-said").symlink_to(victims[0])
    (run / ".jobaware-cli-filter-said.tmp").symlink_to(victims[1])
    note = f"sbatch: lua: jobaware: verdict cache {cache} missing; no verdicts until it is fixed (failing open)\n"
    assert [submit(cluster, "--time=60", state=run)[1] for _ in range(2)] == [note, note]
    assert [v.read_text() for v in victims] == ["root's own\n"] * 2
    assert [os.readlink(run / name) for name in (".jobaware-cli-filter-said", ".jobaware-cli-filter-said.tmp")] == \
        [str(v) for v in victims]


def test_doctor_on_the_live_cluster(cluster, cache, tmp_path):
    """`jobaware slurm doctor` over the test cluster's own slurm.conf: the plugins and the cache pass; this cluster
    has no accounting, and says so."""
    from jobaware.adapters.slurm.doctor import doctor

    checks = {c.name: c for c in doctor(cluster.conf, cache, str(tmp_path / "absent"), {})}
    for name in ("JobSubmitPlugins=lua", "CliFilterPlugins=lua", "job_submit.lua", "cli_filter.lua",
                 "verdict cache fresh", "readable by SlurmUser root"):
        assert checks[name].ok, (name, checks[name].detail)
    assert not checks["AccountingStorageType"].ok and not checks["OOM visible"].ok
