"""`jobaware card` and `jobaware <key> JOBID` where Slurm cannot answer: one error line that says why."""

import os
import subprocess
import sys
from pathlib import Path

FAILING_SQUEUE = """#!/bin/sh
echo "squeue: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host" >&2
echo "squeue: fatal: Could not establish a configuration source" >&2
exit 1
"""


def test_squeue_failing_is_one_line_naming_squeues_reason_not_an_unknown_job(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text(FAILING_SQUEUE)
    squeue.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "JOBAWARE_HOME": str(tmp_path / "home")}
    for args in (["card", "42"], ["wait", "42"]):
        done = subprocess.run([str(Path(sys.executable).parent / "jobaware"), *args], capture_output=True, text=True, env=env,
                              timeout=120, cwd=Path(__file__).resolve().parents[3])
        assert done.returncode == 1, done.stderr
        assert done.stdout == ""
        assert done.stderr == ("error: squeue failed, so no job's card can be made: squeue: fatal: Could not establish "
                               "a configuration source\n"), done.stderr
    assert "Unknown host" in (tmp_path / "home" / "logs" / "card.log").read_text()  # the rest is in the log
