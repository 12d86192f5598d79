"""The collector (root or SlurmUser) reads a killed job's error file, whose path the job's owner chose: it reads only a
regular file that owner owns, never through a link, never blocking on a FIFO, and so no user can stop collection or
learn a bit of another's file."""

from __future__ import annotations

import os
import threading

from jobaware.adapters.slurm.collector import said_memory, scontrol_uid

WORDS = "slurmstepd: error: Exceeded job memory limit\n"


def _within(seconds: float, call):
    """`call()`'s result, or 'blocked' when it has not returned within `seconds`."""
    result = ["blocked"]
    thread = threading.Thread(target=lambda: result.__setitem__(0, call()), daemon=True)
    thread.start()
    thread.join(seconds)
    return result[0]


def test_a_fifo_named_as_the_error_file_does_not_block_the_collector(local_user):
    fifo = local_user.home / "slurm-1.err"
    local_user.run("mkfifo", str(fifo))
    assert _within(5, lambda: said_memory(str(fifo), local_user.uid)) is False


def test_a_link_to_a_root_file_is_not_followed(local_user, tmp_path):
    secret = tmp_path / "root-only"  # a root-only file that happens to hold the words
    secret.write_text(WORDS)
    secret.chmod(0o600)
    link = local_user.home / "slurm-2.err"
    local_user.run("ln", "-s", str(secret), str(link))
    assert said_memory(str(link), local_user.uid) is False
    # a link higher up the path: the file reached is root's, not the job owner's
    local_user.run("ln", "-s", str(tmp_path), str(local_user.home / "up"))
    assert said_memory(str(local_user.home / "up" / "root-only"), local_user.uid) is False


def test_the_owner_s_own_error_file_is_read(local_user):
    local_user.run("sh", "-c", f"printf '%s' '{WORDS}' > slurm-3.err")
    assert said_memory(str(local_user.home / "slurm-3.err"), local_user.uid) is True
    assert said_memory(str(local_user.home / "slurm-3.err"), local_user.uid + 1) is False
    assert said_memory("relative/path.err", local_user.uid) is False


def test_scontrol_names_the_owner():
    assert scontrol_uid("alice(1234)") == 1234 and scontrol_uid("x" * 10_000) is None and scontrol_uid(None) is None
    assert scontrol_uid("evil(12)(0)") is None and os.getuid() >= 0
