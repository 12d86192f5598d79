"""The catalogue of jobaware's series (one spelling of each name, bounded labels) and a daemon's /metrics over real
HTTP on loopback: the exposition, nothing elsewhere, a slow client cut off, a flood of connections kept to a few."""

from __future__ import annotations

import re
import socket
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from jobaware import metrics
from jobaware.errors import JobawareError

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
UNBOUNDED = {"job", "job_id", "user", "account", "path", "url", "name", "comment", "script", "node", "host"}


def test_each_series_is_spelled_once_with_a_help_text_and_no_label_per_job_or_user():
    names = [series.name for series in metrics.CATALOGUE]
    assert len(names) == len(set(names))
    for series in metrics.CATALOGUE:
        assert NAME.fullmatch(series.name) and series.kind in ("counter", "gauge", "histogram")
        assert series.help and not series.name.endswith("_total")
        assert not set(series.labels) & UNBOUNDED, series.name
    own = [s for s in metrics.CATALOGUE if s not in metrics.BENTOML]
    assert all(s.name.startswith("jobaware_") for s in own)
    assert {"up", "jobaware_collector_polls_total", "jobaware_adapter_pass_duration_seconds_bucket",
            "jobaware_live_accuracy", "bentoml_service_request_total"} <= metrics.sample_names()


def test_every_daemon_group_is_made_in_a_registry_of_its_own():
    for group in (metrics.COLLECTOR, metrics.ADAPTER + metrics.LIVE, metrics.SERVICE):
        made = metrics.Group(group, CollectorRegistry())
        for series in group:
            assert getattr(made, series.name.removeprefix("jobaware_")) is not None
    twice = [metrics.Group(metrics.COLLECTOR, CollectorRegistry()) for _ in range(2)]  # no clash between two
    twice[0].collector_polls.labels(outcome="ok").inc()
    assert twice[1].registry.get_sample_value("jobaware_collector_polls_total", {"outcome": "ok"}) is None


def test_a_value_outside_a_label_s_set_is_other():
    assert metrics.one_of("squeue", ("squeue", "sacct")) == "squeue"
    assert metrics.one_of("rm -rf /", ("squeue",)) == metrics.one_of(None, ("squeue",)) == "other"


@pytest.fixture
def served():
    group = metrics.Group(metrics.COLLECTOR, CollectorRegistry())
    group.collector_polls.labels(outcome="ok").inc(3)
    exposition = metrics.serve(group.registry, 0)
    yield exposition
    exposition.close()


def test_a_daemon_serves_its_exposition_at_metrics_on_loopback_and_nothing_else(served):
    url = f"http://127.0.0.1:{served.port}"
    answer = httpx.get(f"{url}/metrics", timeout=5)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    [polls] = [s for s in families["jobaware_collector_polls"].samples if s.name.endswith("_total")]
    assert polls.value == 3 and polls.labels == {"outcome": "ok"}
    assert httpx.get(f"{url}/anything-else", timeout=5).status_code == 404
    assert metrics.serve(CollectorRegistry(), None) is None  # no port: nothing served
    with socket.socket() as other:
        assert other.connect_ex(("127.0.0.1", served.port)) == 0  # loopback by default
    with pytest.raises(JobawareError, match=rf"^--metrics-port {served.port} on 127.0.0.1: cannot listen"):
        metrics.serve(CollectorRegistry(), served.port)


def test_slow_and_piled_up_connections_are_cut_and_the_metrics_still_answer(served):
    """A connection that sends nothing is closed after SCRAPE_TIMEOUT_S; beyond SCRAPES_AT_ONCE open at once, a new
    one is closed at once; once the idle ones are cut, a scrape answers again."""
    url = f"http://127.0.0.1:{served.port}/metrics"
    idle = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(metrics.SCRAPES_AT_ONCE)]
    try:
        time.sleep(0.5)
        extra = socket.create_connection(("127.0.0.1", served.port))
        extra.settimeout(5)
        assert extra.recv(100) == b""  # closed unanswered: every slot is held
        extra.close()
        started = time.monotonic()
        for sock in idle:
            sock.settimeout(metrics.SCRAPE_TIMEOUT_S + 5)
            assert sock.recv(100) == b""  # cut for sending nothing
        assert time.monotonic() - started < metrics.SCRAPE_TIMEOUT_S + 5
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("the metrics did not answer once the idle connections were cut")
    finally:
        for sock in idle:
            sock.close()
