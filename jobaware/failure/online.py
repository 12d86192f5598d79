"""Serving-time features from entity states held in sorted arrays: the batch featurizer's answer, without pandas
over the history per request, and without pandas at all from the request's columns to the feature block.

For jobs that have not ended (what a scheduler asks about), `OnlineFeatures.features(jobs)` equals
`build_features(jobs, history)` feature by feature, whatever the submit times (before, inside or after the
history): each entity's state after every end event is folded once, by the batch code, and looked up the batch
code's way (the last state from an event strictly before the submit second).

Submission counts follow training's rule: a user's jobs submitted in the same second, hour and day up to and
including the submit second, counting the history's jobs (the bundled ones, or the site's store's, which the
collector writes as they are submitted) and the request's own, each job once by its id. What one request names is
never kept for another: no caller changes what a later caller is answered. Jobs older than `KEEP_SECONDS` before
the newest submission are forgotten once the history holds more than `MAX_SUBMISSIONS`.
"""

from __future__ import annotations

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
    """Submit seconds per user (sorted lists) of a history, each job counted once by its id. Built once per history
    and only read after: a request's own jobs are counted for that request alone (`counts`), so that no caller
    changes what a later one is answered (any caller could otherwise add submissions to any user's counts)."""

    def __init__(self, jobs: JobColumns):
        self.times: dict[str, list[int]] = {}
        self.seen: dict = {}  # job id -> submit second
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

    def counts(self, jobs: JobColumns) -> np.ndarray:
        """Per job: its user's submissions in the same second, the hour and the day up to it (NaN: no user), of the
        logged jobs and of `jobs` themselves (those not logged, each once by its id), as training counts them. The
        log is not changed."""
        users, submit = jobs["user"], jobs["submit_time"]
        own: dict[str, list[int]] = {}  # the request's own submissions, beside the log's
        counted = set()
        for job_id, user, second in zip(jobs["job_id"].tolist(), users.tolist(), submit.tolist(), strict=True):
            if user is not None and job_id == job_id and job_id not in self.seen and job_id not in counted:
                counted.add(job_id)
                insort(own.setdefault(user, []), second)
        hour, day = SUBMIT_WINDOWS["user_submits_1h"], SUBMIT_WINDOWS["user_submits_24h"]
        found: dict[tuple, tuple] = {}
        rows = []
        for user, second in zip(users.tolist(), submit.tolist(), strict=True):
            row = found.get((user, second))
            if row is None:
                logged, asked = (self.times.get(user), own.get(user)) if isinstance(user, str) else (None, None)
                if logged is None and asked is None:
                    row = _NO_USER
                else:
                    row = tuple(_within(logged, second, window) + _within(asked, second, window)
                                for window in (0, hour, day))
                found[user, second] = row
            rows.append(row)
        return np.array(rows, dtype=float).reshape(len(rows), 3)


def _within(times: list[int] | None, second: int, window: int) -> int:
    """How many of the sorted `times` fall in [second - window, second]."""
    return 0 if not times else bisect_right(times, second) - bisect_left(times, second - window)


_NO_USER = (np.nan, np.nan, np.nan)


class OnlineFeatures:
    """Entity timelines and the submission log of one bundled history, built once per loaded model."""

    def __init__(self, history: pd.DataFrame):
        self.timelines = history_timelines(history)
        self.submissions = SubmitLog(JobColumns.from_frame(history))

    def block(self, jobs: JobColumns) -> np.ndarray:
        """The NUMERIC features (`feature_block`: features x jobs) of jobs that have not ended; their submission counts
        include the jobs themselves (for this answer only)."""
        submit = jobs["submit_time"]
        counts = self.submissions.counts(jobs)
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
