"""A real `bentoml serve` on loopback, called with good and bad requests."""

import json
import time

import httpx
import pytest

from jobaware import gate, tracking
from tests.conftest import SQUEUE
from tests.fuzzing import answer_validator

pytestmark = pytest.mark.slow
JOB = {"job_id": 11, "user": "user0001", "account": "account0001", "partition": "partition002", "qos": "normal",
       "wallclock_req": 3600.0, "nodes_req": 2, "processors_req": 72, "gpus_req": 0, "mem_req": 0.0,
       "submit_time": "2019-03-01 10:00:00"}


def post(url, body, **kwargs):
    return httpx.post(f"{url}/predict", json=body, timeout=60, **kwargs)


def test_predicts_canonical_and_squeue_records(failure_service, champion):
    squeue_jobs = json.loads(SQUEUE.read_text())["jobs"]
    response = post(failure_service, {"jobs": [JOB, *squeue_jobs]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_version"] == champion
    document = httpx.get(f"{failure_service}/docs.json").json()
    assert answer_validator(document, "/predict").is_valid(body)  # what the OpenAPI document promises
    assert body["fit"] == []  # the session's champion was trained before profiles: nothing to compare with
    predictions = body["predictions"]
    assert [p["job_id"] for p in predictions] == [11, 1, 2, 3, 4]
    for p in predictions:
        total = p["p_COMPLETED"] + p["p_FAILED"] + p["p_TIMEOUT"] + p["p_OUT_OF_MEMORY"] + p["p_NODE_FAIL"]
        assert total == pytest.approx(1.0) and p["p_fail"] == pytest.approx(1 - p["p_COMPLETED"])
        assert p["most_likely_failure"] in {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}
    threshold = tracking.load_bundle("failure", champion)[0].threshold  # the registered operating threshold
    assert all(p["threshold"] == threshold and p["likely_fail"] == (p["p_fail"] >= threshold) for p in predictions)


@pytest.mark.parametrize(("body", "needle"), [
    ({"jobs": [{**JOB, "wallclock_req": "abc"}]}, 'jobs[0].wallclock_req: expected a number, got \\"abc\\"'),
    ({"jobs": [JOB, {**JOB, "nodes_req": -2}]}, "jobs[1].nodes_req: expected a non-negative number"),
    ({"jobs": [{**JOB, "colour": "red"}]}, "jobs[0].colour: unknown field"),
    ({"jobs": []}, "jobs: expected a non-empty list"),
    ({"jobs": "all of them"}, "jobs: expected a non-empty list"),
    ({"jobs": 7}, "jobs: expected a non-empty list"),
    ({"job": [JOB]}, "job: unknown field"),
    ({"jobs": [JOB], "colour": "red"}, "colour: unknown field"),
    ({}, "jobs: expected a non-empty list"),
])
def test_bad_requests_get_a_4xx_naming_the_field(failure_service, body, needle):
    response = post(failure_service, body)
    assert response.status_code == 400, response.text
    assert needle in response.text and set(response.json()) == {"error", "field"}


def test_broken_json_is_a_400(failure_service):
    response = httpx.post(f"{failure_service}/predict", content=b"{nope", headers={"content-type": "application/json"})
    assert response.status_code == 400


def test_health_metrics_and_openapi(failure_service):
    assert httpx.get(f"{failure_service}/livez").status_code == 200
    assert httpx.get(f"{failure_service}/readyz").status_code == 200
    post(failure_service, {"jobs": [JOB]})
    metrics = httpx.get(f"{failure_service}/metrics").text
    assert "bentoml_service_request_total" in metrics or "bentoml_api_server_request_total" in metrics
    spec = httpx.get(f"{failure_service}/docs.json").json()
    assert "/predict" in spec["paths"]
    answer = spec["components"]["schemas"]["JobPrediction"]
    assert {"likely_fail", "threshold"} <= set(answer["required"])
    assert "operating threshold" in answer["properties"]["threshold"]["description"]


def test_picks_up_a_new_champion_without_restart(failure_service, champion):
    from jobaware.failure.reader import read_jobs
    from tests.jobaware.test_tracking import _log

    jobs = read_jobs(__import__("tests.conftest", fromlist=["x"]).ROOT / "jobaware/data/real/swf/KTH-SP2-1996-2.1-cln.swf")[0]
    new, _ = _log(jobs.iloc[:8000], {"max_iter": 30})
    assert gate.promote("failure", new, force=True)["champion"] == new
    try:
        seen = None
        for _ in range(30):  # bounded: the service checks the registry every JOBAWARE_RELOAD_SECONDS (1 s here)
            seen = post(failure_service, {"jobs": [JOB]}).json()["model_version"]
            if seen == new:
                break
            time.sleep(1)
        assert seen == new
    finally:
        gate.rollback("failure")


def test_real_nrel_records_are_predicted_over_http(failure_service, champion):
    from tests.conftest import NREL_JSON

    records = json.loads(NREL_JSON.read_text())[:50]  # the published JSON encoding, epoch-ms times included
    response = post(failure_service, {"jobs": records})
    assert response.status_code == 200, response.text
    predictions = response.json()["predictions"]
    assert [p["job_id"] for p in predictions] == [r["job_id"] for r in records]
    assert all(0 <= p["p_fail"] <= 1 for p in predictions)


def test_a_locked_store_stalls_no_request(failure_service, champion):
    import sqlite3

    from jobaware import config

    serving = tracking.champion_version("failure")  # earlier tests moved it: let the service catch up first
    deadline = time.monotonic() + 30
    while post(failure_service, {"jobs": [JOB]}).json()["model_version"] != serving and time.monotonic() < deadline:
        time.sleep(0.5)
    lock = sqlite3.connect(config.local_store(config.tracking_uri()), timeout=30)
    lock.execute("BEGIN EXCLUSIVE")  # another process holds the store: every refresh of the champion fails
    try:
        time.sleep(3)  # the service tries to refresh (every JOBAWARE_RELOAD_SECONDS=1) while the store is locked
        for _ in range(3):
            started = time.monotonic()
            assert httpx.get(f"{failure_service}/readyz", timeout=5).status_code == 200
            answer = post(failure_service, {"jobs": [JOB]})
            assert answer.status_code == 200 and answer.json()["model_version"] == serving
            seconds = time.monotonic() - started
            assert seconds < 3, f"a request waited {seconds:.1f} s on the locked store"
    finally:
        lock.rollback()
        lock.close()
