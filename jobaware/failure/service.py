"""`failure`'s answers: `POST /predict` (`Limits`, the body `PredictRequest`, the answer `predict`, described by
`Predictions`) and `predict_file` over job files (NREL, SWF or squeue --json), whose history features are computed
causally from the files themselves.

The body is declared by pydantic models (`CanonicalJob`, `SqueueJob`: what the OpenAPI document shows) and read by
the vectorised parser behind them (`reader.slurm.parse_request`: a batch of valid canonical records is checked a
column at a time, anything else record by record, naming the first bad field).
"""

from __future__ import annotations

import json
from functools import cache
from itertools import repeat
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, create_model
from pydantic_settings import SettingsConfigDict

from jobaware import fit
from jobaware.bodies import Body
from jobaware.bodies import Limits as BaseLimits
from jobaware.errors import InputError
from jobaware.failure.reader import iter_batches
from jobaware.failure.reader.dispatch import contract_for, job_files
from jobaware.failure.reader.slurm import SQUEUE_NUMBERS, SQUEUE_TEXTS, parse_request, read_squeue_json
from jobaware.jobtable.common import to_canonical_dtypes
from jobaware.jobtable.schema import (
    COLUMNS,
    EPOCH_RANGE,
    INTEGER,
    NUMERIC,
    STATES,
    TIME_COLUMNS,
    TIME_TEXT_PATTERN,
    max_text,
)
from jobaware.jobtable.schema import LIMITS as BOUNDS
from jobaware.jsonable import jsonable
from jobaware.model import Served
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import read_each, write_quarantine


def _is_squeue(path: Path) -> bool:
    if path.suffix.lower() != ".json":
        return False
    with open(path, "rb") as handle:
        return handle.read(256).lstrip().startswith(b"{")


def read_for_prediction(path: str | Path) -> tuple[pd.DataFrame, list[dict], list[str]]:
    """Jobs of an NREL (CSV/JSON/Parquet), SWF or squeue --json file; the quarantined records and problems."""
    path = Path(path)
    if path.is_file() and _is_squeue(path):
        return read_squeue_json(path)
    frames, quarantined, problems = [], [], []
    for batch in iter_batches(path):
        frames.append(batch.frame)
        quarantined += batch.quarantined
        problems += [str(p) for p in batch.problems]
    jobs = pd.concat(frames, ignore_index=True) if frames else to_canonical_dtypes(pd.DataFrame())
    return jobs, quarantined, problems


class Limits(BaseLimits):
    """What the service accepts (JOBAWARE_FAILURE_MAX_JOBS): jobs per request. An answer takes about 280 bytes per
    job, so 3,000 keep it under 1 MiB (issue 30)."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_FAILURE_")
    max_jobs: int = Field(3000, ge=1, le=100_000)


LIMITS = Limits.load()
INLINE_BYTES = 16 << 10  # a body this small (about 32 jobs) is answered in well under a millisecond or two

_TIME = Annotated[str, Field(pattern=TIME_TEXT_PATTERN)] | Annotated[int, Field(ge=EPOCH_RANGE[0] * 1000,
                                                                               le=EPOCH_RANGE[1] * 1000)]


def _canonical_field(column: str) -> tuple:
    if column in INTEGER or column in NUMERIC:
        kind = Annotated[int if column in INTEGER else float, Field(ge=BOUNDS[column][0], le=BOUNDS[column][1])]
    elif column in TIME_COLUMNS:
        return _TIME | None, Field(None, description="'YYYY-MM-DD HH:MM:SS' or epoch milliseconds")
    elif column == "state":
        kind = Literal[STATES]
    else:
        kind = Annotated[str, Field(max_length=max_text(column))]
    return (kind, ...) if column == "job_id" else (kind | None, None)


CanonicalJob = create_model(
    "CanonicalJob", __base__=Body, __doc__="a job in the canonical schema; a missing submit_time is now; post-run "
    "fields describe ended jobs of the history", **{column: _canonical_field(column) for column in COLUMNS})


def _wrapped(kind: type, low, high) -> Any:
    """A number plain or in Slurm 23's {"set", "infinite", "number"} wrapper."""
    plain = Annotated[kind, Field(ge=low, le=high)]
    wrapper = create_model(f"Wrapped_{kind.__name__}_{high}", __base__=Body, set=(bool | None, None),
                           infinite=(bool | None, None), number=(plain | None, None))
    return plain | wrapper | None


_STATE = Annotated[str, Field(max_length=64, description="a Slurm job state such as PENDING")]
SqueueJob = create_model(
    "SqueueJob", __base__=BaseModel,
    __config__=ConfigDict(extra="allow", json_schema_extra={"description": (
        "an `squeue --json` job record (Slurm's field names, read as `jobaware predict` reads them); two rules no "
        "JSON Schema states: memory_per_cpu times cpus within mem_req's bound, and the GPUs named in the tres "
        "strings within gpus_req's")}),
    job_id=(Annotated[int, Field(ge=0, le=BOUNDS["job_id"][1])], ...),
    job_state=(_STATE | Annotated[list[_STATE], Field(min_length=1)], ...),
    **{field: (_wrapped(int if kind == "integer" else float, BOUNDS[column][0], BOUNDS[column][1] // scale), None)
       for field, (column, kind, scale) in SQUEUE_NUMBERS.items()},
    **{field: (_wrapped(int, *EPOCH_RANGE), None) for field in ("submit_time", "start_time", "end_time")},
    **{field: (Annotated[str, Field(max_length=max_text(column))] | None, None) for field, column in SQUEUE_TEXTS.items()},
    **{field: (str | None, Field(None, description="Slurm's TRES text; GPUs are read from `gres/gpu=N`"))
       for field in ("tres_per_node", "tres_per_job", "tres_req_str")})


@cache
def request_model(limits: Limits) -> type[Body]:
    """The body of `POST /predict` under `limits`: its jobs are read by `parse_request` into canonical columns."""
    records = Annotated[list[CanonicalJob | SqueueJob], Field(min_length=1, max_length=limits.max_jobs)]
    Jobs = Annotated[Any, PlainValidator(lambda jobs: parse_request(jobs, limits.max_jobs),
                                         json_schema_input_type=records)]

    class PredictRequest(Body):
        model_config = ConfigDict(json_schema_extra={"required": ["jobs"]})
        jobs: Jobs = Field(None, validate_default=True, description="job records, canonical or squeue --json")

    return PredictRequest


PredictRequest = request_model(LIMITS)


# Why a body valid by the OpenAPI document may still be refused (the reason with numbers and quoted values blanked as
# #): what no JSON Schema can state. The conformance suite's fuzz allows these refusals and no other; and most valid
# bodies need nothing beyond the document, so at least VALID_ANSWERED of them must be answered.
UNSTATABLE = (r"^jobs\[#\]\.memory_per_cpu: expected at most [#,]+ MB in all",  # squeue: memory per CPU times cpus
              r"^jobs\[#\]\.tres_req_str: expected at most [#,]+ GPUs")  # a count inside Slurm's TRES text
VALID_ANSWERED = 0.6


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


def predict(body, model: Served, limits: Limits = LIMITS) -> dict:
    """Per job: P(fail), the probability of each outcome, the most likely failure, and whether P(fail) is at or
    above the model's registered operating threshold (`likely_fail`, with the `threshold`)."""
    columns = body.jobs
    return {"model_version": model.version, "predictions": answer_rows(model.bundle.answer(columns), model.version),
            "fit": model.fit(columns.columns)}


def answer_rows(answer: dict[str, np.ndarray], version: str) -> list[dict]:
    """A bundle's `answer` (arrays per field) as one plain dict per job, with the model version."""
    from jobaware.failure.model import PROBABILITIES

    names = ["job_id", *PROBABILITIES, "most_likely_failure", "likely_fail", "threshold", "model_version"]
    columns = [answer["job_id"].astype(np.int64).tolist(), *(answer[name].tolist() for name in names[1:-1])]
    return [dict(zip(names, values)) for values in zip(*columns, repeat(version, len(columns[0])), strict=True)]


def records(predictions: pd.DataFrame, version: str) -> list[dict]:
    """Prediction rows as plain JSON-ready dicts, with the model version."""
    rows = json.loads(predictions.to_json(orient="records"))
    for row in rows:
        row["model_version"] = version
    return rows


def predict_file(inputs: list[str], output: str | Path, model, progress=None) -> PredictionSummary:
    """Predict every readable job of the files (paths, globs, folders), written as JSON Lines (`-`: standard
    output); bad records go to `<output>.quarantine.jsonl`, counted, never dropped silently. The files are read
    before `model()` loads the model; a read with no job in it is an InputError."""
    frames, quarantined, problems = [], [], []
    paths = job_files(inputs)

    def unreadable(problem, record) -> None:
        problems.append(str(problem))
        quarantined.append(record)

    for jobs, bad, found in read_each(paths, read_for_prediction, unreadable):
        frames.append(jobs)
        quarantined += bad
        problems += found
    jobs = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0] if frames else None
    if jobs is None or not len(jobs):
        first = f"; first: {problems[0]}" if problems else ""
        raise InputError(f"{', '.join(map(str, paths))}: no job read ({len(quarantined):,} bad record(s)){first}")
    bundle, version = model()
    predictions = bundle.predict(jobs)
    with atomic_text(output) as handle:
        for row in records(predictions, version):
            handle.write(json.dumps(jsonable(row), allow_nan=False) + "\n")
    if progress:
        progress(len(predictions))
    return PredictionSummary(predictions=len(predictions), model_version=version, output=str(output),
                             bad_records=len(quarantined), quarantine=write_quarantine(output, quarantined),
                             problems=problems[:20], input_profile=fit.describe({contract_for(paths[0]): jobs}, paths))
