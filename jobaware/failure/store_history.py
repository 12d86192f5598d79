"""History from the site's job store for a served model: where `JOBAWARE_STORE` names the store the collector
writes, the failure service computes each job's history features (its user's, account's, partition's, the site's
earlier jobs) from the store's jobs of the last `JOBAWARE_FAILURE_HISTORY_DAYS` days (30), read again every
`JOBAWARE_FAILURE_HISTORY_SECONDS` seconds (600) in the background, instead of from the history bundled at training.

This is what lets the public-trace model, which carries no site's history, judge a new site's jobs by their
history as the site's jobs finish, and what keeps a site model's history current between trainings. A store that
cannot be read is logged (once per outage) and the history already loaded stays.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref

logger = logging.getLogger("jobaware.failure")

STORE_ENV = "JOBAWARE_STORE"
DAYS_ENV, DEFAULT_DAYS = "JOBAWARE_FAILURE_HISTORY_DAYS", 30.0
SECONDS_ENV, DEFAULT_SECONDS = "JOBAWARE_FAILURE_HISTORY_SECONDS", 600.0


def _setting(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        logger.error("%s=%r: expected a positive number; using %g", name, os.environ.get(name), default)
        return default
    return value


def read(uri: str, days: float):
    """The store's jobs of the last `days` (`export.recent_jobs`)."""
    from jobaware.failure.export import recent_jobs
    from jobaware.store import open_store

    with open_store(uri) as store:
        return recent_jobs(store, days)


def follow(bundle, uri: str | None = None) -> threading.Thread | None:
    """Give `bundle` the store's history now, then every few minutes from a daemon thread that ends with the bundle
    (it holds the bundle weakly); None where no store is named."""
    uri = uri or os.environ.get(STORE_ENV)
    if not uri:
        return None
    days, seconds = _setting(DAYS_ENV, DEFAULT_DAYS), _setting(SECONDS_ENV, DEFAULT_SECONDS)
    failing = _load(bundle, uri, days, False)
    held = weakref.ref(bundle)
    stop = threading.Event()
    weakref.finalize(bundle, stop.set)

    def again() -> None:
        failing_now = failing
        while not stop.wait(seconds):
            current = held()
            if current is None:
                return
            failing_now = _load(current, uri, days, failing_now)
            del current

    thread = threading.Thread(target=again, name="failure-store-history", daemon=True)
    thread.start()
    return thread


def _load(bundle, uri: str, days: float, failing: bool) -> bool:
    """Read the store into the bundle's history; whether it failed (logged once per outage)."""
    try:
        bundle.use_history(read(uri, days))
    except Exception as exc:  # noqa: BLE001 - a store that cannot be read must not take the service down
        if not failing:
            logger.error("could not read the job store %s for history features (keeping what is loaded): %s",
                         uri, str(exc)[:300])
        return True
    if failing:
        logger.warning("the job store %s answers again for history features", uri)
    return False
