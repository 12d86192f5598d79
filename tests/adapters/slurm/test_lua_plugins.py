"""The rendered plugins under plain lua5.1 (no Slurm): the same lookup as Python, fail-open, comments, advice."""

import os
import pwd
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from jobaware.adapters.slurm.plugins import write_plugins
from jobaware.adapters.slurm.verdicts import DIMENSIONS, Shape, lookup, read_cache, users_folder, write_cache
from tests.adapters.slurm.test_verdicts import verdict

LUA = shutil.which("lua5.1")
DRIVER = Path(__file__).with_name("fake_slurm.lua")
NOBODY = 65534  # a user who is not root, for the said-file
pytestmark = pytest.mark.skipif(LUA is None and not os.environ.get("JOBAWARE_REQUIRE_SLURM"),
                                reason="lua5.1 is not installed here; apt-get install lua5.1")


def run(plugin: Path, commands: list[str], user: str = "ana", **env: str) -> tuple[list[str], str]:
    script = plugin.parent / "commands.txt"
    script.write_text("".join(c + "\n" for c in commands))
    done = subprocess.run([LUA or "lua5.1", str(DRIVER), str(plugin), str(script)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "USER": user, "XDG_RUNTIME_DIR": str(plugin.parent), **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr


@pytest.fixture
def plugins(tmp_path) -> tuple[Path, Path]:
    cache = tmp_path / "verdicts.tsv"
    write_plugins(tmp_path, cache=str(cache), stale_after=600)
    return tmp_path, cache


def test_lua_finds_what_python_finds(plugins):
    """Random caches and queries: the Lua rule and the Python rule pick the same verdict, or none."""
    folder, cache = plugins
    rng = random.Random(5)
    users, accounts, partitions = ["ana", "bob"], ["", "phys", "chem"], ["debug", "gpu"]
    for round_ in range(3):
        pool = {}
        for _ in range(40):
            v = verdict(rng.choice(users), rng.choice(accounts), rng.choice(partitions), *(
                rng.choice([0, 1, 3, 20, 60, 100, 2000, 5000]) for _ in DIMENSIONS), n_similar=rng.randint(8, 12))
            pool.setdefault(v.key(), v)
        write_cache(cache, pool.values())
        cached = read_cache(cache).verdicts
        queries, expected = [], []
        for _ in range(150):
            values = [rng.choice([None, 0, 2, 7, 30, 70, 500, 3000]) for _ in DIMENSIONS]
            user, account, partition = rng.choice(users), rng.choice(accounts + ["ops"]), rng.choice(partitions)
            buckets = ["-" if v is None else str(_b(v)) for v in values]
            queries.append("\t".join(["lookup", user, account or "-", partition, *buckets]))
            found = lookup(cached, user, account, partition, Shape(**dict(zip(DIMENSIONS, values))))
            expected.append("none" if found is None else " ".join(
                [found[1], found[0].user, found[0].account, found[0].partition,
                 ",".join(map(str, found[0].shape.buckets()))]))
        answers, _ = run(folder / "job_submit.lua", queries)
        assert answers == expected, f"round {round_}"


def _b(value: int) -> int:
    return (value + 1).bit_length() - 1


def test_submit_writes_the_verdict_and_keeps_the_users_comment(plugins):
    folder, cache = plugins
    write_cache(cache, [verdict(account="", time=60, cpus=4, mem=4000)], default_partition="debug")
    answers, _ = run(folder / "job_submit.lua", [
        "submit\tuser_name=ana\ttime_limit=60\tmin_cpus=4\tmin_nodes=1\tmin_mem_per_node=4000",
        "submit\tuser_name=ana\ttime_limit=600\tmin_cpus=4\tcomment=my run 7",
        "submit\tuser_name=ana\ttime_limit=60\tmin_cpus=4\tmin_mem_per_node=4000\tcomment=keep | jobaware: old",
        "submit\tuser_name=zoe\ttime_limit=60",
    ])
    results = [a for a in answers if not a.startswith("log: ")]
    assert results[0] == ("rc=0 comment=jobaware: failure risk 70%, TIMEOUT likely; 8/10 similar failed; model 3; "
                          "io-bound admin_comment=nil")
    assert results[1].startswith("rc=0 comment=my run 7 | jobaware: failure risk 70%, TIMEOUT likely;")
    assert results[1].endswith("; io-bound; nearest shape admin_comment=nil")
    assert results[2].startswith("rc=0 comment=keep | jobaware: failure risk 70%") and results[2].count("jobaware") == 1
    assert results[3] == "rc=0 comment=nil admin_comment=nil"
    logs = [a for a in answers if a.startswith("log: ")]
    assert logs[0].startswith("log: jobaware: job_submit exact ") and logs[0].endswith(" ms")
    assert logs[3].startswith("log: jobaware: job_submit no verdict for zoe in debug ")


def test_admin_comment_field(tmp_path):
    cache = tmp_path / "v.tsv"
    write_plugins(tmp_path, cache=str(cache), field="admin_comment")
    write_cache(cache, [verdict(account="")])
    answers, _ = run(tmp_path / "job_submit.lua", ["submit\tuser_name=ana\tpartition=debug\tcomment=mine"])
    assert answers[-1].startswith("rc=0 comment=mine admin_comment=jobaware: failure risk 70%")


def test_modify_follows_a_new_shape_and_leaves_other_updates_alone(plugins):
    folder, cache = plugins
    write_cache(cache, [verdict(account="", time=60, p_fail=0.2, kind=""), verdict(account="", time=1000)])
    answers, _ = run(folder / "job_submit.lua", [
        ("modify\ttime_limit=1000\t||\tuser_name=ana\tpartition=debug\ttime_limit=60\tmin_cpus=4\tcomment=x | "
         "jobaware: p(fail)=0.20"),
        "modify\tcomment=set by the adapter\t||\tuser_name=ana\tpartition=debug\ttime_limit=60",
        "modify\tnice=5\t||\tuser_name=ana\tpartition=debug\ttime_limit=60",
    ])
    results = [a for a in answers if not a.startswith("log: ")]
    assert results[0].startswith("rc=0 comment=x | jobaware: failure risk 70%, TIMEOUT likely")
    assert results[1] == "rc=0 comment=set by the adapter"
    assert results[2] == "rc=0 comment=nil"


def _corrupt(cache: Path, how: str) -> None:
    good = cache.read_bytes()
    if how == "random bytes":
        cache.write_bytes(random.Random(1).randbytes(5000))
    elif how == "truncated":
        cache.write_bytes(good[: len(good) - 3])
    elif how == "empty":
        cache.write_bytes(b"")
    elif how == "missing":
        cache.unlink()
    elif how == "bad header":
        cache.write_bytes(good.replace(b"\t2\t", b"\tx\t", 1))


@pytest.mark.parametrize("how, why", [
    ("random bytes", "corrupt (not a version 2 jobaware verdict cache)"), ("truncated", "corrupt (truncated"),
    ("empty", "empty"), ("missing", "missing"), ("bad header", "corrupt (not a version 2"),
])
def test_a_broken_cache_means_no_verdict(plugins, how, why):
    folder, cache = plugins
    write_cache(cache, [verdict(account=""), verdict(account="", time=600)])
    _corrupt(cache, how)
    _corrupt(users_folder(cache) / "#header.tsv", how)  # where the CLI filters read the cache's state
    answers, stderr = run(folder / "job_submit.lua", ["submit\tuser_name=ana\tpartition=debug\tcomment=mine",
                                                      "lookup\tana\t-\tdebug\t-\t-\t-\t-\t-"])
    assert answers[-2] == "rc=0 comment=mine admin_comment=nil"
    assert answers[-1].startswith(f"none {why}") and stderr == ""
    # said at info level once, not at each call (slurmctld keeps the plugin's state between calls)
    said = f"info: jobaware: verdict cache {cache} {why}"
    assert [a for a in answers if a.startswith("info: ")] == [answers[0]] and answers[0].startswith(said)
    assert answers[0].endswith("; no verdicts until it is fixed (failing open)")
    # cli_filter runs in each sbatch: root (these tests) keeps no said-file, and hears the note every time
    advice, stderr = run(folder / "cli_filter.lua", ["advise\ttype=sbatch\ttime=60"])
    assert advice[-1] == "rc=0" and advice[0].startswith(said) and len(advice) == 2 and stderr == "", advice
    assert run(folder / "cli_filter.lua", ["advise\ttype=sbatch\ttime=60"]) == (advice, "")
    assert not (folder / ".jobaware-cli-filter-said").exists()


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv (util-linux)")
def test_a_user_hears_the_note_once_a_minute(tmp_path):
    """A user's cli_filter keeps the time of its last note in a small file of the user's own: said once a minute
    across processes; a link left at the file's temporary name is removed, not written through."""
    folder = Path(tempfile.mkdtemp(prefix="jobaware-lua-"))  # pytest's folders are 0700: the user could not read
    try:
        folder.chmod(0o755)
        cache = folder / "verdicts.tsv"
        write_plugins(folder, cache=str(cache), stale_after=600)
        state = folder / "run"
        state.mkdir()
        os.chown(state, NOBODY, NOBODY)
        victim = state / "victim"
        victim.write_text("the user's own\n")
        os.chown(victim, NOBODY, NOBODY)
        (state / ".jobaware-cli-filter-said.tmp").symlink_to(victim)
        (folder / "commands.txt").write_text("advise\ttype=sbatch\ttime=60\n")
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", LUA or "lua5.1",
                   str(DRIVER), str(folder / "cli_filter.lua"), str(folder / "commands.txt")]

        def advise() -> list[str]:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "USER": "ana", "XDG_RUNTIME_DIR": str(state)})
            assert done.returncode == 0 and done.stderr == "", done.stderr
            return done.stdout.splitlines()

        said = f"info: jobaware: verdict cache {cache} missing; no verdicts until it is fixed (failing open)"
        assert advise() == [said, "rc=0"]
        assert victim.read_text() == "the user's own\n" and not (state / ".jobaware-cli-filter-said.tmp").exists()
        assert advise() == ["rc=0"]
        (state / ".jobaware-cli-filter-said").write_text(f"{int(time.time()) - 61}\n")  # a minute later
        assert advise() == [said, "rc=0"]
    finally:
        shutil.rmtree(folder)


def test_the_plugins_read_only_the_users_own_file(plugins):
    """A torn user file: no verdicts for that user (said), the others unaffected; no folder of user files: said."""
    folder, cache = plugins
    write_cache(cache, [verdict(account=""), verdict(user="bob", account="")])
    mine = cache.with_name("verdicts.tsv.users") / "ana.tsv"
    text = mine.read_text()
    mine.unlink()
    mine.write_text(text[:-3])
    answers, _ = run(folder / "job_submit.lua", ["submit\tuser_name=ana\tpartition=debug",
                                                 "submit\tuser_name=bob\tpartition=debug",
                                                 "submit\tuser_name=zoe\tpartition=debug"])
    assert answers[0] == (f"info: jobaware: verdict cache {cache} user file ana.tsv corrupt (truncated: no trailer for 1 "
                          "verdicts); no verdicts until it is fixed (failing open)")
    assert answers[1].startswith("log: jobaware: job_submit no verdict: cache user file ana.tsv corrupt")
    assert answers[4].startswith("rc=0 comment=jobaware: failure risk 70%")  # bob's file is whole
    assert answers[5].startswith("log: jobaware: job_submit no verdict for zoe in debug ")  # no file: no verdicts
    # the cache file alone (a hand-made one, or the folder removed): said, no verdicts
    os.unlink(cache.with_name("verdicts.tsv.users"))
    answers, _ = run(folder / "job_submit.lua", ["submit\tuser_name=bob\tpartition=debug"])
    assert answers[0].startswith(f"info: jobaware: verdict cache {cache} has no folder of user files {cache}.users/")
    assert answers[-1] == "rc=0 comment=nil admin_comment=nil"


@pytest.mark.parametrize("good, bad", [("\t10\t", "\tlots\t"), ("\t10\t", "\t-3\t"), ("\t10\t", "\t10\textra\t"),
                                       ("\tfailure risk 70%, TIMEOUT likely; 8/10 similar failed; model 3; io-bound\t",
                                        "\t\t")])
def test_a_line_with_wrong_fields_is_skipped_alone(plugins, good, bad):
    folder, cache = plugins
    write_cache(cache, [verdict(account="", time=60), verdict(account="", time=600, p_fail=0.3, model_version="4")])
    mine = cache.with_name("verdicts.tsv.users") / "ana.tsv"  # the plugins read the user's own file
    lines = mine.read_text().split("\n")
    assert good in lines[1]
    lines[1] = lines[1].replace(good, bad, 1)
    mine.unlink()  # the link's folder holds it; replace the file, not the text of a file another folder shares
    mine.write_text("\n".join(lines))
    answers, _ = run(folder / "job_submit.lua", ["submit\tuser_name=ana\ttime_limit=60\tpartition=debug"])
    assert answers[0] == "info: jobaware: " + str(cache) + ": skipped 1 malformed verdict lines of user ana"
    assert answers[-1].startswith("rc=0 comment=jobaware: failure risk 30%;")  # the other line, as nearest shape


def test_stale_cache_means_no_verdict(plugins):
    folder, cache = plugins
    # written 605 s before the call (Lua's os.time() may lag Python's clock by up to a second), or a little more on
    # a machine busy enough to stall the test between the two
    write_cache(cache, [verdict(account="")], stale_after=3600, now=int(time.time()) - 605)  # plugin: 600 s
    answers, _ = run(folder / "job_submit.lua", ["lookup\tana\t-\tdebug\t-\t-\t-\t-\t-"])
    assert re.match(r"none stale \(written 6\d\d s", answers[-1]) and answers[-1].endswith("limit 600 s)"), answers
    assert re.match(rf"info: jobaware: verdict cache {re.escape(str(cache))} stale \(written 6\d\d s", answers[0]), \
        answers
    write_cache(cache, [verdict(account="")], stale_after=60, now=int(time.time()) - 65)  # the file: 60 s
    answers, _ = run(folder / "job_submit.lua", ["lookup\tana\t-\tdebug\t-\t-\t-\t-\t-"])
    assert answers[-1].endswith("limit 60 s)"), answers


def test_cli_filter_advises_in_a_plain_sentence(plugins):
    folder, cache = plugins
    write_cache(cache, [
        verdict(account="", time=60, cpus=1, mem=2000),
        verdict(account="", time=600, cpus=1, mem=2000, kind="OUT_OF_MEMORY", n_timeout=0, n_failed=6),
        verdict(account="", time=7, cpus=1, mem=2000, p_fail=0.2, kind="", n_similar=3, n_failed=0, n_timeout=0),
    ], default_partition="debug")
    _, stderr = run(folder / "cli_filter.lua", ["advise\ttype=sbatch\ttime=01:00:00\tmem=2G\tntasks=1"])
    assert stderr == ("jobaware: failure risk 70%, TIMEOUT likely: jobs like this one ran out of time in 7 of their "
                      "last 10 runs; ask for more --time than the 60 minutes asked (model 3).\n")
    _, stderr = run(folder / "cli_filter.lua", ["advise\ttype=sbatch\ttime=10:00:00\tmem-per-cpu=2000"])
    assert "OUT_OF_MEMORY likely: jobs like this one failed in 6 of their last 10 runs; ask for more --mem" in stderr
    # a job that states no time (nearest: the 60-minute shape, with more similar jobs than the 7-minute one): the
    # words that would name the time asked are left out
    _, stderr = run(folder / "cli_filter.lua", ["advise\ttype=sbatch\tmem=2G\tntasks=1"])
    assert "ask for more --time (model 3)." in stderr
    # below the advice threshold, another user, a step inside a job: silence
    for options, user in [("type=sbatch\ttime=7", "ana"), ("type=sbatch\ttime=60", "zoe")]:
        answers, stderr = run(folder / "cli_filter.lua", [f"advise\t{options}"], user=user)
        assert (answers, stderr) == (["rc=0"], "")
    assert run(folder / "cli_filter.lua", ["advise\ttype=srun\ttime=60"], SLURM_JOB_ID="12")[1] == ""
    assert run(folder / "cli_filter.lua", ["advise\ttype=srun\ttime=60"])[1].startswith("jobaware: failure risk 70%")


def test_cli_filter_finds_the_user_by_uid_without_user_or_logname(plugins):
    folder, cache = plugins
    me = pwd.getpwuid(os.getuid()).pw_name
    write_cache(cache, [verdict(me, account="", time=60)], default_partition="debug")
    assert os.readlink(cache.with_name("verdicts.tsv.users") / f"#{os.getuid()}.tsv") == f"{me}.tsv"
    env = {k: v for k, v in os.environ.items() if k not in ("USER", "LOGNAME")}
    done = subprocess.run([LUA or "lua5.1", str(DRIVER), str(folder / "cli_filter.lua"), "/dev/stdin"],
                          input="advise\ttype=sbatch\ttime=60\n", capture_output=True, text=True, timeout=60,
                          env={**env, "XDG_RUNTIME_DIR": str(folder)})
    assert done.stdout == "rc=0\n" and done.stderr.startswith("jobaware: failure risk 70%, TIMEOUT likely")


def test_gpus_from_tres_strings(plugins):
    folder, cache = plugins
    write_cache(cache, [verdict(account="", gpus=0, p_fail=0.1, kind=""), verdict(account="", gpus=4)])
    answers, _ = run(folder / "job_submit.lua", [
        f"submit\tuser_name=ana\ttime_limit=60\tmin_cpus=4\tmin_nodes=1\tmin_mem_per_node=4000\t{tres}"
        for tres in ("tres_per_node=gres:gpu:a100:4", "tres_per_job=gres:gpu:3,gres:shard:1", "nice=0")])
    results = [a for a in answers if not a.startswith("log: ")]
    assert [r.split(" ")[1] for r in results] == ["comment=jobaware:"] * 3
    assert all(r.endswith("; io-bound admin_comment=nil") for r in results)  # all exact: 4 and 3 GPUs share a bucket
    assert [r.split("failure risk ")[1][:3] for r in results] == ["70%", "70%", "10%"]


def test_a_verdict_older_than_the_caches_max_age_is_left_out(plugins):
    folder, cache = plugins
    now = int(time.time())
    write_cache(cache, [verdict(account="", time=60, created=now - 7200),
                        verdict(account="", time=600, p_fail=0.3, model_version="4", created=now - 60)], max_age=3600)
    answers, _ = run(folder / "job_submit.lua", ["submit\tuser_name=ana\ttime_limit=60\tpartition=debug"])
    assert answers[-1].startswith("rc=0 comment=jobaware: failure risk 30%;")  # the old exact verdict is gone
    assert answers[-1].endswith("; nearest shape admin_comment=nil")
    write_cache(cache, [verdict(account="", time=60, created=now - 7200)], max_age=3600)
    answers, _ = run(folder / "job_submit.lua", ["lookup\tana\t-\tdebug\t-\t-\t-\t-\t-"])
    assert answers == ["none"]


def test_a_flag_below_one_half_is_advised_without_the_word_likely(plugins):
    """The model's own flag at p=0.26 (threshold 0.24): advice, with the risk beside the threshold."""
    folder, cache = plugins
    write_cache(cache, [verdict(account="", time=60, cpus=1, mem=2000, p_fail=0.26, threshold=0.24, kind="FAILED",
                                n_failed=0, n_timeout=0, n_similar=2)], default_partition="debug")
    answers, stderr = run(folder / "cli_filter.lua", ["advise\ttype=sbatch\ttime=60\tmem=2G\tntasks=1"])
    assert stderr == ("jobaware: failure risk 26% (threshold 24%): none of the last 2 jobs like this one failed; "
                      "check the script and its inputs before submitting (model 3).\n")
    assert "likely" not in stderr
