"""Read queue traces into the canonical `queue_jobs` table: Standard Workload Format traces (`.swf`, `.swf.gz`,
through the platform's `jobaware.swf`), one trace a cluster, and a job store's export (`jobaware.store.export`, mapped
by `jobaware.wait.export`: a site's own jobs, each cluster of the store once)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import InputError, UnreadableFile
from jobaware.reading import Problem, ReadReport, ingest_sources
from jobaware.swf import SwfHeader, SwfTrace, cluster_name, read_swf, trace_and_export_files
from jobaware.text import ascii_digits
from jobaware.wait.schema import CONTRACT, MAX_PROCS, QUEUE_JOBS

STATUS = {0: "FAILED", 1: "COMPLETED", 5: "CANCELLED"}


def cluster_procs(path: str | Path, header: SwfHeader) -> int | None:
    """The header's `MaxProcs` (its first word: `338 (batch partition; 512 total)`), None when not stated; a value
    that is not a whole number of processors, 1 to MAX_PROCS, is an InputError naming its line."""
    stated = header.fields.get("MaxProcs", "").split(" ")[0]
    if not stated:
        return None
    if not ascii_digits(stated) or not 1 <= int(stated) <= MAX_PROCS:
        raise UnreadableFile(f"{path}:{header.lines['MaxProcs']}: header MaxProcs: expected a number of processors, 1 to "
                         f"{MAX_PROCS:,}, got {stated[:80]!r}")
    return int(stated)


def trace_jobs(trace: SwfTrace, cluster: str, procs_stated: int | None = None) -> pd.DataFrame:
    """A read trace's jobs as `queue_jobs` rows (times in UTC; -1 as unknown), on a cluster of `procs_stated`
    processors (None: unknown)."""
    jobs, header, known = trace.jobs, trace.header, trace.known
    procs = known("procs_req").fillna(known("procs_alloc"))
    epoch = header.start_epoch

    def utc(offsets: pd.Series) -> pd.Series:
        return pd.to_datetime(epoch + offsets, unit="s", utc=True)

    wait = known("wait")
    run = known("run")
    start = jobs["submit"] + wait
    names = lambda col, table, prefix: known(col).map(  # noqa: E731
        lambda v: table.get(int(v), f"{prefix}{int(v)}"), na_action="ignore")
    return pd.DataFrame({
        "cluster": cluster,
        "cluster_procs": procs_stated,
        "timezone": str(header.tz),
        "job_id": jobs["job"].astype("int64"),
        "user": known("user").map(lambda v: f"user{int(v)}", na_action="ignore"),
        "group": known("group").map(lambda v: f"group{int(v)}", na_action="ignore"),
        "queue": names("queue", header.queues, "queue"),
        "partition": names("partition", header.partitions, "partition"),
        "processors_req": procs,
        "wallclock_req": known("time_req"),
        "mem_req": known("mem_req") * procs / 1024.0,
        "submit_time": utc(jobs["submit"]),
        "start_time": utc(start),
        "end_time": utc(start + run),
        "wait_s": wait,
        "run_s": run,
        "status": jobs["status"].map(lambda s: STATUS.get(int(s)), na_action="ignore"),
        "line": jobs["line"].astype("int64"),
    })


def _duplicates(jobs: pd.DataFrame, path: str) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A job number seen twice (after partial executions are folded) is a bad record: the later line goes."""
    twice = jobs["job_id"].duplicated().to_numpy()
    problems = [Problem(path, int(line), "job", str(job), "job number seen before in this trace")
                for line, job in zip(jobs["line"][twice][:20], jobs["job_id"][twice][:20], strict=True)]
    quarantined = [{"file": path, "line": int(line), "reason": "duplicate job number"} for line in jobs["line"][twice]]
    return jobs.loc[~twice].reset_index(drop=True), problems, quarantined


def read_trace(path: str | Path) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """One trace as `queue_jobs` rows, its problems and quarantined records."""
    trace = read_swf(path)
    jobs = trace_jobs(trace, cluster_name(path), cluster_procs(path, trace.header))
    jobs, problems, quarantined = _duplicates(jobs, str(path))
    return jobs, trace.problems + problems, trace.quarantined + quarantined


def read_source(path: str) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A trace or a store's export as `queue_jobs` rows, its problems and quarantined records."""
    from jobaware.store.export import is_export
    from jobaware.wait.export import read_export

    return read_export(path) if is_export(path) else read_trace(path)


def ingest(sources: list[str] | str, out_dir: str | Path, *, strict: bool = False,
           progress: Callable[[int], None] | None = None) -> ReadReport:
    """Traces and store exports (paths, globs, folders) into `out_dir/queue_jobs.parquet`, bad records into
    quarantine.jsonl."""
    return ingest_sources(trace_and_export_files(sources), read_source, out_dir, CONTRACT, QUEUE_JOBS, strict=strict,
                          progress=progress)


# ---------------------------------------------------------------- a live queue: squeue --json
SQUEUE_RUNNING = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")
HELD = ("JobHeldUser", "JobHeldAdmin", "BeginTime", "Dependency", "DependencyNeverSatisfied")
NO_VAL = 4_294_967_294  # Slurm's 32-bit "not set" (INFINITE is one more): how 22.05 writes a limit it has not


def _number(value):
    """A number of squeue --json: plain (Slurm 22.05) or wrapped {"set", "infinite", "number"} (later versions);
    None when unset, infinite (wrapped, or 22.05's raw NO_VAL and INFINITE) or not a number."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return value if value < NO_VAL else None


def _squeue_job(record: dict, where: str) -> dict:
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a job record (an object)")
    job_id = _number(record.get("job_id"))
    if job_id is None or job_id < 0:
        raise InputError(f"{where}.job_id: expected a job number, got {record.get('job_id')!r}")
    limit = _number(record.get("time_limit"))  # minutes; 0 is `--time=0`, no limit
    cpus = _number(record.get("cpus"))
    state = record.get("job_state")
    state = state[0] if isinstance(state, list) and state else state
    job = {"job_id": int(job_id), "user": record.get("user_name") or None, "group": record.get("account") or None,
           "queue": record.get("partition") or None, "processors_req": max(int(cpus), 1) if cpus else 1,
           "wallclock_req": float(limit) * 60 if limit is not None and limit > 0 else None,
           "submit_time": _number(record.get("submit_time")), "state": str(state or ""),
           "reason": str(record.get("state_reason") or ""), "priority": _number(record.get("priority")),
           "eligible_time": _number(record.get("eligible_time")), "start_time": _number(record.get("start_time"))}
    for name in ("submit_time", "start_time", "eligible_time"):
        if job[name] is not None and not 0 < job[name] <= 4_102_444_800:
            job[name] = None  # squeue's 0: not yet
    return job


def queue_entry(submit, eligible, left):
    """When a job entered the queue (numbers or arrays of epoch seconds, NaN unknown): its eligible time where that
    is after its submit and not after it left the queue (its start, else its end, or now while it pends), as a begin
    time, a dependency or a hold kept it out until then; else its submit. The one rule of the store export (what the
    model trains on) and of a live snapshot (what it answers)."""
    return np.where((eligible > submit) & (eligible <= left), eligible, submit)


def squeue_jobs(payload: dict) -> list[dict]:
    """The job records of `squeue --json` as plain dicts (request, times in epoch seconds, state, reason, priority,
    eligible time); a record that cannot be read is a one-line error naming it."""
    if not isinstance(payload, dict) or not isinstance(payload.get("jobs"), list):
        raise InputError("squeue --json: expected an object with a 'jobs' list")
    return [_squeue_job(record, f"jobs[{k}]") for k, record in enumerate(payload["jobs"])]


def squeue_body(payload: dict, job_ids: list[int] | None = None, now: float | None = None,
                capacity: int | None = None) -> dict:
    """A `POST /wait` body from a snapshot of `squeue --json`: its running jobs, its pending jobs in the order
    Slurm serves them (priority, then submit time), held ones left out of the queue (they wait for a person or
    a date, not for the jobs ahead), and the jobs to estimate (`job_ids`, default every pending job)."""
    import time

    jobs = squeue_jobs(payload)
    now = float(now if now is not None else _number((payload.get("meta") or {}).get("time")) or time.time())
    for job in jobs:  # its wait counts from when it entered the queue (`queue_entry`)
        if job["submit_time"] is not None and job["eligible_time"] is not None:
            left = job["start_time"] if job["start_time"] is not None else now
            job["submit_time"] = float(queue_entry(job["submit_time"], job["eligible_time"], left))
    fields = ("job_id", "user", "group", "queue", "processors_req", "wallclock_req", "submit_time")
    running = [{**{k: job[k] for k in fields}, "start_time": job["start_time"]} for job in jobs
               if job["state"] in SQUEUE_RUNNING and job["start_time"] is not None and job["start_time"] <= now]
    waiting = [job for job in jobs if job["state"] == "PENDING" and job["submit_time"] is not None]
    served = sorted((job for job in waiting if job["reason"] not in HELD),
                    key=lambda job: (-(job["priority"] or 0), job["submit_time"], job["job_id"]))
    asked = set(job_ids) if job_ids is not None else {job["job_id"] for job in waiting}
    wanted = [job for job in jobs if job["job_id"] in asked]
    missing = asked - {job["job_id"] for job in wanted}
    if missing:
        raise InputError(f"job {sorted(missing)[0]}: not in the queue squeue shows")
    clusters = {job.get("cluster") for job in payload["jobs"] if isinstance(job, dict) and job.get("cluster")}
    body = {"time": int(now), "jobs": [{k: job[k] for k in fields if job[k] is not None} for job in wanted],
            "running": [{k: v for k, v in job.items() if v is not None} for job in running],
            "pending": [{k: job[k] for k in fields if job[k] is not None} for job in served]}
    for job in body["jobs"] + body["running"] + body["pending"]:
        for name in ("submit_time", "start_time"):
            if name in job:
                job[name] = int(job[name])
    if len(clusters) == 1:
        body["cluster"] = clusters.pop()
    if capacity:
        body["capacity"] = int(capacity)
    return body
