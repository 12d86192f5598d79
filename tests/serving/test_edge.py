"""What every service shares, seen from outside on a real `bentoml serve`: one error shape on every route, the
docs page in a real browser loading nothing from elsewhere, and each service counting its own requests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from harness.ports import stop
from tests.conftest import free_port, wait_for
from tests.serving.test_failure_service import JOB

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
SECRET = "do-not-echo-" + "x" * 40


def shape(response: httpx.Response) -> dict:
    """The error body, checked to be the one shape: {"error": one line, "field": a JSON path or null}."""
    body = response.json()
    assert set(body) == {"error", "field"}, response.text[:300]
    assert isinstance(body["error"], str) and "\n" not in body["error"] and len(body["error"]) <= 500
    assert body["field"] is None or isinstance(body["field"], str)
    assert response.headers["content-type"].startswith("application/json")
    return body


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "field", "words"), [
    ("POST", "/predict", {"json": {"jobs": [JOB, {**JOB, "nodes_req": -2}]}}, 400, "jobs[1].nodes_req",
     "expected a non-negative number"),
    ("POST", "/predict", {"json": {"jobs": [JOB], SECRET: 1}}, 400, SECRET, "unknown field"),
    ("POST", "/predict", {"json": {"job": [JOB]}}, 400, "job", "unknown field"),
    ("POST", "/predict", {"json": [JOB]}, 400, None, "body: expected an object"),
    ("POST", "/predict", {"content": b"{nope", "headers": {"content-type": "application/json"}}, 400, None,
     "body: not valid JSON"),
    ("POST", "/predict", {"data": {"jobs": SECRET}}, 415, None, "expected JSON"),  # a form: never echoed
    ("POST", "/predict", {"content": b"x", "headers": {"content-type": "application/vnd.bentoml+pickle"}}, 415, None,
     "not allowed"),
    ("GET", "/predict", {}, 405, None, "Method Not Allowed"),
    ("GET", "/no-such-route", {}, 404, None, "Not Found"),
])
def test_every_error_has_one_shape_and_echoes_no_body(failure_service, method, path, kwargs, status, field, words):
    response = httpx.request(method, f"{failure_service}{path}", timeout=30, **kwargs)
    assert response.status_code == status, response.text[:300]
    body = shape(response)
    assert body["field"] == (field if field != SECRET else SECRET[:100]) and words in body["error"], body
    if "data" in kwargs:
        assert SECRET not in response.text


def test_an_answer_keeps_its_envelope(failure_service, champion):
    answer = httpx.post(f"{failure_service}/predict", json={"jobs": [JOB]}, timeout=30).json()
    assert set(answer) == {"model_version", "predictions", "fit"} and answer["model_version"] == champion


def _chromium(url: str, folder: Path) -> tuple[str, list[dict]]:
    """The page's DOM after its scripts ran, and the requests of the browser's network log (url, initiator)."""
    log = folder / "net.json"
    result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={folder / 'profile'}", f"--log-net-log={log}",
                             "--virtual-time-budget=15000", "--dump-dom", url],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    net = json.loads(log.read_text())
    start = net["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return result.stdout, [e["params"] for e in net["events"] if e["type"] == start and "url" in e.get("params", {})]


@pytest.mark.timeout(300)
def test_the_docs_page_shows_the_document_and_loads_nothing_from_elsewhere(failure_service, tmp_path):
    """A real headless browser opens /docs: the page draws the service's OpenAPI document (the /predict operation)
    and every request the page makes goes to the service itself. The browser's own background calls (updates,
    sign-in; no initiator) are not the page's."""
    if CHROMIUM is None:
        if os.environ.get("JOBAWARE_REQUIRE_BROWSER") == "1":
            pytest.fail("JOBAWARE_REQUIRE_BROWSER=1 but no chromium (apt-get install chromium)")
        pytest.skip("chromium is not installed (Debian package 'chromium'); set JOBAWARE_REQUIRE_BROWSER=1 to fail")
    origin = failure_service
    dom, requests = _chromium(f"{origin}/docs", tmp_path)
    assert "jobaware-failure" in dom and "/predict" in dom and "JobPrediction" in dom, dom[-2000:]
    page = [r for r in requests if r.get("initiator") == origin or r["url"].startswith(origin)]
    assert {urlsplit(r["url"]).path for r in page} >= {"/docs", "/docs.json", "/static_content/swagger-ui-bundle.js"}
    elsewhere = [r["url"] for r in requests if r.get("initiator") == origin and not r["url"].startswith(origin)]
    assert not elsewhere, f"the page loads from elsewhere: {elsewhere}"
    for path in ("/", "/docs"):  # BentoML's own index page (a tag manager from the internet) is not served
        html = httpx.get(f"{origin}{path}", timeout=10).text
        assert "googletagmanager" not in html and "https://" not in html


def _requests_counted(url: str) -> dict[str, float]:
    """Requests counted by a service's /metrics, by endpoint."""
    from prometheus_client.parser import text_string_to_metric_families

    counted: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == "bentoml_service_request_total":
                endpoint = sample.labels["endpoint"]
                counted[endpoint] = counted.get(endpoint, 0.0) + sample.value
    return counted


@pytest.mark.timeout(300)
def test_two_services_from_one_home_each_count_their_own_requests(failure_service, tmp_path):
    """A second service started from the same JOBAWARE_HOME (here `hold`, answering 503 without a champion) keeps
    its own Prometheus folder: the first keeps counting its requests, and neither shows the other's."""
    for _ in range(2):
        httpx.post(f"{failure_service}/predict", json={"jobs": [JOB]}, timeout=30)
    before = _requests_counted(failure_service).get("/predict", 0)
    port = free_port()
    process = subprocess.Popen([str(Path(sys.executable).with_name("jobaware")), "serve", "hold", "--port", str(port)],
                               stdout=open(tmp_path / "hold.log", "wb"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    hold = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{hold}/livez", 180, process)
        for _ in range(3):
            assert httpx.post(f"{hold}/hold-decision", json={"cluster": 1, "proc": 0, "log": "x"},
                              timeout=30).status_code == 503
        for _ in range(2):
            assert httpx.post(f"{failure_service}/predict", json={"jobs": [JOB]}, timeout=30).status_code == 200
        failure, held = _requests_counted(failure_service), _requests_counted(hold)
    finally:
        stop(process)
    assert failure.get("/predict") == before + 2, failure
    assert held.get("/hold-decision") == 3 and "/predict" not in held, held
    assert "/hold-decision" not in failure, failure
