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

    def predict(self, jobs: pd.DataFrame, with_history: bool = True) -> pd.DataFrame:
        """Per job: job_id, p_fail, the outcome probabilities and the most likely failure."""
        features = build_features(jobs, self.history if with_history else None)
        proba = self.model.predict_proba(features)
        failure_columns = [f"p_{c}" for c in FAILURES]
        out = pd.DataFrame({"job_id": jobs["job_id"].astype("Int64").to_numpy()})
        out = pd.concat([out, proba.reset_index(drop=True)], axis=1)
        out["most_likely_failure"] = proba[failure_columns].idxmax(axis=1).str.removeprefix("p_").to_numpy()
        return out
