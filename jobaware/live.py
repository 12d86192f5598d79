"""How each capability does on live jobs, as `jobaware report live` prints it and as the Slurm adapter exports it.

Each capability whose card part declares `accuracy` reads the store's finished jobs and the verdicts kept for them
(`CardPart.accuracy`: rows by week and model version). The metrics (`jobaware_live_accuracy`) are the rows of the
newest week in the table, per model version: every numeric column a figure. Where a capability's table splits a
week further (wait: the first verdict, then its refreshes), a version's first row of the week stands for it (wait's:
the verdict made at submission).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from jobaware import capabilities, metrics
from jobaware.store import JobStore, open_store

log = logging.getLogger(__name__)
EVERY_S = 900.0  # how often the adapter computes them (each reads every finished job of the store)


def reports(store: JobStore) -> dict[str, list[dict]]:
    """Each capability's table of `jobaware report live` (rows by week and model version), in registry order."""
    return {key: capability.card.accuracy(store) for key, capability in capabilities.registry().items()
            if capability.card is not None and capability.card.accuracy is not None}


def newest(rows: list[dict]) -> dict[str, dict[str, float]]:
    """The newest week's figures per model version: its first row's numeric, finite columns."""
    weeks = [row["week"] for row in rows if row.get("week")]
    if not weeks:
        return {}
    found: dict[str, dict[str, float]] = {}
    for row in rows:
        if row.get("week") == max(weeks) and str(row.get("model_version")) not in found:
            found[str(row["model_version"])] = {
                name: float(value) for name, value in row.items()
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)}
    return found


def export(series: metrics.Group, store: JobStore, now: float | None = None) -> int:
    """Set `jobaware_live_accuracy` from the store (the series shows this computation's figures alone); returns how
    many figures."""
    figures = [(key, version, name, value) for key, rows in reports(store).items()
               for version, row in newest(rows).items() for name, value in row.items()]
    gauge = series.live_accuracy
    gauge.clear()
    for key, version, name, value in figures:
        gauge.labels(capability=key, model_version=version, figure=name).set(value)
    series.live_computed_timestamp_seconds.set(time.time() if now is None else now)
    return len(figures)


class Exporter:
    """`export` at once, then every `every` seconds, in a daemon thread, from its own connection to the store at `uri`
    (the reading takes a while on a large store: never on the adapter's passes). A failed computation is logged and
    tried again at the next."""

    def __init__(self, series: metrics.Group, uri: str, every: float = EVERY_S,
                 opened: Callable[[str], JobStore] = open_store):
        self.series, self.uri, self.every, self.opened = series, uri, every, opened
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="live-accuracy", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                with self.opened(self.uri) as store:
                    export(self.series, store)
            except Exception as exc:  # noqa: BLE001 - the figures wait for the next round; the adapter goes on
                log.warning("live accuracy not computed: %s: %s", type(exc).__name__, str(exc)[:300])
            if self.stopped.wait(self.every):
                return

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
