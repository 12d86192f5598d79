"""`wait`'s answers: `POST /wait` (`Limits`, the body `WaitRequest`, the answer `wait`) and `predict_file` over
traces.

`POST /wait` takes a queue snapshot: the moment (`time`, default now), the jobs to estimate (`jobs`), the running
jobs (`running`, with their start times) and the pending ones in the order the scheduler serves them (`pending`);
optionally the `cluster` (default: the one the model was trained on) and its `capacity` in processors. A job that is
in the pending list is estimated from where it stands (its remaining wait from `time`); any other job as a new
submission behind every pending one. Each answer: `wait_s` (the point), `wait_low_s`..`wait_high_s` (the 80 %
range), `wait_bound_s` (the 95 % bound), the model version and a short reason. `request_model(limits)` declares the
body, bounds and all; the limits are read from `JOBAWARE_WAIT_MAX_JOBS` (jobs asked about, default 1,000) and
`JOBAWARE_WAIT_MAX_QUEUE` (running plus pending jobs, default 20,000): the cost of a request is at most jobs x
queue steps of one compiled loop.
"""

from __future__ import annotations

import json
import time
from functools import cache
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
from pydantic import AfterValidator, Field, model_validator
from pydantic_settings import SettingsConfigDict

from jobaware import fit
from jobaware.bodies import Body, worded
from jobaware.bodies import Limits as BaseLimits
from jobaware.errors import InputError, TooLargeError
from jobaware.jsonable import jsonable
from jobaware.model import Served
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import read_each, write_quarantine
from jobaware.swf import trace_files
from jobaware.text import escaped
from jobaware.wait.bundle import ANSWER
from jobaware.wait.features import Snapshot, capacities
from jobaware.wait.reader import read_trace
from jobaware.wait.schema import CENTURY, CONTRACT, MAX_PROCS

SAFE_INTEGER = 2**53 - 1
EPOCH_MAX = 4_102_444_800  # 2100-01-01
# a calendar day from 1970 to 2099 (February 29th in leap years only) and a time of day
_YEAR = r"(?:19[7-9][0-9]|20[0-9][0-9])"
_LEAP_YEAR = r"(?:19(?:7[26]|8[048]|9[26])|20(?:[02468][048]|[13579][26]))"
_MONTH_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
              r"|02-(?:0[1-9]|1[0-9]|2[0-8]))")
TIME_PATTERN = (rf"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)[ T]"
                r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$")

Time = worded(Annotated[int, Field(ge=0, le=EPOCH_MAX)] | Annotated[str, Field(pattern=TIME_PATTERN)],
              "expected epoch seconds (0..4,102,444,800) or 'YYYY-MM-DD HH:MM:SS' in UTC")
NAME_MAX = 256
Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX)]
# a queue-mate's name (another user's) is cut, never refused: one long name must not refuse every job's answer
MateName = Annotated[str, Field(min_length=1, description=f"cut to {NAME_MAX} characters"),
                     AfterValidator(lambda name: name[:NAME_MAX])]


class Limits(BaseLimits):
    """What the service accepts (JOBAWARE_WAIT_MAX_JOBS, JOBAWARE_WAIT_MAX_QUEUE): the jobs asked about and the
    running plus pending jobs of the snapshot."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_WAIT_")
    max_jobs: int = Field(1000, ge=1, le=100_000)
    max_queue: int = Field(20_000, ge=1, le=1_000_000)


class Job(Body):
    """A job's request; for a job of the queue, when it was submitted and (running) started."""

    job_id: Annotated[int, Field(ge=0, le=SAFE_INTEGER)]
    user: Name | None = None
    group: Name | None = None
    queue: Name | None = Field(None, description="the queue or Slurm partition")
    processors_req: Annotated[int, Field(ge=1, le=MAX_PROCS)] = 1
    wallclock_req: Annotated[float, Field(ge=0, le=CENTURY)] | None = Field(None, description="seconds")
    submit_time: Time | None = None
    start_time: Time | None = None


class QueueJob(Job):
    """A job of the queue: as `Job`, its names cut to NAME_MAX characters."""

    user: MateName | None = None
    group: MateName | None = None
    queue: MateName | None = Field(None, description="the queue or Slurm partition")


def _queue_job(required: tuple[str, ...]):
    return Annotated[QueueJob, Field(json_schema_extra={"required": ["job_id", *required]})]


@cache
def request_model(limits: Limits) -> type[Body]:
    """The body of `POST /wait` under `limits`. Beyond it: running and pending jobs together at most
    `max_queue`, a running job started at or before `time` and not before its submission, each job of the queue
    listed once, and no running job asked about."""

    class WaitRequest(Body):
        time: Time | None = Field(None, description="the moment of the snapshot (default: now)")
        cluster: Name | None = Field(None, description="the cluster (default: the one the model was trained on)")
        capacity: Annotated[int, Field(ge=1, le=MAX_PROCS)] | None = Field(None, description="its processors")
        jobs: Annotated[list[Job], Field(min_length=1, max_length=limits.max_jobs)]
        running: Annotated[list[_queue_job(("start_time",))], Field(max_length=limits.max_queue)] = Field(
            default_factory=list)
        pending: Annotated[list[_queue_job(("submit_time",))], Field(max_length=limits.max_queue)] = Field(
            default_factory=list, description="in the order the scheduler serves them")

        @model_validator(mode="after")
        def _queue_known(self) -> WaitRequest:
            for k, job in enumerate(self.running):
                if job.start_time is None:
                    raise ValueError(f"running[{k}].start_time: a running job needs its start time")
            for k, job in enumerate(self.pending):
                if job.submit_time is None:
                    raise ValueError(f"pending[{k}].submit_time: a pending job needs its submit time")
            return self

    return WaitRequest


LIMITS = Limits.load()
WaitRequest = request_model(LIMITS)

# Why a body valid by the OpenAPI document may still be refused (the reason with numbers and quoted values blanked as
# #): what no JSON Schema can state. Times are compared with each other and with the snapshot's.
UNSTATABLE = (r"^running\[#\]\.start_time: (after the snapshot's time|before its submit_time)$",
              r"^(pending|jobs)\[#\]\.submit_time: after the snapshot's time$",
              r"^(running|pending)\[#\]\.job_id: job # is also (running|pending)\[#\]$",
              r"^jobs\[#\]\.job_id: job # is running\[#\]: it has started, no wait is left$")


def epoch(value: int | str | None, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, int):
        return float(value)
    return pd.Timestamp(value.replace("T", " "), tz="UTC").timestamp()


def _frame(jobs: list[Job], now: float) -> pd.DataFrame:
    rows = [job.model_dump() for job in jobs]
    frame = pd.DataFrame(rows, columns=list(Job.model_fields))
    for column in ("submit_time", "start_time"):
        seconds = [epoch(row[column], np.nan) for row in rows]
        frame[column] = pd.to_datetime(pd.Series(seconds, dtype="float64"), unit="s", utc=True)
    frame["processors_req"] = frame["processors_req"].astype("float64")
    frame["wallclock_req"] = frame["wallclock_req"].astype("float64")
    return frame


def _queued_once(body) -> None:
    """Each job of the snapshot in one place: a job both running and pending, or listed twice, would count twice
    (pending behind itself); a running job has no wait left to estimate."""
    where: dict[int, str] = {}
    for name in ("running", "pending"):
        for k, job in enumerate(getattr(body, name)):
            if job.job_id in where:
                raise InputError(f"{name}[{k}].job_id: job {job.job_id} is also {where[job.job_id]}")
            where[job.job_id] = f"{name}[{k}]"
    for k, job in enumerate(body.jobs):
        if where.get(job.job_id, "").startswith("running"):
            raise InputError(f"jobs[{k}].job_id: job {job.job_id} is {where[job.job_id]}: it has started, no wait "
                             f"is left")


def parse_request(body, bundle, limits: Limits = LIMITS) -> tuple[pd.DataFrame, Snapshot]:
    """A checked `POST /wait` body as the jobs to estimate and the snapshot they are estimated in."""
    if len(body.running) + len(body.pending) > limits.max_queue:
        raise TooLargeError(f"running, pending: {len(body.running) + len(body.pending):,} queued jobs; the limit "
                            f"is {limits.max_queue:,} (JOBAWARE_WAIT_MAX_QUEUE)")
    now = epoch(body.time, time.time())
    cluster = body.cluster or next(iter(bundle.clusters), "unnamed")
    known = bundle.clusters.get(cluster, {})
    running, pending, jobs = _frame(body.running, now), _frame(body.pending, now), _frame(body.jobs, now)
    started, submitted = running["start_time"], running["submit_time"]
    late = (started > pd.Timestamp(now, unit="s", tz="UTC")).to_numpy()
    early = (submitted.notna() & (started < submitted)).to_numpy()
    if (wrong := np.flatnonzero(late | early)).size:
        k = int(wrong[0])
        raise InputError(f"running[{k}].start_time: " + ("after the snapshot's time" if late[k] else
                                                         "before its submit_time"))
    for name, frame in (("pending", pending), ("jobs", jobs)):
        late = np.flatnonzero((frame["submit_time"] > pd.Timestamp(now, unit="s", tz="UTC")).to_numpy())
        if len(late):
            raise InputError(f"{name}[{late[0]}].submit_time: after the snapshot's time")
    _queued_once(body)
    capacity = body.capacity or known.get("capacity") or max(
        float(running["processors_req"].sum()) if len(running) else 1.0, float(max(j.processors_req for j in body.jobs)))
    snapshot = Snapshot(time=now, capacity=float(capacity), timezone=known.get("timezone", "UTC"), cluster=cluster,
                        running=running, pending=pending)
    return jobs, snapshot


def reason(features: pd.Series, queue: str | None, capacity: float) -> str:
    """A short line on where a job stands: the jobs ahead of it in its partitions (any, when it names none) and
    their work, or what is free."""
    if features["pend_n"] == 0:
        return f"nothing ahead; {features['free'] * capacity:,.0f} of {capacity:,.0f} processors free"
    ahead = int(features["queue_pend_n"]) if queue else int(features["pend_n"])
    queued = (features["queue_pend_area"] if queue else features["pend_area"]) * capacity
    where = f" in `{escaped(queue)}`" if queue else ""
    return f"{ahead:,} job{'s' if ahead != 1 else ''} ahead{where}, {queued:,.0f} processor-hours queued"


def answer_rows(answer: dict[str, np.ndarray], features: pd.DataFrame, jobs: pd.DataFrame, capacity: np.ndarray,
                version: str) -> list[dict]:
    """One plain dict per job: job_id, the four waits (whole seconds), the model version and the reason."""
    rounded = {name: np.round(values).tolist() for name, values in answer.items()}
    queues = jobs["queue"].astype("string").tolist()
    rows = []
    for i, job_id in enumerate(jobs["job_id"].astype("int64").tolist()):
        rows.append({"job_id": job_id, **{name: rounded[name][i] for name in rounded}, "model_version": version,
                     "reason": reason(features.iloc[i], None if pd.isna(queues[i]) else queues[i],
                                      float(capacity[i]))})
    return rows


def wait(body, model: Served, limits: Limits = LIMITS) -> dict:
    """Per job: `wait_s` (the point), `wait_low_s`..`wait_high_s` (the 80 % range), `wait_bound_s` (the 95 %
    bound), the model version and why; `fit` says where the model knows nothing of this queue. A job asking more
    processors than the cluster's stated size (the body's `capacity`, or the trace's the model was trained on) gets
    no waits (null) and says so: it can never start as asked."""
    bundle, version = model.bundle, model.version
    jobs, snapshot = parse_request(body, bundle, limits)
    answer, features = bundle.snapshot(jobs, snapshot)
    capacity = np.full(len(jobs), snapshot.capacity)
    rows = answer_rows(answer, features, jobs, capacity, version)
    stated = body.capacity is not None or bundle.clusters.get(snapshot.cluster, {}).get("capacity_stated", False)
    if stated:
        for row, job in zip(rows, body.jobs, strict=True):
            if job.processors_req > snapshot.capacity:
                row.update(dict.fromkeys(ANSWER, None), reason=f"asks {job.processors_req:,} processors, more than "
                           f"the cluster's {snapshot.capacity:,.0f}: it cannot start as asked")
    notes = model.fit()
    if snapshot.cluster not in bundle.clusters:
        notes.append(f"model version {version} was trained on {', '.join(sorted(bundle.clusters))}; this queue is "
                     f"{snapshot.cluster}: no wait history of its users is known")
    return jsonable({"model_version": version, "predictions": rows, "fit": notes})


def example_snapshot(bundle) -> tuple[pd.DataFrame, Snapshot]:
    """A small snapshot of the bundle's first cluster (to compile and warm the serving path)."""
    cluster, known = next(iter(bundle.clusters.items()), ("unnamed", {"capacity": 1.0, "timezone": "UTC"}))
    now = 1_700_000_000.0
    running = pd.DataFrame({"job_id": [1], "user": ["u"], "group": ["g"], "queue": ["q"], "processors_req": [1.0],
                            "wallclock_req": [3600.0],
                            "submit_time": pd.to_datetime([now - 120], unit="s", utc=True),
                            "start_time": pd.to_datetime([now - 60], unit="s", utc=True)})
    pending = running.assign(job_id=2, start_time=pd.NaT)
    jobs = running.drop(columns="start_time").assign(job_id=3)
    return jobs, Snapshot(now, float(known["capacity"]), known["timezone"], cluster, running, pending)


def predict_file(inputs: list[str], output: str | Path, model, progress=None) -> PredictionSummary:
    """Estimate every job of the traces (paths, globs, folders), each as it was at its submit time (the queue
    rebuilt from its own trace), written as JSON Lines (`-`: standard output); bad records go to
    `<output>.quarantine.jsonl`, counted, never dropped silently. The traces are read before `model()` loads the
    model; traces with no job in them are an InputError."""
    paths = trace_files(inputs)
    frames, quarantined, problems = [], [], []

    def unreadable(problem, record) -> None:
        problems.append(str(problem))
        quarantined.append(record)

    for jobs, found, bad in read_each(paths, read_trace, unreadable):
        frames.append(jobs)
        quarantined += bad
        problems += [str(p) for p in found]
    jobs = pd.concat(frames, ignore_index=True) if frames else None
    if jobs is None or not len(jobs):
        first = f"; first: {problems[0]}" if problems else ""
        raise InputError(f"{', '.join(map(str, paths))}: no job read ({len(quarantined):,} bad record(s)){first}")
    bundle, version = model()
    answer, features, ordered = bundle.trace_answer(jobs)
    rows = answer_rows(answer, features, ordered, capacities(ordered), version)
    with atomic_text(output) as handle:
        for row in rows:
            handle.write(json.dumps(jsonable(row), allow_nan=False) + "\n")
    if progress:
        progress(len(rows))
    return PredictionSummary(predictions=len(rows), model_version=version, output=str(output),
                             bad_records=len(quarantined), quarantine=write_quarantine(output, quarantined),
                             problems=problems[:20], input_profile=fit.describe({CONTRACT: jobs}, paths))
