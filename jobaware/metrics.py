"""jobaware's Prometheus series: every name, kind, help text and label in one catalogue, the only place they are
spelled. The daemons (`jobaware slurm collect|adapt`, `jobaware hold follow`) make their group in a registry of their
own and serve it at `/metrics` with `serve` (`--metrics-port`, loopback by default); the services make `SERVICE` in
BentoML's multiprocess registry, beside BentoML's own series (`BENTOML`), on their own `/metrics`. The alert rules
(`deploy/prometheus/jobaware.rules.yml`) and the Grafana dashboard (`jobaware.dashboard`) name series of this
catalogue only (the tests hold them to it).

Bounded, always: a label's values are a fixed set (a Slurm command, an outcome, an HTTP code, a capability key of the
registry) or the model versions being served; never a job, user, path or any value a request brings. A value outside
a label's fixed set is counted as `other` (`one_of`).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from jobaware.errors import JobawareError

log = logging.getLogger(__name__)
OTHER = "other"
SECONDS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)  # a poll's or a pass's duration
SCRAPE_TIMEOUT_S = 5.0  # a connection to a daemon's /metrics must send its request within this
SCRAPES_AT_ONCE = 8  # connections a daemon's /metrics serves at once; one more is closed unanswered


@dataclass(frozen=True)
class Series:
    """One series family: `name` (a counter's without `_total`), `kind` (counter, gauge or histogram), `help`, its
    `labels`, and a histogram's `buckets`."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = SECONDS

    def samples(self) -> set[str]:
        """The sample names an exposition shows for it."""
        if self.kind == "counter":
            return {f"{self.name}_total", f"{self.name}_created"}
        if self.kind == "histogram":
            return {f"{self.name}_{suffix}" for suffix in ("bucket", "count", "sum", "created")}
        return {self.name}

    def make(self, registry: CollectorRegistry | None):
        """The prometheus_client metric, in `registry` (None: in none, as BentoML's multiprocess mode wants: its
        collector reads every process's files at each scrape). A gauge of several processes shows the largest."""
        if self.kind == "counter":
            return Counter(self.name, self.help, self.labels, registry=registry)
        if self.kind == "histogram":
            return Histogram(self.name, self.help, self.labels, registry=registry, buckets=self.buckets)
        return Gauge(self.name, self.help, self.labels, registry=registry, multiprocess_mode="livemax")


def one_of(value: object, allowed: Iterable[str]) -> str:
    """`value` as a label value when it is one of `allowed`, else `other`: a label never takes a value from outside."""
    return value if isinstance(value, str) and value in set(allowed) else OTHER


# ---------------------------------------------------------------- the catalogue
SERVICE = (  # every service and the card gateway, on BentoML's /metrics (jobaware.serving.observe)
    Series("jobaware_service_errors", "counter", "requests answered with an error by the service itself, by reason: "
           "bad_input (400), too_large (413), not_json (415), no_champion (503)", ("service", "endpoint", "reason")),
    Series("jobaware_service_connections_closed", "counter", "connections the server closed without an answer: "
           "header_timeout (no request within the deadline, an idle kept-alive one too), body_timeout (a body sent "
           "too slowly), over_cap (the longest-waiting one, to make room), refused (answered 503: every open "
           "connection busy)", ("service", "reason")),
    Series("jobaware_service_model_info", "gauge", "1 for the model version the service answers with (0 for one it "
           "answered with before, in this process)", ("capability", "version")),
    Series("jobaware_service_model_created_timestamp_seconds", "gauge", "when the served model version was "
           "registered (Unix time)", ("capability",)),
    Series("jobaware_service_registry_failing", "gauge", "1 while the service cannot read the registry to follow the "
           "champion (it keeps answering with the model it has)", ("capability",)),
    Series("jobaware_model_evaluation", "gauge", "the registered evaluation of a model version: its primary metric "
           "(figure), and whether higher or lower is better", ("capability", "model_version", "figure", "better")),
    Series("jobaware_card_parts", "counter", "the card gateway's parts by capability and status (ok, not_applicable, "
           "unavailable, refused, error)", ("capability", "status")),
)
COLLECTOR = (  # jobaware slurm collect
    Series("jobaware_collector_polls", "counter", "polls of Slurm, by outcome: ok, partial (a command failed; tried "
           "again next poll), failed (the poll raised)", ("outcome",)),
    Series("jobaware_collector_poll_duration_seconds", "histogram", "how long a poll took"),
    Series("jobaware_collector_jobs_listed", "gauge", "jobs squeue listed at the last poll that read it"),
    Series("jobaware_collector_stored", "counter", "what the collector stored: job (a job seen the first time), "
           "final (a final state, new or stronger), script (a batch script)", ("what",)),
    Series("jobaware_collector_last_squeue_timestamp_seconds", "gauge", "when the last squeue snapshot was read and "
           "stored (Unix time): the store is this far behind squeue"),
    Series("jobaware_collector_interval_seconds", "gauge", "the seconds between polls the collector was given"),
    Series("jobaware_collector_accounting_lag_seconds", "gauge", "how far behind now the accounting (sacct) window "
           "read so far ends"),
    Series("jobaware_collector_slurm_commands", "counter", "Slurm commands run, by command", ("command",)),
    Series("jobaware_collector_slurm_command_failures", "counter", "Slurm commands that failed (an exit status, a "
           "timeout, output that is not Slurm's), by command", ("command",)),
)
ADAPTER = (  # jobaware slurm adapt (adapter="slurm") and jobaware hold follow (adapter="htcondor")
    Series("jobaware_adapter_passes", "counter", "passes (the Slurm adapter) or polls of the event logs (the HTCondor "
           "follower), by outcome: ok, waiting (a required service was down: jobs deferred), failed (squeue failed, "
           "or the pass raised)", ("adapter", "outcome")),
    Series("jobaware_adapter_pass_duration_seconds", "histogram", "how long a pass took", ("adapter",)),
    Series("jobaware_adapter_pending_jobs", "gauge", "pending jobs the last pass listed", ("adapter",)),
    Series("jobaware_adapter_verdicts", "counter", "verdicts written: the Slurm adapter's verdicts kept in the store, "
           "the HTCondor follower's holds decided and audited", ("adapter",)),
    Series("jobaware_adapter_deferred", "counter", "jobs left without a verdict for now: the Slurm adapter's jobs "
           "deferred to the next pass (a required service down, the rate limit), the HTCondor follower's holds "
           "audited without the service's decision", ("adapter",)),
    Series("jobaware_adapter_actions", "counter", "acts on the scheduler, by action and outcome: done, failed (the "
           "scheduler refused), dry_run (audited only)", ("adapter", "action", "outcome")),
    Series("jobaware_adapter_actions_refused", "counter", "acts the adapter itself refused, by reason: rate_limit, "
           "not_trained_on_real (a hold model not trained on real logs), resolved (the hold no longer stood)",
           ("adapter", "action", "reason")),
    Series("jobaware_adapter_service_backoff", "gauge", "1 while a capability's service is backed off after a "
           "failure (the adapter fails open: its parts are left out)", ("adapter", "capability")),
    Series("jobaware_adapter_service_unavailable", "counter", "requests to a capability's service that got no "
           "answer (down, slow, 5xx, not proven, or not sent while backed off)", ("adapter", "capability")),
    Series("jobaware_adapter_cache_written_timestamp_seconds", "gauge", "when the adapter last wrote what it keeps "
           "(Unix time): the Slurm plugins' verdict cache; the HTCondor follower's read position and event window",
           ("adapter",)),
    Series("jobaware_adapter_cache_entries", "gauge", "entries in it: verdicts in the Slurm verdict cache; jobs in the "
           "HTCondor follower's event window", ("adapter",)),
    Series("jobaware_adapter_cache_bytes", "gauge", "its size in bytes", ("adapter",)),
    Series("jobaware_adapter_cache_stale_after_seconds", "gauge", "the age from which the Slurm plugins ignore the "
           "verdict cache (the policy's cache_stale_after_s)", ("adapter",)),
    Series("jobaware_adapter_parts", "counter", "card parts in the verdicts written, by capability and status",
           ("adapter", "capability", "status")),
    Series("jobaware_adapter_flagged", "counter", "verdicts whose part flags the job (advice for its user, or a reason "
           "to hold it), by capability", ("adapter", "capability")),
)
LIVE = (  # the Slurm adapter, every --live-every seconds (jobaware.live)
    Series("jobaware_live_accuracy", "gauge", "how each capability did on live jobs: the figures (the columns) of "
           "`jobaware report live`'s newest week, per model version", ("capability", "model_version", "figure")),
    Series("jobaware_live_computed_timestamp_seconds", "gauge", "when the live figures were last computed"),
)
# BentoML's own series on each service's /metrics, which the rules and the dashboard use (jobaware.serving.observe
# bounds their `endpoint` label to the service's routes; tests/serving/test_metrics.py checks they are there)
BENTOML = (
    Series("bentoml_service_request", "counter", "requests answered, by endpoint and HTTP code",
           ("endpoint", "service_name", "service_version", "http_response_code", "runner_name")),
    Series("bentoml_service_request_duration_seconds", "histogram", "how long requests took, by endpoint and code",
           ("endpoint", "service_name", "service_version", "http_response_code", "runner_name")),
    Series("bentoml_service_request_in_progress", "gauge", "requests being answered",
           ("endpoint", "service_name", "service_version", "runner_name")),
)
CATALOGUE = SERVICE + COLLECTOR + ADAPTER + LIVE + BENTOML


def sample_names() -> set[str]:
    """Every sample name the catalogue's series show, and Prometheus's own `up` of each scrape."""
    return {"up"}.union(*(series.samples() for series in CATALOGUE))


class Group:
    """Series of the catalogue made in one registry (None: in none, as the services' multiprocess mode wants), each
    an attribute named after its name without `jobaware_` (`Group(COLLECTOR, CollectorRegistry()).collector_polls`)."""

    def __init__(self, series: Iterable[Series], registry: CollectorRegistry | None):
        self.registry = registry
        for one in series:
            setattr(self, one.name.removeprefix("jobaware_"), one.make(registry))


# ---------------------------------------------------------------- a daemon's /metrics
class _Quiet(WSGIRequestHandler):
    timeout = SCRAPE_TIMEOUT_S  # a connection that sends its request slowly is closed

    def log_message(self, *args) -> None:
        """No access log: a scrape every few seconds would fill the daemon's log."""


class _Server(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most SCRAPES_AT_ONCE at once (one more is closed at once)."""

    daemon_threads = True

    def server_bind(self) -> None:
        self.slots = threading.BoundedSemaphore(SCRAPES_AT_ONCE)
        super().server_bind()

    def process_request(self, request, client_address) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


def _only_metrics(app):
    """The exposition at `/metrics` (and `/`), 404 elsewhere."""
    def wsgi(environ, start_response):
        if environ.get("PATH_INFO") not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the metrics are at /metrics\n"]
        return app(environ, start_response)

    return wsgi


class Exposition:
    """A registry served over HTTP at `/metrics` in a daemon thread, until `close()`."""

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "127.0.0.1"):
        server_class = _Server6 if ":" in host else _Server
        try:
            self.server = make_server(host, port, _only_metrics(make_wsgi_app(registry)), server_class, _Quiet)
        except OSError as exc:
            raise JobawareError(f"--metrics-port {port} on {host}: cannot listen ({exc.strerror or exc})") from None
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(registry: CollectorRegistry, port: int | None, host: str = "127.0.0.1") -> Exposition | None:
    """Serve `registry` at http://host:port/metrics (None: no port given, nothing served)."""
    if port is None:
        return None
    exposition = Exposition(registry, port, host)
    log.info("metrics at http://%s:%d/metrics", host, exposition.port)
    return exposition
