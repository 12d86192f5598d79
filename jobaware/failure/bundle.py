"""What a registered failure model carries: the fitted model and the job history its features need."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from jobaware.failure.features import build_features
from jobaware.failure.model import FailureModel
from jobaware.schema import FAILURES

HISTORY_JOBS = 200_000


@dataclass
class FailureBundle:
    model: FailureModel
    history: pd.DataFrame

    @staticmethod
    def history_tail(jobs: pd.DataFrame, limit: int = HISTORY_JOBS) -> pd.DataFrame:
        """The most recently ended jobs, from which a live job's history features are computed."""
        ended = jobs[jobs["end_time"].notna()]
        return ended.sort_values("end_time", kind="stable").tail(limit).reset_index(drop=True)

    def predict(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Per job: job_id, p_fail, the outcome probabilities and the most likely failure.

        History comes from the bundled jobs that ended before the earliest submit time asked about, and
        after that from the jobs given themselves, causally: scoring the later part of a trace after
        training on its earlier part counts no job twice.
        """
        from jobaware.readers.common import to_canonical_dtypes

        jobs = to_canonical_dtypes(jobs)
        first_submit = jobs["submit_time"].min()
        past = self.history[self.history["end_time"] < first_submit] if pd.notna(first_submit) else self.history
        features = build_features(jobs, past)
        proba = self.model.predict_proba(features)
        failure_columns = [f"p_{c}" for c in FAILURES]
        out = pd.DataFrame({"job_id": jobs["job_id"].astype("Int64").to_numpy()})
        out = pd.concat([out, proba.reset_index(drop=True)], axis=1)
        out["most_likely_failure"] = proba[failure_columns].idxmax(axis=1).str.removeprefix("p_").to_numpy()
        return out
