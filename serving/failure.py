"""BentoML service for `failure`: loads models:/jobaware-failure@champion and follows its promotions."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import bentoml
from bentoml.exceptions import InvalidArgument, ServiceUnavailable
from pydantic import BaseModel, Field

from jobaware import tracking
from jobaware.errors import InputError
from jobaware.failure.predict import records
from jobaware.failure.readers.slurm import parse_request_jobs

KEY = "failure"
logger = logging.getLogger("jobaware.serving")
RELOAD_SECONDS = float(os.environ.get("JOBAWARE_RELOAD_SECONDS", "5"))
MAX_JOBS = int(os.environ.get("JOBAWARE_MAX_JOBS", "10000"))


class JobPrediction(BaseModel):
    job_id: int
    p_fail: float = Field(description="P(the job does not complete)")
    p_COMPLETED: float
    p_FAILED: float
    p_TIMEOUT: float
    p_OUT_OF_MEMORY: float
    p_NODE_FAIL: float
    most_likely_failure: str
    model_version: str


class Predictions(BaseModel):
    model_version: str
    predictions: list[JobPrediction]


@bentoml.service(name="jobaware-failure", traffic={"timeout": 60})
class FailureService:
    """Will this Slurm job fail, and how? Jobs in the canonical schema or as squeue --json records."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bundle, self.version, self.checked = None, None, 0.0
        self._refresh(force=True)

    def _refresh(self, force: bool = False) -> None:
        """Load the champion if it moved; checks the registry at most every RELOAD_SECONDS."""
        if not force and time.monotonic() - self.checked < RELOAD_SECONDS:
            return
        with self.lock:
            self.checked = time.monotonic()
            try:
                version = tracking.champion_version(KEY)
                if version is not None and version != self.version:
                    self.bundle, self.version = tracking.load_bundle(KEY, version)
            except Exception as exc:  # noqa: BLE001 - a registry hiccup must not take the service down
                logger.warning("could not refresh the champion of jobaware-%s (serving version %s): %s",
                               KEY, self.version, exc)

    def __is_ready__(self) -> bool:
        self._refresh()
        return self.bundle is not None

    @bentoml.api(route="/predict")
    def predict(self, jobs: list[dict[str, Any]] = Field(description="job records, canonical or squeue --json")) -> Predictions:
        self._refresh()
        if self.bundle is None:
            raise ServiceUnavailable("no champion model of jobaware-failure yet; run `jobaware pipeline run failure`")
        if len(jobs) > MAX_JOBS:
            raise InvalidArgument(f"jobs: at most {MAX_JOBS} jobs per request, got {len(jobs)}")
        try:
            frame = parse_request_jobs(jobs)
        except InputError as exc:
            raise InvalidArgument(str(exc)) from None
        bundle, version = self.bundle, self.version
        rows = records(bundle.predict(frame), version)
        return Predictions(model_version=version, predictions=[JobPrediction(**row) for row in rows])
