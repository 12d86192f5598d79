"""The hostile requests of the reliability review (issue 11), kept as regression tests: every one is answered
with a short 4xx naming the field, quickly, and the service stays up."""

import json
import time

import httpx
import pytest

from tests.conftest import SQUEUE
from tests.serving.test_failure_service import JOB

pytestmark = pytest.mark.slow
SQUEUE_JOB = json.loads(SQUEUE.read_text())["jobs"][0]


def raw(url: str, text: str) -> httpx.Response:
    return httpx.post(f"{url}/predict", content=text.encode(), headers={"content-type": "application/json"}, timeout=60)


def canonical(**changes) -> str:
    return json.dumps({"jobs": [{**JOB, **changes}]})  # allow_nan: NaN and Infinity go out as JSON5 tokens


def squeue(**changes) -> str:
    return json.dumps({"jobs": [{**SQUEUE_JOB, **changes}]})


HOSTILE = {
    "job_id 1e30": (canonical(job_id=10**30), "job_id"),
    "processors_req 1e30": (canonical(processors_req=10**30), "processors_req"),
    "nodes_req Infinity": (canonical(nodes_req=float("inf")), "nodes_req"),
    "nodes_req NaN": (canonical(nodes_req=float("nan")), "nodes_req"),
    "wallclock_req Infinity": (canonical(wallclock_req=float("inf")), "wallclock_req"),
    "wallclock_req NaN": (canonical(wallclock_req=float("nan")), "wallclock_req"),
    "submit_time 1e20 ms": (canonical(submit_time=10**20), "submit_time"),
    "squeue submit_time 1e20": (squeue(submit_time=10**20), "submit_time"),
    "squeue node_count 1.5": (squeue(node_count=1.5), "node_count"),
    "squeue negative cpus": (squeue(cpus=-4), "cpus"),
    "squeue negative node_count": (squeue(node_count=-1), "node_count"),
    "squeue job_state object": (squeue(job_state={"a": 1}), "job_state"),
    "squeue time_limit abc": (squeue(time_limit="abc"), "time_limit"),
    "amplification 2e8 cpus": ('{"jobs":[{"job_id":77,"job_state":"PENDING","memory_per_node":0,'
                               '"memory_per_cpu":"a","cpus":200000000}]}', "jobs[0]"),
    "amplification 1e11 cpus": ('{"jobs":[{"job_id":77,"job_state":"PENDING","memory_per_node":0,'
                                '"memory_per_cpu":"a","cpus":100000000000}]}', "jobs[0]"),
    "deeply nested JSON": ('{"jobs":' + "[" * 100_000 + "]" * 100_000 + "}", ""),
    "a 1 MB user name": (canonical(user="u" * 1_000_000), "user"),
    "2,000 items that are not jobs": ('{"jobs": [' + ",".join(["Infinity"] * 2_000) + "]}", "jobs[0]: expected an object"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_request_gets_a_short_4xx_naming_the_field(failure_service, name):
    body, field = HOSTILE[name]
    started = time.monotonic()
    response = raw(failure_service, body)
    seconds = time.monotonic() - started
    assert 400 <= response.status_code < 500, f"{name}: {response.status_code} {response.text[:300]}"
    assert len(response.content) < 4096, f"{name}: a {len(response.content):,}-byte error"
    assert field in response.text, response.text[:300]
    assert "Traceback" not in response.text
    assert seconds < 5, f"{name}: answered after {seconds:.1f} s"
    assert httpx.get(f"{failure_service}/readyz", timeout=5).status_code == 200
