"""The fail-open client against a real loopback HTTP server that goes down and comes back: replies instead of
exceptions, a back-off that ends the moment the service is ready again, one warning per outage."""

from __future__ import annotations

import logging

import pytest

from jobaware.adapters.common.services import WARN_EVERY_S, FailOpen
from tests.conftest import free_port
from tests.loopback import JsonServer


def answer(method: str, path: str, body) -> tuple[int, object]:
    """GET /readyz 200; POST /refuse a 400; any other POST its body back."""
    if method == "GET":
        return (200 if path == "/readyz" else 404), {}
    return (400, {"error": "jobs[0]: bad"}) if path == "/refuse" else (200, body)


@pytest.fixture
def clock():
    return [1000.0]


def test_replies_never_raise_and_a_refusal_is_not_an_outage(clock, caplog):
    caplog.set_level(logging.DEBUG, "jobaware.adapters.common.services")
    said = lambda: [r for r in caplog.records if r.name == "jobaware.adapters.common.services"]  # noqa: E731 - its own only
    server = JsonServer(answer).start()
    services = FailOpen({"echo": server.url}, timeout=2, clock=lambda: clock[0])
    try:
        assert services.post("echo", "/echo", {"a": 1}).answer == {"a": 1}
        refused = services.post("echo", "/refuse", {})
        assert (refused.status, refused.code, refused.reason) == ("refused", 400, "HTTP 400: jobs[0]: bad")
        assert services.available("echo") and not said()
        absent = services.post("gone", "/echo", {})  # not deployed here: never asked, never warned about
        assert (absent.status, absent.reason) == ("unavailable", "no gone service here") and not said()
    finally:
        services.close()
        server.stop()


def test_an_outage_is_backed_off_warned_once_a_minute_and_ends_when_the_service_is_ready(clock, caplog):
    caplog.set_level(logging.WARNING)
    port = free_port()
    log = logging.getLogger("test-services")
    services = FailOpen({"echo": f"http://127.0.0.1:{port}"}, timeout=2, backoff_s=30, backoff_max_s=300,
                        probe_s=10, log=log, clock=lambda: clock[0])
    server = JsonServer(answer, port)
    try:
        down = services.post("echo", "/echo", {})
        assert down.status == "unavailable" and "unreachable: ConnectError" in down.reason
        for _ in range(20):  # backed off: no request leaves, and no more warnings within the minute
            assert "backed off" in services.post("echo", "/echo", {}).reason
        assert [r.getMessage() for r in caplog.records] == [
            f"echo service unavailable (http://127.0.0.1:{port}/echo unreachable: ConnectError); backing off 30 s"]
        clock[0] += WARN_EVERY_S  # the back-off has run out: asked again, down again, and a minute has passed
        assert services.post("echo", "/echo", {}).status == "unavailable"
        assert caplog.records[-1].getMessage() == "echo service still unavailable after 60 s (20 requests not sent " \
                                                  "meanwhile)"
        clock[0] += 5  # backed off for 60 s now; its readiness probe finds nothing
        assert "backed off" in services.post("echo", "/echo", {}).reason
        server.start()
        clock[0] += 5  # back, but the last probe was 5 s ago: not probed yet
        assert "backed off" in services.post("echo", "/echo", {}).reason and server.requests == []
        clock[0] += 5  # probed: ready; the back-off ends 45 s before it would have run out
        assert services.post("echo", "/echo", {"b": 2}).answer == {"b": 2}
        assert [r[:2] for r in server.requests] == [("GET", "/readyz"), ("POST", "/echo")]
        assert caplog.records[-1].getMessage() == "echo service answers again after 75 s"
        assert len(caplog.records) == 3
    finally:
        services.close()
        server.stop()


def test_the_back_off_and_the_requests_left_unanswered_are_counted(clock):
    """`jobaware_adapter_service_backoff` is 1 from the failure until the service answers again; every request that
    got no answer (sent and failed, or not sent while backed off) is counted."""
    from prometheus_client import CollectorRegistry

    from jobaware import metrics

    series = metrics.Group(metrics.ADAPTER, CollectorRegistry())
    port = free_port()
    services = FailOpen({"echo": f"http://127.0.0.1:{port}"}, timeout=2, backoff_s=30, probe_s=10,
                        clock=lambda: clock[0], series=series, adapter="slurm")
    server = JsonServer(answer, port)
    labels = {"adapter": "slurm", "capability": "echo"}
    value = lambda name: series.registry.get_sample_value(name, labels)  # noqa: E731
    try:
        assert value("jobaware_adapter_service_backoff") == 0  # known from the start, before any request
        assert services.post("echo", "/echo", {}).status == "unavailable"
        assert services.post("echo", "/echo", {}).status == "unavailable"  # backed off: not sent
        assert value("jobaware_adapter_service_backoff") == 1
        assert value("jobaware_adapter_service_unavailable_total") == 2
        server.start()
        clock[0] += 10
        assert services.post("echo", "/echo", {"b": 2}).answer == {"b": 2}
        assert value("jobaware_adapter_service_backoff") == 0
        assert value("jobaware_adapter_service_unavailable_total") == 2
    finally:
        services.close()
        server.stop()
