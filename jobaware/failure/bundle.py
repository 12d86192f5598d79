"""What a registered failure model carries: the fitted model and the job history its features need."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobaware.failure import store_history
from jobaware.failure.capability import FEATURE_VERSION
from jobaware.failure.features import CATEGORICAL, build_features
from jobaware.failure.model import PROBABILITIES, FailureModel
from jobaware.failure.online import OnlineFeatures
from jobaware.failure.schema import FAILURES
from jobaware.jobtable.common import NAT, JobColumns, to_canonical_dtypes
from jobaware.model import Bundle

HISTORY_JOBS = 200_000


@dataclass
class FailureBundle(Bundle):
    model: FailureModel
    history: pd.DataFrame
    feature_version: str = FEATURE_VERSION
    # what it learnt from: {"source": "site"}, {"source": "public", "traces": [...]} or {"source": "site and public
    # traces", "traces": [...]}, with the jobs of each
    trained_on: dict = field(default_factory=dict)

    @staticmethod
    def history_tail(jobs: pd.DataFrame, limit: int = HISTORY_JOBS) -> pd.DataFrame:
        """The most recently ended jobs, from which a live job's history features are computed, and every job
        submitted in the table's last day (ended or not), which live submission counts include as training did."""
        ended = jobs[jobs["end_time"].notna()].sort_values("end_time", kind="stable").tail(limit)
        last_day = jobs[jobs["submit_time"] >= jobs["submit_time"].max() - pd.Timedelta(hours=24)]
        return pd.concat([ended, last_day[~last_day.index.isin(ended.index)]]).reset_index(drop=True)

    @staticmethod
    def history_tail_file(jobs_table: Path, limit: int = HISTORY_JOBS) -> pd.DataFrame:
        """`history_tail` of a canonical job table (Parquet) without reading the whole table: its end and submit
        times first, then only the rows that can be in the tail (the same rows, in the same order)."""
        times = pq.read_table(jobs_table, columns=["submit_time", "end_time"])
        ends = times["end_time"].drop_null()
        if not len(times):
            return to_canonical_dtypes(pd.DataFrame())
        last_day = pc.max(times["submit_time"]).as_py() - timedelta(hours=24)
        wanted = [[("submit_time", ">=", last_day)]]
        if len(ends):  # the tail ends at or after the limit-th latest end
            ends, kth = ends.cast(pa.timestamp("s")).to_numpy(), max(len(ends) - limit, 0)
            wanted.append([("end_time", ">=", pd.Timestamp(np.partition(ends, kth)[kth]))])
        jobs = to_canonical_dtypes(pq.read_table(jobs_table, filters=wanted).to_pandas())
        return FailureBundle.history_tail(jobs, limit)

    @property
    def threshold(self) -> float | None:
        """The operating threshold on P(fail) chosen on the validation period; None when there is none (the
        validation period did not hold both completed and failed jobs, or the model predates thresholds)."""
        return (getattr(self.model, "operating", None) or {}).get("threshold")

    def __getstate__(self) -> dict:
        """What is saved: the model and the history, never the serving state built from them."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_online", "_follower")}

    def online(self) -> OnlineFeatures:
        """The entity timelines and submission log of the history (the bundled one, or the store's: `use_history`),
        built once per loaded bundle and per history."""
        if getattr(self, "_online", None) is None:
            self._online = OnlineFeatures(self.history)
        return self._online

    def use_history(self, jobs: pd.DataFrame) -> None:
        """Compute live features from `jobs` (canonical; a site's store) instead of the bundled history; the
        timelines are built first and then swapped in, so a request sees the old history or the new one whole."""
        self._online = OnlineFeatures(self.history_tail(to_canonical_dtypes(jobs)))

    def warm(self) -> None:
        """Build what serving needs once per loaded model (entity timelines, the model's array view); where
        JOBAWARE_STORE names the site's job store, its history, kept current from then on (`store_history`)."""
        self._follower = store_history.follow(self)
        if not self.history.empty:  # one bundled job asked about again: counted once, as every repeat is
            self.answer(JobColumns.from_frame(self.history.tail(1).assign(end_time=pd.NaT)))

    def features(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Features of `jobs` with the bundled history before them.

        Jobs that have not ended (what a scheduler asks about) take the fast path, whatever their submit times.
        Jobs with ends (scoring a trace) add their own history causally after the bundled jobs that ended
        before the earliest submit time asked about, so scoring the later part of a trace after training on
        its earlier part counts no job twice.
        """
        jobs = to_canonical_dtypes(jobs)
        if jobs["end_time"].isna().all():
            return self.online().features(JobColumns.from_frame(jobs))
        first_submit = jobs["submit_time"].min()
        past = self.history[self.history["end_time"] < first_submit] if pd.notna(first_submit) else self.history
        return build_features(jobs, past)

    def answer(self, jobs: JobColumns) -> dict[str, np.ndarray]:
        """Per job: job_id, p_fail, the outcome probabilities, the most likely failure, whether P(fail) is at or above
        the operating threshold and the threshold (both None without one), as arrays. Jobs that have
        not ended (what a scheduler asks about) stay in arrays from the request to the answer."""
        if (jobs["end_time"] == NAT).all():
            block = self.online().block(jobs)
            proba = self.model.probabilities(self.model.block_matrix(block, {c: jobs[c] for c in CATEGORICAL}))
        else:
            proba = self.model.probabilities(self.model.matrix(self.features(jobs.frame())))
        threshold = self.threshold
        return {"job_id": jobs["job_id"], **dict(zip(PROBABILITIES, proba.T, strict=True)),
                "most_likely_failure": _FAILURES[proba[:, 2:].argmax(axis=1)],
                "likely_fail": proba[:, 0] >= threshold if threshold is not None else np.full(len(proba), None),
                "threshold": np.full(len(proba), threshold, dtype=object if threshold is None else float)}

    def predict(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Per job: job_id, p_fail, the outcome probabilities, the most likely failure, likely_fail and threshold."""
        jobs = to_canonical_dtypes(jobs)
        table = pd.DataFrame(self.answer(JobColumns.from_frame(jobs)))
        table["job_id"] = pd.array(jobs["job_id"], dtype="Int64")
        return table


_FAILURES = np.asarray(FAILURES, dtype=object)  # PROBABILITIES from the third on: p_FAILED, ... (OUTCOMES[1:])


def signature():
    """The pyfunc signature: submit-time fields in (only job_id and submit_time required); probabilities, the
    operating threshold and the flag at it out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    from jobaware.failure.schema import OUTCOMES, SUBMIT_FIELDS
    from jobaware.jobtable.schema import INTEGER, NUMERIC, TIME_COLUMNS

    def kind(field: str) -> str:
        if field == "job_id":
            return "long"
        if field in TIME_COLUMNS:
            return "datetime"
        return "double" if field in NUMERIC or field in INTEGER else "string"

    inputs = Schema([ColSpec(kind(f), f, required=f in ("job_id", "submit_time")) for f in SUBMIT_FIELDS])
    probabilities = [ColSpec("double", f"p_{c}") for c in ("fail", *OUTCOMES)]
    outputs = Schema([ColSpec("long", "job_id"), *probabilities, ColSpec("string", "most_likely_failure"),
                      ColSpec("boolean", "likely_fail", required=False), ColSpec("double", "threshold", required=False)])
    return ModelSignature(inputs=inputs, outputs=outputs)


def input_example(bundle) -> pd.DataFrame:
    """The three most recent jobs of the bundled history (or, for a bundle without history, the capability's
    example request), as submit-time records of the signature's types."""
    from jobaware.failure.capability import CAPABILITY
    from jobaware.failure.schema import SUBMIT_FIELDS
    from jobaware.jobtable.common import to_canonical_dtypes
    from jobaware.jobtable.schema import INTEGER, NUMERIC

    history = bundle.history if len(bundle.history) else to_canonical_dtypes(pd.DataFrame(CAPABILITY.example[1]["jobs"]))
    frame = history.sort_values("submit_time").tail(3)[list(SUBMIT_FIELDS)].copy()
    for column in frame.columns:
        if column == "job_id":
            frame[column] = frame[column].astype("int64")
        elif column in NUMERIC or column in INTEGER:
            frame[column] = frame[column].astype("float64")
        elif pd.api.types.is_string_dtype(frame[column]):
            frame[column] = frame[column].astype(object)
    return frame.reset_index(drop=True)
