"""What a registered wait model carries: the calibrated model, the wait histories at the end of its training data,
and what it knows of each cluster it was trained on (processors, zone)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from jobaware.model import Bundle
from jobaware.wait.capability import FEATURE_VERSION
from jobaware.wait.features import History, Snapshot, job_keys, seconds, snapshot_features, sweep
from jobaware.wait.model import WaitModel

ANSWER = ("wait_s", "wait_low_s", "wait_high_s", "wait_bound_s")


@dataclass
class WaitBundle(Bundle):
    model: WaitModel
    history: History
    # name -> {"capacity": processors, "timezone": zone, "capacity_stated": whether the source stated the size}
    clusters: dict[str, dict] = field(default_factory=dict)
    feature_version: str = FEATURE_VERSION

    def trace_features(self, jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Features of every job of a trace (the queue rebuilt from the trace itself), and the jobs in that order."""
        from jobaware.wait.features import order
        from jobaware.wait.schema import complete

        jobs = complete(jobs)
        features, _ = sweep(jobs)
        return features, order(jobs)

    def trace_answer(self, jobs: pd.DataFrame) -> tuple[dict[str, np.ndarray], pd.DataFrame, pd.DataFrame]:
        """The four waits of every job of a trace, each as it was at its submit (the queue and the calibration
        rebuilt from the trace's earlier jobs), their features, and the jobs in that order."""
        features, ordered = self.trace_features(jobs)
        answer = self.model.predict_in_time(features, seconds(ordered["submit_time"]), ordered["wait_s"].to_numpy(float),
                                            seconds(ordered["start_time"]), job_keys(ordered))
        return answer, features, ordered

    def predict(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Per job of a trace (queue_jobs records; the queue is rebuilt from them): job_id and the four waits."""
        answer, _, ordered = self.trace_answer(jobs)
        return pd.DataFrame({"job_id": ordered["job_id"].astype("int64").to_numpy(), **answer})

    def snapshot(self, jobs: pd.DataFrame, snapshot: Snapshot) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
        """The answer for `jobs` at a queue snapshot, and their features (for the reasons)."""
        features = snapshot_features(jobs, snapshot, self.history)
        return self.model.predict(features), features

    def warm(self) -> None:
        """Compile the snapshot code once, before the first request."""
        from jobaware.wait.service import example_snapshot

        jobs, snapshot = example_snapshot(self)
        self.snapshot(jobs, snapshot)


def signature():
    """The pyfunc signature: queue_jobs records in (job_id and submit_time required), the four waits out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    inputs = Schema([ColSpec("string", "cluster", required=False), ColSpec("long", "job_id"),
                     ColSpec("string", "user", required=False), ColSpec("string", "group", required=False),
                     ColSpec("string", "queue", required=False), ColSpec("double", "processors_req", required=False),
                     ColSpec("double", "wallclock_req", required=False), ColSpec("datetime", "submit_time"),
                     ColSpec("datetime", "start_time", required=False), ColSpec("datetime", "end_time", required=False)])
    outputs = Schema([ColSpec("long", "job_id"), *(ColSpec("double", name) for name in ANSWER)])
    return ModelSignature(inputs=inputs, outputs=outputs)


def input_example(bundle) -> pd.DataFrame:
    """Three jobs of one small queue, as records of the signature's types."""
    t0 = pd.Timestamp("2024-01-01 09:00:00")
    return pd.DataFrame({
        "cluster": ["example"] * 3, "job_id": [1, 2, 3], "user": ["alice", "bob", "alice"],
        "group": ["physics"] * 3, "queue": ["batch"] * 3, "processors_req": [64.0, 32.0, 8.0],
        "wallclock_req": [7200.0, 3600.0, 600.0],
        "submit_time": [t0, t0 + pd.Timedelta(minutes=5), t0 + pd.Timedelta(minutes=9)],
        "start_time": [t0, t0 + pd.Timedelta(minutes=30), pd.NaT],
        "end_time": [t0 + pd.Timedelta(hours=1), t0 + pd.Timedelta(minutes=80), pd.NaT],
    })
