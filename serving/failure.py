"""BentoML service for `failure`: will this Slurm job fail, and how?"""

from __future__ import annotations

import os

import anyio
import bentoml
import pydantic_core
from pydantic import BaseModel, Field
from starlette.responses import Response

from jobaware.failure.service import answer_rows
from jobaware.fit import answer_flags
from jobaware.failure.reader.slurm import parse_request, request_schema
from serving.base import ChampionFollower, answering, harden, request_body

# jobs per request: an answer takes about 280 bytes per job, so 3,000 keep it under 1 MiB (issue 30)
MAX_JOBS = int(os.environ.get("JOBAWARE_MAX_JOBS", "3000"))
INLINE_JOBS = 32  # up to this many jobs take well under a millisecond or two: answered on the event loop

PredictRequest = request_body("PredictRequest", {
    "type": "object", "required": ["jobs"], "additionalProperties": False,
    "properties": {"jobs": {**request_schema(MAX_JOBS), "description": "job records, canonical or squeue --json"}},
})


class JobPrediction(BaseModel):
    job_id: int
    p_fail: float = Field(description="P(the job does not complete)")
    p_COMPLETED: float
    p_FAILED: float
    p_TIMEOUT: float
    p_OUT_OF_MEMORY: float
    p_NODE_FAIL: float
    most_likely_failure: str
    likely_fail: bool | None = Field(description="P(fail) is at or above `threshold`: the flag a scheduler adapter "
                                     "acts on; null when the model has no operating threshold")
    threshold: float | None = Field(description="the model's operating threshold on P(fail), chosen on its "
                                    "validation period and registered with it; null when it has none")
    model_version: str


class Predictions(BaseModel):
    model_version: str
    predictions: list[JobPrediction]
    fit: list[str] = Field(default_factory=list, description=(
        "where this batch is unlike the model's training data, one line each: trained on synthetic data, or a "
        "numeric field with values outside its training range (1st..99th percentile); empty when neither"))


@bentoml.service(name="jobaware-failure", traffic={"timeout": 60})
class FailureService:
    """Will this Slurm job fail, and how? Jobs in the canonical schema or as squeue --json records."""

    def __init__(self) -> None:
        self.champion = ChampionFollower("failure")

    def __is_ready__(self) -> bool:
        return self.champion.ready

    @bentoml.api(route="/predict", input_spec=PredictRequest, output_spec=Predictions)
    async def predict(self, jobs=None) -> Response:
        """Per job: P(fail), the probability of each outcome, the most likely failure, and whether P(fail) is at or
        above the model's registered operating threshold (`likely_fail`, with the `threshold`)."""
        # a few jobs (one scheduler hook asking) are answered on the event loop, with no hand-over to a thread; a
        # batch goes to a worker thread, so that probes and small requests are not held up behind it
        bundle, version = self.champion.get()
        profile = self.champion.profiles.get(version)
        if not isinstance(jobs, list) or len(jobs) <= INLINE_JOBS:
            return self._answer(bundle, version, profile, jobs)
        return await anyio.to_thread.run_sync(self._answer, bundle, version, profile, jobs)

    @staticmethod
    def _answer(bundle, version: str, profile: dict | None, jobs) -> Response:
        """The answer as `Predictions` JSON, encoded here in one piece: BentoML would validate the rows against the
        model again and send them in chunks, which costs more than the answer for a single job."""
        with answering():
            columns = parse_request(jobs, MAX_JOBS)
            rows = answer_rows(bundle.answer(columns), version)
        body = {"model_version": version, "predictions": rows, "fit": answer_flags(profile, version, columns.columns)}
        return Response(pydantic_core.to_json(body, inf_nan_mode="null"), media_type="application/json")


harden(FailureService)
