"""A job killed for memory on a live Slurm that enforces it (jobacct_gather/linux, OverMemoryKill): Slurm's
accounting says `FAILED 0:9`; the store keeps OUT_OF_MEMORY with the exit code and the signal."""

import pytest

from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.adapters.slurm.collector import Collector, Slurm
from jobaware.store import open_store
from tests.adapters.slurm.test_collector_live import collect_until

pytestmark = pytest.mark.slow

HOG = ("#!/bin/bash\npython3 -c \"import time; x = bytearray(300 * 2**20); x[::4096] = b'x' * len(x[::4096]); "
       "time.sleep(30)\"\n")


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory):
    require_slurm(accounting=True)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm-memory"), accounting=True, cpus=4, enforce_memory=True).start()
    yield cluster
    cluster.stop()


def test_a_job_over_its_memory_is_stored_out_of_memory_with_code_and_signal(enforcing, tmp_path):
    ids = {"hog": enforcing.sbatch(HOG, "--mem=100", "--time=2"),
           "ok": enforcing.sbatch("#!/bin/bash\nsleep 1\n", "--mem=100", "--time=2"),
           "held": enforcing.sbatch("#!/bin/bash\nsleep 1\n", "--hold", "--time=2")}
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "jobaware-test", Slurm(enforcing.env))
    collector.poll()
    enforcing.run("scancel", str(ids["held"]))

    def finals() -> dict:
        return {r["job_id"]: r["final"] for r in store.records()}

    # accounting lists no job that was never eligible in its window: the held job ends as squeue saw it
    collect_until(collector, lambda: all((finals().get(i) or {}).get("source") == "sacct" for i in ids.values()
                                         if i != ids["held"]) and finals().get(ids["held"]), polls=60, interval=1.0)
    got = finals()
    assert got[ids["hog"]] == {"state": "OUT_OF_MEMORY", "source": "sacct", "exit_code": 0, "signal": 9}
    assert got[ids["ok"]] == {"state": "COMPLETED", "source": "sacct", "exit_code": 0, "signal": None}
    assert got[ids["held"]]["state"] == "CANCELLED"
    hog = next(r for r in store.records() if r["job_id"] == ids["hog"])
    assert [s["state"] for s in hog["states"]][-1] == "FAILED" and hog["row"]["state"] == "OUT_OF_MEMORY"  # Slurm's word
    sacct = enforcing.run("sacct", "-P", "-n", "-X", "-o", "State,ExitCode", "-j", str(ids["hog"]))
    assert sacct.strip() == "FAILED|0:9"  # what Slurm itself says of it
