"""Serving-time features from entity states held in sorted arrays: the batch featurizer's answer, without pandas
over the history per request, and without pandas at all from the request's columns to the feature block.

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
from bisect import bisect_left, bisect_right, insort

import numpy as np
import pandas as pd

from jobaware.failure.features import (
    CATEGORICAL,
    ENTITIES,
    REQUEST_NUMBERS,
    SUBMIT_WINDOWS,
    feature_block,
    features_frame,
    history_columns,
    history_timelines,
    job_class_keys,
)
from jobaware.jobtable.common import JobColumns

KEEP_SECONDS = 8 * 86400
MAX_SUBMISSIONS = 1_000_000


class SubmitLog:
    """Submit seconds per user (sorted lists), each job counted once by its id; safe to share between request
    threads under `lock`."""

    def __init__(self, jobs: JobColumns):
        self.times: dict[str, list[int]] = {}
        self.seen: dict = {}  # job id -> submit second
        self.lock = threading.Lock()
        self.add(jobs)

    def add(self, jobs: JobColumns) -> None:
        """Log the jobs not seen before (those with a user and a job id)."""
        for job_id, user, second in zip(jobs["job_id"].tolist(), jobs["user"].tolist(),
                                        jobs["submit_time"].tolist(), strict=True):
            if user is None or job_id != job_id or job_id in self.seen:  # job_id != job_id: NaN, no id
                continue
            self.seen[job_id] = second
            insort(self.times.setdefault(user, []), second)  # most land at the end: no element moves
        if len(self.seen) > MAX_SUBMISSIONS:
            self._forget()

    def _forget(self) -> None:
        cutoff = max(t[-1] for t in self.times.values() if t) - KEEP_SECONDS
        self.times = {u: t[bisect_left(t, cutoff):] for u, t in self.times.items() if t and t[-1] >= cutoff}
        self.seen = {job: second for job, second in self.seen.items() if second >= cutoff}

    def counts(self, users: np.ndarray, submit: np.ndarray) -> np.ndarray:
        """Per job: its user's submissions in the same second, the hour and the day up to it (NaN: no user)."""
        hour, day = SUBMIT_WINDOWS["user_submits_1h"], SUBMIT_WINDOWS["user_submits_24h"]
        found: dict[tuple, tuple] = {}
        rows = []
        for user, second in zip(users.tolist(), submit.tolist(), strict=True):
            row = found.get((user, second))
            if row is None:
                times = self.times.get(user) if isinstance(user, str) else None
                if times is None:
                    row = _NO_USER
                else:
                    upto = bisect_right(times, second)
                    row = (upto - bisect_left(times, second), upto - bisect_left(times, second - hour),
                           upto - bisect_left(times, second - day))
                found[user, second] = row
            rows.append(row)
        return np.array(rows, dtype=float).reshape(len(rows), 3)


_NO_USER = (np.nan, np.nan, np.nan)


class OnlineFeatures:
    """Entity timelines and the submission log of one bundled history, built once per loaded model."""

    def __init__(self, history: pd.DataFrame):
        self.timelines = history_timelines(history)
        self.submissions = SubmitLog(JobColumns.from_frame(history))

    def block(self, jobs: JobColumns) -> np.ndarray:
        """The NUMERIC features (`feature_block`: features x jobs) of jobs that have not ended; the jobs join the
        submission log first."""
        submit = jobs["submit_time"]
        with self.submissions.lock:
            self.submissions.add(jobs)
            counts = self.submissions.counts(jobs["user"], submit)
        keys = {key: jobs[key] for key in ("user", "account", "name", "qos", "partition")}
        keys["job_class"] = job_class_keys(jobs["user"].tolist(), jobs["processors_req"].tolist(),
                                           jobs["wallclock_req"].tolist())
        keys["cluster"] = ["all"] * len(submit)
        history = []
        for key in ENTITIES:
            entity, timeline = self.timelines[key]
            history.append(history_columns(key, timeline.lookup(entity.lookup_codes(keys[key]), submit), submit))
        counts = {"burst_size": counts[:, 0], "user_submits_1h": counts[:, 1], "user_submits_24h": counts[:, 2]}
        return feature_block({c: jobs[c] for c in REQUEST_NUMBERS}, submit, counts, history)

    def features(self, jobs: JobColumns) -> pd.DataFrame:
        """The feature table of jobs that have not ended (`block` and the categorical columns)."""
        return features_frame(self.block(jobs), {key: jobs[key] for key in CATEGORICAL})
