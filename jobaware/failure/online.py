"""Serving-time features from entity states held in sorted arrays: the batch featurizer's answer, without pandas
over the history per request.

For jobs that have not ended (what a scheduler asks about), `OnlineFeatures.features(jobs)` equals
`build_features(jobs, history)` feature by feature, whatever the submit times (before, inside or after the
history): each entity's state after every end event is folded once, by the batch code, and looked up the batch
code's way (the last state from an event strictly before the submit second).

Submission counts follow training's rule: a user's jobs submitted in the same second, hour and day up to and
including the submit second, counting the bundled jobs and every job asked about since the model was loaded,
each job once by its id. Jobs older than `KEEP_SECONDS` before the newest submission are forgotten once the log
holds more than `MAX_SUBMISSIONS`.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd

from jobaware.failure.features import (
    ENTITIES, SUBMIT_WINDOWS, assemble, history_columns, history_timelines, prepared,
)

KEEP_SECONDS = 8 * 86400
MAX_SUBMISSIONS = 1_000_000


def _seconds(times) -> np.ndarray:
    """Datetimes as int64 seconds since the epoch (NaT: the minimum int64)."""
    return np.asarray(times, dtype="datetime64[s]").astype(np.int64)


class SubmitLog:
    """Submit seconds per user, each job counted once by its id; safe to share between request threads."""

    def __init__(self, jobs: pd.DataFrame):
        self.times: dict[str, np.ndarray] = {}
        self.seen: dict = {}  # job id -> submit second
        self.lock = threading.Lock()
        self.add(jobs)

    def add(self, jobs: pd.DataFrame) -> None:
        known = jobs["user"].notna() & jobs["job_id"].notna()
        by_user: dict[str, list[int]] = {}
        for job_id, user, second in zip(jobs.loc[known, "job_id"], jobs.loc[known, "user"],
                                        _seconds(jobs.loc[known, "submit_time"]), strict=True):
            if job_id not in self.seen:
                self.seen[job_id] = second
                by_user.setdefault(user, []).append(second)
        for user, seconds in by_user.items():
            self.times[user] = np.sort(np.concatenate([self.times.get(user, np.empty(0, np.int64)), seconds]))
        if len(self.seen) > MAX_SUBMISSIONS:
            self._forget()

    def _forget(self) -> None:
        cutoff = max(int(t[-1]) for t in self.times.values() if len(t)) - KEEP_SECONDS
        self.times = {u: t[t >= cutoff] for u, t in self.times.items() if t[-1] >= cutoff}
        self.seen = {job: second for job, second in self.seen.items() if second >= cutoff}

    def counts(self, users, submit: np.ndarray) -> np.ndarray:
        """Per job: its user's submissions in the same second, the hour and the day up to it (NaN: no user)."""
        windows = {"burst_size": 0, **SUBMIT_WINDOWS}
        out = np.full((len(users), len(windows)), np.nan)
        for row, (user, second) in enumerate(zip(users, submit, strict=True)):
            times = self.times.get(user) if isinstance(user, str) else None
            if times is None:
                continue
            upto = np.searchsorted(times, second, side="right")
            for column, seconds in enumerate(windows.values()):
                out[row, column] = upto - np.searchsorted(times, second - seconds, side="left")
        return out


class OnlineFeatures:
    """Entity timelines and the submission log of one bundled history, built once per loaded model."""

    def __init__(self, history: pd.DataFrame):
        self.timelines = history_timelines(history)
        self.submissions = SubmitLog(prepared(history))

    def features(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Features of canonical jobs that have not ended; they join the submission log first.

        Array code throughout, then the batch code's `assemble`.
        """
        submit = _seconds(jobs["submit_time"])
        users = jobs["user"].to_numpy(dtype=object, na_value=None)
        with self.submissions.lock:
            self.submissions.add(jobs)
            counts = self.submissions.counts(users, submit)
        keys = {key: jobs[key].to_numpy(dtype=object, na_value=None) for key in ENTITIES if key in jobs}
        procs, req = (jobs[c].to_numpy(dtype=float, na_value=np.nan) for c in ("processors_req", "wallclock_req"))
        keys["job_class"] = [None if u is None else f"{u}|{_text(p, int)}x{_text(w, float)}" for u, p, w in zip(users, procs, req, strict=True)]
        keys["cluster"] = ["all"] * len(submit)
        history = []
        for key in ENTITIES:
            entity, timeline = self.timelines[key]
            history.append(history_columns(key, timeline.lookup(entity.lookup_codes(keys[key]), submit), submit))
        return assemble(jobs, submit, {"burst_size": counts[:, 0], "user_submits_1h": counts[:, 1],
                                       "user_submits_24h": counts[:, 2]}, history)


def _text(value: float, kind) -> str:
    """A request number as the batch featurizer spells it in the job class key ("?" when unknown)."""
    return "?" if np.isnan(value) else str(kind(value))
