"""`sizing`'s answers: the body of `POST /size` (`SizeRequest`, under `Limits`: JOBAWARE_SIZING_MAX_JOBS), its answer
(`size`), and `predict_file` over SWF traces and HTCondor event logs, whose history features come from each
source's own earlier jobs.

Each answer row: `job_id`, `time_s` (the recommended time limit, seconds, never above the request; null with a
`note` where there is none), `time_asked_s`, `time_fit` (the estimated probability that this job ends within
`time_s`; 1 where `time_s` is the request), `mem_per_cpu_mb` and `mem_fit` (the recommended memory per processor,
MB, and its probability; absent where the user has no memory history or the job asked no memory),
`mem_asked_per_cpu_mb`, `coverage` (the share of all jobs that fit their recommendations, which the
recommendations were calibrated for).
"""

from __future__ import annotations

import json
import math
import time
from functools import cache
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from jobaware import fit
from jobaware.bodies import Body
from jobaware.bodies import Limits as BaseLimits
from jobaware.errors import InputError
from jobaware.jsonable import jsonable
from jobaware.model import Served
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import read_each, write_quarantine
from jobaware.sizing.reader import read_source, source_paths
from jobaware.sizing.schema import CONTRACT, MAX_MEM_PER_CPU_MB, YEAR

MAX_PROCS = 10**7
MAX_TEXT = 256
SAFE_INTEGER = 2**53 - 1
EPOCH_RANGE = (0, 4_102_444_800)  # 1970 to 2100


class Limits(BaseLimits):
    """What the service accepts (JOBAWARE_SIZING_MAX_JOBS): jobs per request."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_SIZING_")
    max_jobs: int = Field(1000, ge=1, le=100_000)


LIMITS = Limits.load()

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]


class SizedJob(Body):
    """A job at submission (or pending)."""

    job_id: Annotated[int, Field(ge=0, le=SAFE_INTEGER)] | None = None
    user: Text = Field(description="whose history sizes the job")
    group: Text | None = Field(None, description="group or account")
    name: Text | None = Field(None, description="job name or executable")
    queue: Text | None = Field(None, description="queue or partition")
    procs: Annotated[int, Field(ge=1, le=MAX_PROCS)] | None = Field(None, description="processors asked for")
    # at least 1 (not "more than 0": OpenAPI 3.0's JSON Schema states no exclusive bound as a number)
    time_asked_s: Annotated[float, Field(ge=1, le=YEAR)] | None = Field(
        None, description="the time limit asked for, seconds (at least one, at most a year)")
    mem_asked_per_cpu_mb: Annotated[float, Field(ge=1, le=MAX_MEM_PER_CPU_MB)] | None = Field(
        None, description="memory asked for per processor, MB (at least one)")
    submit_time: Annotated[float, Field(ge=EPOCH_RANGE[0], le=EPOCH_RANGE[1])] | None = Field(
        None, description="seconds since the epoch; now when not given")


@cache
def request_model(limits: Limits) -> type[Body]:
    """The body of `POST /size` under `limits`: jobs at submission."""

    class SizeRequest(Body):
        """The body of `POST /size`: jobs at submission."""

        jobs: list[SizedJob] = Field(min_length=1, max_length=limits.max_jobs)

    return SizeRequest


SizeRequest = request_model(LIMITS)

# Why a body valid by the OpenAPI document may still be refused: nothing (every bound of /size is in the document),
# so every valid body is answered.
UNSTATABLE = ()
VALID_ANSWERED = 1.0


def request_jobs(body, now: float | None = None) -> pd.DataFrame:
    """The jobs of a checked body as `sizing_jobs` request columns."""
    now = time.time() if now is None else now
    rows = [{"job_id": job.job_id, "user": job.user, "group": job.group, "name": job.name, "queue": job.queue,
             "procs": job.procs, "time_req_s": job.time_asked_s, "mem_req_mb": job.mem_asked_per_cpu_mb,
             "submit_time": now if job.submit_time is None else job.submit_time} for job in body.jobs]
    jobs = pd.DataFrame(rows)
    jobs["submit_time"] = pd.to_datetime(jobs["submit_time"].astype(float), unit="s", utc=True)
    return jobs


def answer_rows(recommended: pd.DataFrame, version: str) -> list[dict]:
    """Recommendations as one plain dict per job: null where unknown; `mem_per_cpu_mb` and `mem_fit` left out
    where there is no memory recommendation, `time_fit` and `note` as there is a time one or not."""
    rows = []
    for record in recommended.to_dict("records"):
        row = {"job_id": None if _missing(record["job_id"]) else int(record["job_id"])}
        row["time_s"] = None if _missing(record["time_s"]) else int(record["time_s"])
        row["time_asked_s"] = None if _missing(record["time_asked_s"]) else float(record["time_asked_s"])
        if row["time_s"] is not None:
            row["time_fit"] = round(float(record["time_fit"]), 3)
        if not _missing(record["mem_per_cpu_mb"]):
            row["mem_per_cpu_mb"] = int(record["mem_per_cpu_mb"])
            row["mem_fit"] = round(float(record["mem_fit"]), 3)
        row["mem_asked_per_cpu_mb"] = None if _missing(record["mem_asked_per_cpu_mb"]) else float(record["mem_asked_per_cpu_mb"])
        row["coverage"] = float(record["coverage"])
        if record["note"] is not None:
            row["note"] = record["note"]
        row["model_version"] = version
        rows.append(row)
    return rows


def _missing(value) -> bool:
    """None, NaN, or a value no JSON number holds (an infinite bound is no recommendation)."""
    return value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value))


def size(body, model: Served, limits: Limits = LIMITS) -> dict:
    """Per job: the recommended time limit and memory per processor, beside what it asked, with each one's
    estimated probability of fitting, and the coverage the recommendations were calibrated for."""
    jobs = request_jobs(body)
    columns = {"procs": jobs["procs"].to_numpy(float, na_value=np.nan),
               "time_req_s": jobs["time_req_s"].to_numpy(float, na_value=np.nan),
               "mem_req_mb": jobs["mem_req_mb"].to_numpy(float, na_value=np.nan)}
    return {"model_version": model.version, "coverage": model.bundle.coverage,
            "results": answer_rows(model.bundle.recommend(jobs), model.version), "fit": model.fit(columns)}


def predict_file(inputs: list[str], output: str | Path, model, progress=None) -> PredictionSummary:
    """Recommend for every readable job of the traces, Eagle job tables or event logs (paths, globs, folders), each
    from its own source's earlier jobs, written as JSON Lines (`-`: standard output); bad records go to
    `<output>.quarantine.jsonl`. The sources are read before `model()` loads the model; sources with no job in them
    are an InputError."""
    paths = source_paths(inputs)
    frames, quarantined, problems = [], [], []

    def unreadable(problem, record) -> None:
        problems.append(str(problem))
        quarantined.append(record)

    for jobs, found, bad in read_each(paths, read_source, unreadable):
        frames.append(jobs)
        quarantined += bad
        problems += [str(p) for p in found]
    if not sum(len(jobs) for jobs in frames):
        first = f"; first: {problems[0]}" if problems else ""
        raise InputError(f"{', '.join(map(str, paths))}: no job read ({len(quarantined):,} bad record(s)){first}")
    bundle, version = model()
    rows = []
    for jobs in frames:
        if len(jobs):
            rows += answer_rows(bundle.recommend(jobs), version)
        if progress:
            progress(len(jobs))
    with atomic_text(output) as handle:
        for row in rows:
            handle.write(json.dumps(jsonable(row), allow_nan=False) + "\n")
    jobs = pd.concat(frames, ignore_index=True)
    recommended = sum(row["time_s"] is not None or row.get("mem_per_cpu_mb") is not None for row in rows)
    return PredictionSummary(predictions=len(rows), model_version=version, output=str(output),
                             bad_records=len(quarantined), quarantine=write_quarantine(output, quarantined),
                             problems=problems[:20], counts={"recommended": recommended,
                                                             "no_recommendation": len(rows) - recommended},
                             input_profile=fit.describe({CONTRACT: jobs}, paths))
