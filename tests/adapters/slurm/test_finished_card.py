"""`jobaware card` for jobs squeue no longer lists: with the site's store, the card the adapter kept before the job
ran (its newest, and only the adapter's) beside what happened; without one, the one-line error."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from jobaware.cli import app
from jobaware.store import JobKey, open_store
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import SQUEUE
from tests.jobaware.usage.conftest import CLUSTER, FAILURE_SAID, card, record, usage

DAY = 86_400


@pytest.fixture
def store_uri(tmp_path) -> str:
    """Job 103 timed out (two adapter cards, and a newer card under another name); array 300's three tasks finished
    (the card kept on the array's record, job 300, while they were pending); job 90 finished 40 days ago."""
    submit = int(time.time()) - 2 * DAY
    uri = str(tmp_path / "store")
    with open_store(uri) as store, store.batch():
        store.put_record(record(103, submit, "bob", "TIMEOUT", usage(600, 600, 1, 590.0, 500.0, 450.0, "TIMEOUT"),
                                exit_code=0, signal=15))
        store.put_prediction(JobKey(CLUSTER, 103, submit), "adapter:failure=2:dry-run",
                             card({"failure": {**FAILURE_SAID, "p_fail": 0.1, "model_version": "2"}}, submit + 1))
        store.put_prediction(JobKey(CLUSTER, 103, submit), "adapter:failure=3:dry-run",
                             card({"failure": FAILURE_SAID}, submit + 2))
        store.put_prediction(JobKey(CLUSTER, 103, submit), "report:failure=9",
                             card({"failure": {**FAILURE_SAID, "p_fail": 0.01}}, submit + 3))
        for task in range(3):
            state = "FAILED" if task == 2 else "COMPLETED"
            store.put_record(record(300 + task, submit + 10, "dave", state,
                                    usage(100, 1200, 1, 50.0, 2048.0, 256.0, state, array_job_id=300,
                                          array_task_id=task), exit_code=1 if task == 2 else 0))
        store.put_prediction(JobKey(CLUSTER, 300, submit + 10), "adapter:failure=3:dry-run",
                             card({"failure": {**FAILURE_SAID, "p_fail": 0.64}}, submit + 11))
        store.put_record(record(90, submit - 40 * DAY, "carol", "COMPLETED", usage(60, 600, 1, 60.0, 100.0, 50.0)))
    return uri


@pytest.fixture
def empty_queue(monkeypatch, tmp_path):
    """squeue lists no job (every job asked for has finished)."""
    from jobaware.adapters.slurm import collector

    monkeypatch.setenv("JOBAWARE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("JOBAWARE_STORE", raising=False)
    squeue = json.dumps({**json.loads(SQUEUE.read_text()), "jobs": []})
    monkeypatch.setattr(collector, "Slurm", lambda timeout=30: Replay(squeue=squeue, **NO_ACCOUNTING))


def test_a_finished_job_shows_the_adapters_newest_card_beside_what_happened(store_uri, empty_queue):
    shown = CliRunner().invoke(app, ["card", "103", "--store", store_uri, "--json"])
    assert shown.exit_code == 0, shown.output
    answer = json.loads(shown.stdout)
    assert answer["parts"]["failure"]["p_fail"] == 0.82  # the adapter's newest, not the report's newer card
    happened = answer["happened"]
    assert happened["finished"] and happened["state"] == "TIMEOUT" and happened["signal"] == 15
    assert happened["elapsed_s"] == 600 and happened["time_eff"] == 1.0 and happened["mem_eff"] == 0.9
    assert [(s["part"], s["model_version"]) for s in happened["said"]] == [("failure", "3")]
    assert "p_fail 0.82" in happened["said"][0]["said"]

    table = CliRunner().invoke(app, ["card", "103", "--store", store_uri])
    assert table.exit_code == 0, table.output
    assert "job 103: said before it ran" in table.stdout and "job 103: what happened" in table.stdout
    assert "TIMEOUT, exit 0, signal 15" in table.stdout and "0:10:00 of 0:10:00" in table.stdout

    line = CliRunner().invoke(app, ["card", "103", "--part", "failure"], env={"JOBAWARE_STORE": store_uri})
    assert line.exit_code == 0, line.output
    assert line.stdout.strip().startswith("job 103: failure: ")
    assert line.stdout.strip().endswith("; model 3 (said before it ran; it ended TIMEOUT, exit 0, signal 15)")
    other = CliRunner().invoke(app, ["card", "103", "--part", "wait", "--store", store_uri])
    assert other.exit_code == 1 and str(other.exception) == \
        "job 103: no wait part: unavailable: no such part in the card kept"


def test_a_finished_array_task_shares_the_card_kept_for_its_array(store_uri, empty_queue):
    shown = CliRunner().invoke(app, ["card", "300_[1-2]", "--store", store_uri, "--json"])
    assert shown.exit_code == 0, shown.output
    first, second = json.loads(shown.stdout)
    assert first["parts"]["failure"]["p_fail"] == second["parts"]["failure"]["p_fail"] == 0.64
    assert (first["happened"]["job_id"], first["happened"]["state"]) == (301, "COMPLETED")
    assert (second["happened"]["job"], second["happened"]["state"], second["happened"]["exit_code"]) == \
        ("300_2", "FAILED", 1)


def test_without_a_store_or_outside_the_window_one_line(store_uri, empty_queue):
    alone = CliRunner().invoke(app, ["card", "103"])
    assert alone.exit_code == 1
    assert str(alone.exception) == "job 103: not known to squeue (pending or running jobs have cards)"
    old = CliRunner().invoke(app, ["card", "90", "--store", store_uri])
    assert old.exit_code == 1 and str(old.exception) == \
        "job 90: not known to squeue, nor among the store's jobs submitted since 30d (--since)"
    wider = CliRunner().invoke(app, ["card", "90", "--store", store_uri, "--since", "60d", "--json"])
    assert wider.exit_code == 0, wider.output
    answer = json.loads(wider.stdout)
    assert answer["parts"] == {} and answer["created"] is None and answer["happened"]["state"] == "COMPLETED"
    none = CliRunner().invoke(app, ["card", "90", "--store", store_uri, "--since", "all"])
    assert "job 90: no card was kept before it ran" in none.stdout
    bare = CliRunner().invoke(app, ["card", "90", "--store", store_uri, "--since", "60"])  # days? hours? never guessed
    assert bare.exit_code != 0 and "--since '60': a time ago needs its unit: 60d (days), 60h, 60m or 60w" in str(
        bare.exception)
    task = CliRunner().invoke(app, ["card", "300_7", "--store", store_uri])
    assert task.exit_code == 1 and "job 300_7: not known to squeue, nor among" in str(task.exception)
