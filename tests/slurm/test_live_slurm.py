"""A real one-node Slurm: submit jobs that succeed, fail and time out; predict for their live records."""

import json
import time

import httpx
import pytest

from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.adapters.slurm.collector import Collector, Slurm
from jobaware.contracts import validate_frames
from jobaware.failure.export import export
from jobaware.failure.reader import read_jobs
from jobaware.failure.reader.slurm import read_squeue_json
from jobaware.store import open_store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_slurm()
    slurm = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    yield slurm
    slurm.stop()


def test_service_predicts_for_live_slurm_records(cluster, failure_service, tmp_path):
    ids = {
        "ok": cluster.sbatch("#!/bin/bash\necho fine\n", "--time=1", "--job-name=ok"),
        "bad": cluster.sbatch("#!/bin/bash\nexit 3\n", "--time=1", "--job-name=bad"),
        "slow": cluster.sbatch("#!/bin/bash\nsleep 600\n", "--time=1", "--job-name=slow"),
        "held": cluster.sbatch("#!/bin/bash\ntrue\n", "--time=5", "--job-name=held", "--hold"),
    }
    expected = {"ok": "COMPLETED", "bad": "FAILED", "slow": "TIMEOUT", "held": "PENDING"}
    states = {}
    for _ in range(60):  # bounded: a one-minute limit is enforced within about two minutes
        output = cluster.run("squeue", "--json", "--states=all")
        snapshot = tmp_path / "squeue.json"
        snapshot.write_text(output)
        jobs = read_squeue_json(snapshot)[0].set_index("name")
        states = jobs["state"].to_dict()
        if states == expected:
            break
        time.sleep(3)
    assert states == expected, cluster.logs()
    assert jobs.loc["slow", "run_time"] >= 60 and jobs.loc["ok", "end_time"] >= jobs.loc["ok", "start_time"]
    records = json.loads(output)["jobs"]
    response = httpx.post(f"{failure_service}/predict", json={"jobs": records}, timeout=60)
    assert response.status_code == 200, response.text
    predictions = {p["job_id"]: p for p in response.json()["predictions"]}
    assert set(predictions) == set(ids.values())
    assert all(0 <= p["p_fail"] <= 1 for p in predictions.values())
    shown = cluster.run("scontrol", "show", "job", str(ids["slow"]))
    assert "JobState=TIMEOUT" in shown
    # without accounting, the collector keeps the finished jobs from squeue and scontrol, once, and exports them
    # in the NREL format the pipeline trains on
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "jobaware-test", Slurm(cluster.env))
    assert collector.poll().finished == 3 and collector.accounting is False
    assert collector.poll().finished == 0
    assert {r["final"]["source"] for r in store.records() if r["final"]} == {"observed"}
    collected = tmp_path / "collected.csv"
    assert export(store, collected) == 3
    table, report = read_jobs(collected)
    assert report.bad_rows == 0 and sorted(table["state"]) == ["COMPLETED", "FAILED", "TIMEOUT"]
    assert validate_frames([table], "nrel_jobs")["success"]
