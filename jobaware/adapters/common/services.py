"""The capabilities' services as a daemon beside a scheduler asks them: failing open, out loud, never in the way.

`FailOpen` is `jobaware.card.Services` (one POST with a timeout; whatever happens a `Reply`, never an exception)
with, per capability:
- a back-off when its service is unreachable or answers 5xx or 429 (`backoff_s`, doubling up to `backoff_max_s`),
  during which it is not asked: its parts say `unavailable` at once;
- a readiness probe while backed off (`GET /readyz`, at most once every `probe_s`): the back-off ends the moment
  the service answers again, as it does when any request gets an answer;
- one warning when an outage begins, at most one a minute while it lasts, and one line when it ends.
A capability without a URL is not deployed here (the site switched it off): never asked, never warned about.
With the site's service token (`jobaware.identity`), an answer or probe that does not prove it comes from the
deployment's service counts as an outage: "unavailable: not the deployment's service (no identity proof)".
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import httpx

from jobaware import metrics
from jobaware.adapters.common.pacing import Backoff
from jobaware.card import SITE_TOKEN, Reply, Services, Unproven

WARN_EVERY_S = 60.0


class FailOpen(Services):
    def __init__(self, urls: dict[str, str], timeout: float = 5.0, *, backoff_s: float = 5.0,
                 backoff_max_s: float = 300.0, probe_s: float | None = None, log: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic, token: bytes | None | object = SITE_TOKEN,
                 series: metrics.Group | None = None, adapter: str = ""):
        """`series` (`metrics.ADAPTER`, of the `adapter` asking): each service's back-off and the requests it left
        unanswered."""
        super().__init__(urls, timeout, token)
        self.series, self.adapter = series, adapter
        for key in self.urls:
            self._backed_off(key, False)
        self.backoff = Backoff(backoff_s, backoff_max_s, clock)
        self.probe_s = backoff_s if probe_s is None else probe_s
        self.log = log or logging.getLogger(__name__)
        self.clock = clock
        self.probed: dict[str, float] = {}
        self.warned: dict[str, float] = {}
        self.unsent: dict[str, int] = {}  # requests not sent while backed off, since the last warning

    def available(self, key: str) -> bool:
        """Whether `key` may be asked now: deployed, and not backed off (or ready again at its probe)."""
        if key not in self.urls:
            return False
        if self.backoff.open(key):
            return True
        if self.clock() - self.probed.get(key, -math.inf) < self.probe_s:
            return False
        self.probed[key] = self.clock()
        try:
            ready = self.request("GET", f"{self.urls[key].rstrip('/')}/readyz").status_code == 200
        except (httpx.HTTPError, Unproven):
            ready = False
        if ready:
            self._answered(key)
        return ready

    def post(self, key: str, route: str, body: dict) -> Reply:
        if key in self.urls and not self.available(key):
            self.unsent[key] = self.unsent.get(key, 0) + 1
            self._still_down(key)
            self._unanswered(key)
            return Reply("unavailable", reason=f"backed off after a failure ({self.backoff.left(key):.0f} s left)")
        reply = super().post(key, route, body)
        if key not in self.urls:
            return reply
        if reply.status == "unavailable":
            self._unanswered(key)
            self._failed(key, reply.reason)
        else:
            self._answered(key)
        return reply

    def _unanswered(self, key: str) -> None:
        if self.series is not None:
            self.series.adapter_service_unavailable.labels(adapter=self.adapter, capability=key).inc()

    def _backed_off(self, key: str, now: bool) -> None:
        if self.series is not None:
            self.series.adapter_service_backoff.labels(adapter=self.adapter, capability=key).set(1 if now else 0)

    def _failed(self, key: str, reason: str | None) -> None:
        beginning = key not in self.backoff.since
        delay = self.backoff.failed(key)
        self._backed_off(key, True)
        if beginning:
            self.log.warning("%s service unavailable (%s); backing off %.0f s", key, reason, delay)
            self.warned[key] = self.clock()
        else:
            self._still_down(key)

    def _still_down(self, key: str) -> None:
        now = self.clock()
        if now - self.warned.get(key, -math.inf) >= WARN_EVERY_S:
            self.log.warning("%s service still unavailable after %.0f s (%d requests not sent meanwhile)", key,
                             now - self.backoff.since.get(key, now), self.unsent.get(key, 0))
            self.warned[key], self.unsent[key] = now, 0

    def _answered(self, key: str) -> None:
        lasted = self.backoff.ok(key)
        self._backed_off(key, False)
        if lasted is not None:
            self.log.warning("%s service answers again after %.0f s", key, lasted)
            self.warned.pop(key, None)
            self.unsent.pop(key, None)
