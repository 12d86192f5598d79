"""What a registered failure model carries: the fitted model and the job history its features need."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from jobaware.failure.capability import FEATURE_VERSION
from jobaware.failure.features import build_features, history_states, latest_states
from jobaware.failure.readers.common import to_canonical_dtypes
from jobaware.failure.model import FailureModel
from jobaware.failure.schema import FAILURES

HISTORY_JOBS = 200_000


@dataclass
class FailureBundle:
    model: FailureModel
    history: pd.DataFrame
    feature_version: str = FEATURE_VERSION

    @staticmethod
    def history_tail(jobs: pd.DataFrame, limit: int = HISTORY_JOBS) -> pd.DataFrame:
        """The most recently ended jobs, from which a live job's history features are computed."""
        ended = jobs[jobs["end_time"].notna()]
        return ended.sort_values("end_time", kind="stable").tail(limit).reset_index(drop=True)

    def latest(self) -> dict[str, pd.DataFrame]:
        """Each entity's newest history state, computed once per loaded bundle."""
        if getattr(self, "_latest", None) is None:
            self._latest = latest_states(history_states(self.history))
        return self._latest

    def features(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Features of `jobs` with the bundled history before them and their own history after it.

        The bundled jobs that ended before the earliest submit time asked about come first, then the jobs
        given themselves, causally: scoring the later part of a trace after training on its earlier part
        counts no job twice. Live jobs (none ended, all submitted after the history) use the cached states.
        """
        jobs = to_canonical_dtypes(jobs)
        first_submit = jobs["submit_time"].min()
        live = jobs["end_time"].isna().all() and (self.history.empty or self.history["end_time"].max() < first_submit)
        if live:
            return build_features(jobs, self.history, states=self.latest())
        past = self.history[self.history["end_time"] < first_submit] if pd.notna(first_submit) else self.history
        return build_features(jobs, past)

    def predict(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Per job: job_id, p_fail, the outcome probabilities and the most likely failure."""
        proba = self.model.predict_proba(self.features(jobs))
        failure_columns = [f"p_{c}" for c in FAILURES]
        out = pd.DataFrame({"job_id": pd.array(jobs["job_id"], dtype="Int64")})
        out = pd.concat([out, proba.reset_index(drop=True)], axis=1)
        out["most_likely_failure"] = proba[failure_columns].idxmax(axis=1).str.removeprefix("p_").to_numpy()
        return out
