"""The collector on a live Slurm with accounting: every job once, its states, script and final state from sacct."""

import json
import threading
import time

import pandas as pd
import pytest

from jobaware.adapters.slurm.collector import Collector, Slurm
from jobaware.contracts import validate_frames
from jobaware.failure.export import export
from jobaware.failure.reader import read_jobs
from jobaware.store import open_store
from jobaware.store.export import from_store
from jobaware.wait.export import read_export

pytestmark = pytest.mark.slow

SCRIPTS = {
    "ok": ("#!/bin/bash\necho fine\n", "COMPLETED", 0),
    "bad": ("#!/bin/bash\necho failing\nexit 1\n", "FAILED", 1),
    "slow": ("#!/bin/bash\nsleep 600\n", "TIMEOUT", None),
    "stopped": ("#!/bin/bash\nsleep 600\n", "CANCELLED", None),
}


def collect_until(collector: Collector, done, polls: int = 80, interval: float = 2.0) -> None:
    """Poll until `done()` (bounded)."""
    for _ in range(polls):
        collector.poll()
        if done():
            return
        time.sleep(interval)
    raise AssertionError("the collector did not see every job end in time")


def test_every_job_once_with_states_script_and_final_state_from_accounting(accounted, tmp_path):
    ids = {name: accounted.sbatch(script, "--time=1", f"--job-name={name}") for name, (script, _, _) in SCRIPTS.items()}
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "jobaware-test", Slurm(accounted.env), max_calls=10)
    first = collector.poll()
    assert first.calls <= 3 + 10 and "sacct" not in first.failed, first
    accounted.run("scancel", str(ids["stopped"]))
    def finals():
        return {r["job_id"]: r["final"] for r in store.records()}

    collect_until(collector, lambda: all((finals().get(i) or {}).get("source") == "sacct" for i in ids.values()))
    records = {r["job_id"]: r for r in store.records()}
    assert len(store.keys()) == len(records) == len(ids)
    for name, job_id in ids.items():
        script, state, code = SCRIPTS[name]
        record = records[job_id]
        assert record["final"]["state"] == state, (name, record)
        assert record["script"] == script
        assert record["states"][-1]["state"] == state and record["row"]["name"] == name
        if code is not None:
            assert record["final"]["exit_code"] == code, (name, record["final"])
    # COMPLETING is Slurm's passing state while a job's processes are killed: a poll may see it or not
    slow = [s["state"] for s in records[ids["slow"]]["states"] if s["state"] != "COMPLETING"]
    assert slow[-2:] == ["RUNNING", "TIMEOUT"]
    assert records[ids["slow"]]["row"]["run_time"] >= 60
    assert not store.open_keys("jobaware-test")
    # another poll, and a new collector on the same store (a restart), add nothing
    before = list(store.records())
    Collector(store, "jobaware-test", Slurm(accounted.env)).poll()
    assert [dict(r, states=r["states"]) for r in store.records()] == before
    # exported once each, in the NREL format the failure readers and the data contract take
    out = tmp_path / "jobs.csv"
    assert export(store, out) == len(ids)
    table, report = read_jobs(out)
    assert report.bad_rows == 0 and sorted(table["state"]) == sorted(s for _, s, _ in SCRIPTS.values())
    assert validate_frames([table], "nrel_jobs")["success"]


def test_a_job_that_became_eligible_and_ran_between_two_polls_waits_from_accounting_s_eligible_time(accounted,
                                                                                                   tmp_path):
    """A job held back by a dependency is seen pending on it (squeue's eligible time: 0), then becomes eligible, runs
    and ends before the next poll: only accounting says when it became eligible. The store keeps that time (so does
    a store that never saw the job pending), and the wait export enters the job into the queue then: it waits from
    its eligibility, not from its submit."""
    first = accounted.sbatch("#!/bin/bash\nsleep 3\n", "--time=1", "--job-name=first")
    after = accounted.sbatch("#!/bin/bash\necho after\n", "--time=1", "--job-name=after",
                             f"--dependency=afterok:{first}")
    uri = f"sqlite:{tmp_path / 'store'}"
    store = open_store(uri)
    collector = Collector(store, "jobaware-test", Slurm(accounted.env))
    collector.poll()
    pending = next(r for r in store.records() if r["job_id"] == after)
    assert pending["row"]["reason"] == "Dependency" and pending["row"].get("eligible_time") is None
    deadline = time.monotonic() + 60
    while accounted.run("sacct", "-n", "-X", "-P", "-o", "State", f"--jobs={after}").strip() != "COMPLETED":
        assert time.monotonic() < deadline, "the dependent job did not end in time"
        time.sleep(0.5)
    said = json.loads(accounted.run("sacct", "--json", "-X", f"--jobs={after}"))["jobs"][0]["time"]
    assert said["eligible"] >= said["submission"] + 3  # eligible once `first` had slept
    collector.poll()
    fresh = open_store(f"sqlite:{tmp_path / 'fresh'}")
    Collector(fresh, "jobaware-test", Slurm(accounted.env)).poll()  # started after the job ended
    for kept in (store, fresh):
        record = next(r for r in kept.records() if r["job_id"] == after)
        assert record["final"]["source"] == "sacct" and "RUNNING" not in [s["state"] for s in record["states"]]
        assert record["row"]["eligible_time"] == said["eligible"] + time.localtime(said["eligible"]).tm_gmtoff
    rows, problems, _ = read_export(from_store(uri, tmp_path / "export"))
    assert not problems
    row = rows.set_index("job_id").loc[after]
    assert row["submit_time"] == pd.Timestamp(said["eligible"], unit="s", tz="UTC")
    assert row["wait_s"] == said["start"] - said["eligible"] < said["start"] - said["submission"]


def test_a_redis_stream_notice_brings_a_job_in(accounted, fresh_redis):
    import redis

    from jobaware.adapters.slurm.notices import RedisNotices

    store = open_store(fresh_redis)
    collector = Collector(store, "jobaware-test", Slurm(accounted.env))
    notices = RedisNotices(fresh_redis + "?stream=slurm-jobs&group=collectors")
    stop = threading.Event()
    thread = threading.Thread(target=collector.run, args=(None, 3600.0, notices, stop))
    thread.start()
    try:
        time.sleep(1)  # the first poll is over: only the notice can bring the next job in within the hour
        job_id = accounted.sbatch("#!/bin/bash\nsleep 30\n", "--time=1", "--job-name=noticed")
        with redis.Redis.from_url(fresh_redis) as client:
            client.xadd("slurm-jobs", {"job_id": str(job_id)})
            client.xadd("slurm-jobs", {"job_id": "not a job"})
            assert wait_for_job(store, job_id)["script"] == "#!/bin/bash\nsleep 30\n"
            deadline = time.monotonic() + 20
            while client.xpending("slurm-jobs", "collectors")["pending"] and time.monotonic() < deadline:
                time.sleep(0.2)
            assert client.xpending("slurm-jobs", "collectors")["pending"] == 0  # stored, then acknowledged
    finally:
        stop.set()
        thread.join(30)
        notices.close()
    accounted.run("scancel", str(job_id))


def test_a_kafka_notice_brings_a_job_in(accounted, tmp_path):
    """librdkafka's own mock cluster (no Kafka broker can run here): a real producer and the collector's consumer."""
    import logging
    import re

    from confluent_kafka import Producer

    from jobaware.adapters.slurm.notices import KafkaNotices

    found = []

    class Bootstrap(logging.Handler):
        def emit(self, record):
            found.extend(re.findall(r"replaced with (\S+)", record.getMessage()))

    logger = logging.getLogger("test-kafka-mock")
    logger.addHandler(Bootstrap())
    logger.setLevel(logging.INFO)  # librdkafka names the mock bootstrap servers at level info
    producer = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "mock:9092", "logger": logger})
    for _ in range(100):  # bounded: 10 s
        if found:
            break
        producer.poll(0.1)
    assert found, "librdkafka's mock cluster did not start"
    store = open_store(str(tmp_path / "store"))
    collector = Collector(store, "jobaware-test", Slurm(accounted.env))
    notices = KafkaNotices(f"kafka://{found[0]}/slurm-jobs?group=collectors")
    stop = threading.Event()
    thread = threading.Thread(target=collector.run, args=(None, 3600.0, notices, stop))
    thread.start()
    try:
        time.sleep(1)
        job_id = accounted.sbatch("#!/bin/bash\nsleep 30\n", "--time=1", "--job-name=kafka")
        producer.produce("slurm-jobs", json.dumps({"job_id": job_id}).encode())
        producer.flush(10)
        assert wait_for_job(store, job_id)["script"] == "#!/bin/bash\nsleep 30\n"
    finally:
        stop.set()
        thread.join(30)
        notices.close()
    accounted.run("scancel", str(job_id))


def wait_for_job(store, job_id: int, seconds: float = 30.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for record in store.records():
            if record["job_id"] == job_id and record["script"]:
                return record
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not come in within {seconds} s")
