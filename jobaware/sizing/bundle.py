"""What a registered sizing model carries: a calibrated model per resource it learnt (run time; memory where the
jobs told it), and every entity's last ended jobs, from which a live job's history features are computed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from jobaware.model import Bundle
from jobaware.sizing.capability import FEATURE_VERSION
from jobaware.sizing.features import EntityStates, build_features, live_features
from jobaware.sizing.model import MEMORY, TIME, SizingModel
from jobaware.sizing.schema import MAX_MEM_PER_CPU_MB, YEAR

NO_HISTORY = "no history: no recommendation"
NO_TIME_ASKED = "no time asked: no recommendation"
NO_TIME_ASKED_MEMORY = "no time asked: memory only"  # a job stating no time limit (HTCondor's) sized on memory
TIME_BEYOND = "time asked beyond a year: no recommendation"  # a share of such a request is no estimate
# what a job record holds when it asks (the sizing_jobs columns known at submit)
REQUEST_COLUMNS = ("job_id", "user", "group", "name", "queue", "procs", "time_req_s", "mem_req_mb", "submit_time")
ANSWER = ("job_id", "time_s", "time_asked_s", "time_fit", "mem_per_cpu_mb", "mem_asked_per_cpu_mb", "mem_fit",
          "coverage", "note")


@dataclass
class SizingBundle(Bundle):
    models: dict[str, SizingModel]
    states: dict[str, EntityStates]
    coverage: float
    trained_on: Mapping[str, Any] = field(default_factory=dict)
    feature_version: str = FEATURE_VERSION

    def features(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Features of job records: jobs that have not ended (what a scheduler asks about) from the bundled
        history as it stands; jobs with ends (a trace) from their own earlier jobs alone, so that scoring a trace
        never sees the bundled history of its own later jobs."""
        if "end_time" in jobs and jobs["end_time"].notna().any():
            return build_features(jobs)[0]
        return live_features(jobs, self.states)

    def recommend(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Per job: the ANSWER columns (`time_s` and `mem_per_cpu_mb` NaN where there is no recommendation, and
        `note` says why where there is no run-time one; `time_fit` and `mem_fit` the estimated probability that
        this job fits its recommendation, `coverage` the share of all jobs that do)."""
        jobs = with_request_columns(jobs)
        features = self.features(jobs)
        procs = jobs["procs"].to_numpy(float, na_value=np.nan)
        asked = {r.name: jobs[r.asked].to_numpy(float, na_value=np.nan) for r in (TIME, MEMORY)}
        sized = {}
        for resource in (TIME, MEMORY):
            model = self.models.get(resource.name)
            if model is None:
                sized[resource.name] = (np.full(len(jobs), np.nan),) * 2
                continue
            sized[resource.name] = model.recommend(model.jobs(features, asked[resource.name], procs),
                                                   model.has_history(features))
        beyond = {TIME.name: asked[TIME.name] > YEAR, MEMORY.name: asked[MEMORY.name] > MAX_MEM_PER_CPU_MB}
        sized = {name: tuple(np.where(beyond[name], np.nan, values) for values in pair) for name, pair in sized.items()}
        time_s, time_fit = sized[TIME.name]
        no_time = ~np.isfinite(asked[TIME.name]) | (asked[TIME.name] <= 0)
        memory = np.isfinite(sized[MEMORY.name][0])
        note = pd.Series([None if known else TIME_BEYOND if too_long else
                          (NO_TIME_ASKED_MEMORY if sized_memory else NO_TIME_ASKED) if unasked else NO_HISTORY
                          for known, too_long, unasked, sized_memory
                          in zip(np.isfinite(time_s), beyond[TIME.name], no_time, memory, strict=True)], dtype=object)
        return pd.DataFrame({"job_id": jobs["job_id"].to_numpy(), "time_s": time_s, "time_asked_s": asked[TIME.name],
                             "time_fit": time_fit, "mem_per_cpu_mb": sized[MEMORY.name][0],
                             "mem_asked_per_cpu_mb": asked[MEMORY.name], "mem_fit": sized[MEMORY.name][1],
                             "coverage": self.coverage, "note": note})

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        return self.recommend(frame)

    def warm(self) -> None:
        """Compile the feature walk once, before the first request."""
        self.recommend(pd.DataFrame({"job_id": [0], "user": ["warm"], "time_req_s": [3600.0],
                                     "submit_time": [pd.Timestamp.now(tz="UTC")]}))


def with_request_columns(jobs: pd.DataFrame) -> pd.DataFrame:
    """Job records with every REQUEST_COLUMNS column (missing ones unknown) and the sizing_jobs types."""
    jobs = jobs.copy()
    for column in REQUEST_COLUMNS:
        if column not in jobs:
            jobs[column] = None
    for column in ("procs", "time_req_s", "mem_req_mb"):
        jobs[column] = pd.to_numeric(jobs[column], errors="coerce").astype(float)
    for column in ("user", "group", "name", "queue"):
        jobs[column] = jobs[column].astype(object).where(jobs[column].notna(), None)
    jobs["submit_time"] = pd.to_datetime(jobs["submit_time"], utc=True)
    return jobs.reset_index(drop=True)


def signature():
    """The pyfunc signature: the request of a job in (user and time asked matter most), the recommendation out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    kinds = {"job_id": "long", "procs": "double", "time_req_s": "double", "mem_req_mb": "double",
             "submit_time": "datetime"}
    inputs = Schema([ColSpec(kinds.get(c, "string"), c, required=c in ("user", "submit_time"))
                     for c in REQUEST_COLUMNS])
    outputs = Schema([ColSpec("long", "job_id", required=False),
                      *(ColSpec("double", c, required=False) for c in ANSWER[1:-1]),
                      ColSpec("string", "note", required=False)])
    return ModelSignature(inputs=inputs, outputs=outputs)


def input_example(bundle: SizingBundle) -> pd.DataFrame:
    """Three jobs of users the bundle has history of, as they would ask at submission."""
    users = list(bundle.states["user"].code_of)[-3:] or ["user0"]
    return pd.DataFrame({"job_id": np.arange(1, len(users) + 1, dtype="int64"), "user": users, "group": None,
                         "name": None, "queue": None, "procs": 8.0, "time_req_s": 3600.0, "mem_req_mb": np.nan,
                         "submit_time": pd.Timestamp("2026-01-01", tz="UTC")})
