"""Attacks on the Slurm plugins by an ordinary user of a live one-node Slurm (slurmctld loading job_submit.lua,
every sbatch loading cli_filter.lua), started once for all of them: a comment that stalled slurmctld for every user,
and reading another user's verdicts from the cache the adapter writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.adapters.slurm.plugins import write_plugins
from jobaware.adapters.slurm.verdicts import Shape, Verdict, users_folder, write_cache

pytestmark = pytest.mark.slow
VICTIM = "nobody"  # a user of every host, whose verdicts the attacker is after


def verdict(user: str, risk: str) -> Verdict:
    return Verdict(user=user, partition="debug", comment=f"failure risk {risk}", n_similar=5,
                   advice=f"{user}'s jobs like this one failed; ask for more --time (risk {risk}).",
                   shape=Shape(time_minutes=60, nodes=1, cpus=1, mem_mib=100, gpus=0))


@pytest.fixture(scope="module")
def cluster(open_folder, local_user):
    """The cluster in a folder the attacker may pass through, munge's socket reachable: the attacker submits with
    the cluster's own sbatch, as any user of a site does; a fresh verdict cache for the attacker, the victim and root."""
    require_slurm()
    root = open_folder / "slurm"
    root.mkdir(mode=0o755)
    cache = root / "spool" / "verdicts.tsv"
    write_plugins(root, cache=str(cache), stale_after=3600)
    write_cache(cache, [verdict(local_user.name, "40%"), verdict(VICTIM, "91%"), verdict("root", "70%")],
                default_partition="debug")
    slurm = SlurmCluster(root, lua_plugins=True, cpus=4).start()
    os.chmod(root / "munge", 0o711)  # the socket itself is open to all; its folder only to pass through
    yield slurm
    slurm.stop()


def submit_as_root(cluster: SlurmCluster) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run(["sbatch", "--parsable", "--hold", f"--chdir={cluster.root / 'jobs'}", "--time=60",
                           "--mem=100", "--wrap=true"], env=cluster.env, capture_output=True, text=True, timeout=120)
    return time.monotonic() - started, done


def test_a_64_kb_comment_does_not_stall_other_users_submissions(cluster, local_user):
    """The attacker submits `--comment` of 64,000 spaces then 'x jobaware: ' three times in a row (before the fix,
    job_submit.lua backtracked over it for seconds to minutes inside slurmctld, holding its job lock, and every other
    user's sbatch failed with 'Socket timed out'); root's ordinary submissions meanwhile each complete within 1 s and
    get their verdict. The attacker's job is refused by slurmctld's own limit (1,024 bytes), as without jobaware."""
    comment = " " * 64_000 + "x jobaware: "
    attack = subprocess.Popen(
        [shutil.which("runuser") or "/usr/sbin/runuser", "-u", local_user.name, "--", "sh", "-c",
         'for i in 1 2 3; do sbatch --hold --wrap=true --comment="$COMMENT" 2>&1; echo "rc=$?"; done'],
        env={"HOME": str(local_user.home), "USER": local_user.name, "PATH": "/usr/local/bin:/usr/bin:/bin",
             "SLURM_CONF": str(cluster.conf), "COMMENT": comment},
        cwd=local_user.home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)  # the first hostile request is in slurmctld
        walls = []
        for _ in range(3):
            wall, done = submit_as_root(cluster)
            assert done.returncode == 0, done.stderr
            walls.append(wall)
            job = done.stdout.strip()
            shown = cluster.run("scontrol", "show", "job", job)
            assert "Comment=jobaware: failure risk 70%" in shown, shown
            time.sleep(0.2)
        said, _ = attack.communicate(timeout=300)
    finally:
        attack.kill()
        attack.wait()
    assert max(walls) < 1.0, walls
    assert said.count("rc=1") == 3 and "other parameter too long" in said, said


def sbatch_as(local_user, cluster: SlurmCluster, user_env: str) -> str:
    """What the attacker's sbatch printed on stderr, with $USER set to `user_env`."""
    done = local_user.run("sbatch", "--hold", "--time=60", "--mem=100", "--wrap=true", check=False,
                          env={"SLURM_CONF": str(cluster.conf), "USER": user_env, "LOGNAME": user_env})
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_user_reads_their_own_verdicts_and_no_one_elses(cluster, local_user):
    """The cache file is SlurmUser's alone and each user file readable by its user (an ACL entry): the attacker
    reads their own file and the header file, not the victim's file nor the cache (`cat`), and the CLI filter inside
    their sbatch, told by $USER that they are the victim, advises nothing (it advises them as themselves)."""
    cache = cluster.root / "spool" / "verdicts.tsv"
    users = users_folder(cache)
    for theirs in (users / f"{VICTIM}.tsv", users / "#65534.tsv", cache):
        stolen = local_user.run("cat", str(theirs), check=False)
        assert stolen.returncode != 0 and "Permission denied" in stolen.stderr, (theirs, stolen.stdout)
    assert "91%" not in sbatch_as(local_user, cluster, VICTIM)
    mine = local_user.run("cat", str(users / f"{local_user.name}.tsv"), check=False)
    assert mine.returncode == 0 and f"{local_user.name}\t" in mine.stdout
    assert local_user.run("cat", str(users / f"#{local_user.uid}.tsv"), check=False).stdout == mine.stdout
    assert local_user.run("cat", str(users / "#header.tsv"), check=False).returncode == 0
    assert sbatch_as(local_user, cluster, local_user.name) == (
        f"jobaware: {local_user.name}'s jobs like this one failed; ask for more --time (risk 40%).\n")

