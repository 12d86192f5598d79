"""What a service shows on its own `/metrics` (BentoML's, in its multiprocess mode): BentoML's requests and latency
histograms, bounded, and jobaware's series (`jobaware.metrics.SERVICE`).

BentoML labels every request with its path (`RunnerTrafficMetricsMiddleware`, `endpoint=scope["path"]`): each
unknown path a client sends became a new series of its request counter, latency histogram and in-progress gauge,
kept for the life of the process (300 random 404s grew a service's exposition from 43 KB to 1.43 MB). `install()`
makes BentoML build `BoundedTraffic` instead: the same series, whose `endpoint` is one of the service's own paths
(its routes, the probes, `/metrics`, the docs, `/static_content/`) or `other`.
"""

from __future__ import annotations

import functools
import math

from bentoml._internal.context import server_context
from bentoml._internal.server.http import instruments

from jobaware import card as cards
from jobaware import metrics

OWN_PATHS = ("/", "/docs", "/docs.json", "/schema.json", "/metrics", "/livez", "/readyz", "/healthz", "/board")
STATIC = "/static_content/"  # the files of BentoML's Swagger UI: one label for all of them


def endpoint_label(path: str, routes: frozenset[str]) -> str:
    """The label of a request's path: one of the service's own paths, `/static_content/`, or `other`."""
    if path in routes or path in OWN_PATHS:
        return path
    return STATIC if path.startswith(STATIC) else metrics.OTHER


class _BoundedEndpoint:
    """One of BentoML's labelled metrics, with its `endpoint` label bounded by `endpoint_label`."""

    def __init__(self, metric, routes: frozenset[str]):
        self.metric, self.routes = metric, routes

    def labels(self, *, endpoint: str, **labels):
        return self.metric.labels(endpoint=endpoint_label(endpoint, self.routes), **labels)


class BoundedTraffic(instruments.RunnerTrafficMetricsMiddleware):
    """BentoML's request metrics middleware whose `endpoint` label takes a bounded set of values."""

    LABELLED = ("metrics_request_duration", "metrics_request_total", "metrics_request_in_progress",
                "metrics_websocket_connections", "metrics_websocket_data_received", "metrics_websocket_data_sent")

    def _setup(self, *args, **kwargs):
        super()._setup(*args, **kwargs)
        routes = frozenset(server_context.service_routes)
        for name in self.LABELLED:
            setattr(self, name, _BoundedEndpoint(getattr(self, name), routes))


def install() -> None:
    """Make BentoML's app, built after this in this process, count its requests with `BoundedTraffic` (BentoML
    imports the middleware by name when it builds the app)."""
    instruments.RunnerTrafficMetricsMiddleware = BoundedTraffic


@functools.cache
def series() -> metrics.Group:
    """jobaware's series of a service (`metrics.SERVICE`), made once in the process that answers (a BentoML worker:
    their values go to the multiprocess folder that `/metrics` reads)."""
    return metrics.Group(metrics.SERVICE, None)


def served(key: str, version: str, before: str | None, facts: dict | None) -> None:
    """A service of capability `key` answers with `version` now (`before` until now): its model series. `facts`
    (`tracking.version_facts`, None when the registry could not say) gives its registration time and evaluation."""
    found = series()
    if before is not None and before != version:
        found.service_model_info.labels(capability=key, version=before).set(0)
    found.service_model_info.labels(capability=key, version=version).set(1)
    if not facts:
        return
    found.service_model_created_timestamp_seconds.labels(capability=key).set(facts["created"])
    if math.isfinite(facts["score"]):
        found.model_evaluation.labels(capability=key, model_version=version, figure=facts["metric"],
                                      better="higher" if facts["higher_is_better"] else "lower").set(facts["score"])


def registry_failing(key: str, failing: bool) -> None:
    series().service_registry_failing.labels(capability=key).set(1 if failing else 0)


def error(service: str, route: str, reason: str) -> None:
    """An error answered on `route` (one of the service's routes) for `reason`."""
    series().service_errors.labels(service=service, endpoint=route, reason=reason).inc()


def card_parts(card: dict) -> None:
    """The card gateway's parts of one card, by capability and status."""
    counted = series().card_parts
    for key, part in card["parts"].items():
        counted.labels(capability=metrics.one_of(key, cards.declared()),
                       status=metrics.one_of(part.get("status"), cards.STATUSES)).inc()
