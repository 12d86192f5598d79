"""A collector unit started before slurmctld answers (a new cluster, a restart in any order) waits for it, saying so
once, and then collects as usual; a bounded run is still refused in one line."""

import subprocess
import sys
import time

import pytest

from harness.ports import stop
from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.store import open_store
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _wait(condition, seconds: float) -> None:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "timed out"
        time.sleep(0.2)


def test_a_collector_started_before_slurm_waits_then_collects(tmp_path):
    """Issue 51: daemons that poll start on what is not there yet. Before, `slurm collect --forever` exited 1 at once
    ('scontrol show config gave no ClusterName; is Slurm reachable?'), and its unit died."""
    require_slurm()
    (tmp_path / "slurm").mkdir()
    cluster = SlurmCluster(tmp_path / "slurm")  # its slurm.conf written, and its daemons started, later
    env = {**cluster.env, "JOBAWARE_HOME": str(tmp_path / "home"), "JOBAWARE_CONFIG": "/nonexistent"}
    store = str(tmp_path / "store")
    once = subprocess.run([sys.executable, "-m", "jobaware.adapters.slurm", "collect", "--store", store, "--timeout",
                           "3"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert once.returncode == 1 and once.stderr.startswith("error: scontrol show config: "), once.stderr
    said = tmp_path / "collect.err"
    process = subprocess.Popen([sys.executable, "-m", "jobaware.adapters.slurm", "collect", "--store", store,
                                "--forever", "--interval", "2", "--timeout", "3"], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=open(said, "wb"), start_new_session=True)
    try:
        _wait(lambda: "waiting for Slurm to answer" in said.read_text() or process.poll() is not None, 60)
        time.sleep(3)  # more asks than one
        assert process.poll() is None, said.read_text()
        cluster.start()
        job = cluster.sbatch("#!/bin/bash\necho started late\n")

        def collected() -> bool:
            with open_store(store) as opened:
                return any(record["job_id"] == job for record in opened.records())

        _wait(collected, 120)
    finally:
        stop(process)
        cluster.stop()
    text = said.read_text()
    assert text.count("waiting for Slurm to answer") == 1 and "poll 1: " in text, text
