"""A real `bentoml serve` of the failure service shows bounded metrics on /metrics: BentoML's requests and latency
by the service's own endpoints (10,000 random paths leave the exposition as it was), and jobaware's series (the
model version served, when it was registered and its evaluation, errors by reason)."""

from __future__ import annotations

import random
import string

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobaware import metrics
from tests.serving.test_failure_service import JOB

pytestmark = pytest.mark.slow
BOUND_BYTES = 128 << 10  # the exposition's bound: what it holds is fixed by the routes, never by the paths asked
RANDOM_PATHS = 10_000


def exposition(url: str) -> str:
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return response.text


def series(text: str) -> dict[tuple, float]:
    """Every sample of an exposition: (name, sorted labels) -> value."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def random_path(rng: random.Random) -> str:
    """A path no route has: a letter, then up to 119 of any character a path may hold."""
    alphabet = string.ascii_letters + string.digits + "-._~%/!$&'()*+,;=:@"
    tail = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 119))).replace("%", "%25")
    return "/x" + rng.choice(string.ascii_letters) + tail


@pytest.mark.timeout(600)
def test_ten_thousand_random_paths_leave_the_exposition_bounded(failure_service):
    """Before the bound, each unknown path became a new series of BentoML's counter, histogram and gauge (300 random
    404s: 43 KB -> 1.43 MB). Now every path outside the service's own is counted as `other`: after 10,000 random
    paths the exposition holds the same series as after the first 100, under BOUND_BYTES."""
    rng = random.Random(49)
    with httpx.Client(base_url=failure_service, timeout=30) as client:
        for _ in range(100):
            assert client.get(random_path(rng)).status_code in (404, 405)
        early = series(exposition(failure_service))
        for _ in range(RANDOM_PATHS - 100):
            assert client.get(random_path(rng)).status_code in (404, 405)
    text = exposition(failure_service)
    late = series(text)
    assert len(text.encode()) < BOUND_BYTES, f"{len(text.encode()):,} bytes"
    assert set(late) == set(early), sorted(set(late) ^ set(early))[:5]
    endpoints = {dict(labels).get("endpoint") for name, labels in late if name == "bentoml_service_request_total"}
    assert "other" in endpoints and endpoints <= {"/predict", "/readyz", "/livez", "/metrics", "other", "/docs",
                                                   "/", "/docs.json", "/static_content/"}, endpoints
    counted = sum(value for (name, labels), value in late.items()
                  if name == "bentoml_service_request_total" and dict(labels)["endpoint"] == "other")
    assert counted >= RANDOM_PATHS  # counted, under one label


def test_the_service_shows_its_model_and_its_errors(failure_service, champion):
    assert httpx.post(f"{failure_service}/predict", json={"jobs": [JOB]}, timeout=30).status_code == 200
    bad = httpx.post(f"{failure_service}/predict", json={"jobs": [{**JOB, "nodes_req": -2}]}, timeout=30)
    assert bad.status_code == 400
    found = series(exposition(failure_service))
    assert found[("jobaware_service_model_info", (("capability", "failure"), ("version", champion)))] == 1
    created = found[("jobaware_service_model_created_timestamp_seconds", (("capability", "failure"),))]
    assert 1.7e9 < created
    [evaluation] = [value for (name, labels), value in found.items() if name == "jobaware_model_evaluation"
                    and dict(labels) == {"capability": "failure", "model_version": champion, "figure": "roc_auc",
                                         "better": "higher"}]
    assert 0.5 < evaluation <= 1.0
    assert found[("jobaware_service_registry_failing", (("capability", "failure"),))] == 0
    errors = found[("jobaware_service_errors_total", (("endpoint", "/predict"), ("reason", "bad_input"),
                                                      ("service", "jobaware-failure")))]
    assert errors >= 1
    names = {name for name, _ in found}
    for family in metrics.BENTOML:  # the BentoML series the rules and the dashboard use are there
        assert family.samples() & names, family.name
