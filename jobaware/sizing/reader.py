"""Read job traces into the canonical `sizing_jobs` table: Standard Workload Format traces (`.swf`, `.swf.gz`,
through the platform's `jobaware.swf`), one trace a cluster; NREL Eagle's job tables (CSV, JSON, Parquet, through
the platform's `jobaware.jobtable`), one file a cluster; HTCondor job event logs (through the platform's
`jobaware.condor_log`), one log a cluster; and a job store's export (`jobaware.store.export`, mapped by
`jobaware.sizing.export`: a site's own finished jobs with their use, each cluster of the store once).

An Eagle table gives each job its request (processors, time limit), its user, account (as group), partition (as
queue) and name, its run time and end, and its final state (COMPLETED, CANCELLED, or FAILED for any other end; a
job still pending or running has no use yet: no end, no run time, no status). Its times are the site's wall clock
with no zone, read as UTC (only their order counts here). Its memory is unknown: the table has no memory used, and
its `mem_req` (MB) does not say whether per node or per CPU. A job id may repeat: the tasks of an array share the
array's id in Eagle's table, each a job (a row) of its own.

An event log gives each job that terminated in it: its memory asked and its peak (the terminate event's resource
table, MB, per CPU asked), its run time (terminate minus the last execute), its CPUs, its end; no time limit
(HTCondor jobs state none), no user (the log is one submitter's: the log's file name is the user and the cluster,
and the job's DAG node name without its trailing number, `train3` -> `train`, its name). Its `job_id` is
cluster x 1,000,000 + proc. CPUs asked as 0 are unknown, as a request of 0 is in a trace.

A value the format calls unknown (-1) stays unknown (null). A request of zero (no time or no memory asked for)
says nothing of what the job needed and is read as unknown too; a memory figure beyond MAX_MEM_MB per processor is
quarantined with its file, line and field, as the platform reader quarantines what no job can have.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.condor_log import EndedJob, is_event_log, read_ended_jobs
from jobaware.errors import InputError
from jobaware.jobtable.nrel import READERS as EAGLE_READERS
from jobaware.jobtable.nrel import is_job_table
from jobaware.jobtable.schema import UNFINISHED
from jobaware.reading import Problem, ReadReport, ingest_sources
from jobaware.sizing.schema import CONTRACT, MAX_MEM_MB, SIZING_JOBS
from jobaware.sources import files as source_files
from jobaware.store.export import EXPORT_SUFFIX, is_export
from jobaware.swf import SUFFIXES, SwfTrace, cluster_name, is_swf, read_swf

STATUS = {0: "FAILED", 1: "COMPLETED", 5: "CANCELLED"}
KB_PER_MB = 1024.0
PROCS_PER_CLUSTER = 1_000_000  # an HTCondor job's job_id: cluster x PROCS_PER_CLUSTER + proc
_TRAILING_NUMBER = re.compile(r"[-_.]?\d+$")


def trace_jobs(trace: SwfTrace, cluster: str) -> pd.DataFrame:
    """A read trace's jobs as `sizing_jobs` rows (times in UTC; unknown as null)."""
    jobs, header, known = trace.jobs, trace.header, trace.known
    procs = known("procs_req").fillna(known("procs_alloc"))
    positive = lambda column: known(column).where(known(column) > 0)  # noqa: E731 - 0 asked: nothing said
    names = lambda col, table, prefix: known(col).map(  # noqa: E731
        lambda v: table.get(int(v), f"{prefix}{int(v)}"), na_action="ignore")

    def utc(offsets: pd.Series) -> pd.Series:
        return pd.to_datetime(header.start_epoch + offsets, unit="s", utc=True)

    return pd.DataFrame({
        "cluster": cluster,
        "job_id": jobs["job"].astype("int64"),
        "user": known("user").map(lambda v: f"user{int(v)}", na_action="ignore"),
        "group": known("group").map(lambda v: f"group{int(v)}", na_action="ignore"),
        "name": known("executable").map(lambda v: f"exe{int(v)}", na_action="ignore"),
        "queue": names("queue", header.queues, "queue"),
        "procs": procs.where(procs > 0),
        "time_req_s": positive("time_req"),
        "mem_req_mb": positive("mem_req") / KB_PER_MB,
        "submit_time": utc(jobs["submit"]),
        "end_time": utc(jobs["end"]),
        "run_s": known("run"),
        "mem_used_mb": known("mem_used") / KB_PER_MB,
        "status": jobs["status"].map(lambda s: STATUS.get(int(s)), na_action="ignore"),
        "line": jobs["line"].astype("int64"),
    })


def _bad_records(jobs: pd.DataFrame, path: str) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A job number seen twice (after partial executions are folded), or memory beyond MAX_MEM_MB per processor,
    is a bad record: it goes to quarantine."""
    twice = jobs["job_id"].duplicated().to_numpy()
    absurd = {column: (jobs[column] > MAX_MEM_MB).to_numpy() for column in ("mem_req_mb", "mem_used_mb")}
    problems, quarantined = [], []
    for i in np.flatnonzero(twice | absurd["mem_req_mb"] | absurd["mem_used_mb"]):
        line = int(jobs["line"].iloc[i])
        if twice[i]:
            field, value, reason = "job", str(jobs["job_id"].iloc[i]), "job number seen before in this trace"
        else:
            field = "mem_req" if absurd["mem_req_mb"][i] else "mem_used"
            value = f"{jobs[field + '_mb'].iloc[i] * KB_PER_MB:.0f}"
            reason = f"more than {MAX_MEM_MB:,} MB per processor"
        problems.append(Problem(path, line, field, value, reason))
        quarantined.append({"file": path, "line": line, "reason": reason})
    keep = ~(twice | absurd["mem_req_mb"] | absurd["mem_used_mb"])
    return jobs.loc[keep].reset_index(drop=True), problems, quarantined


def read_trace(path: str | Path) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """One trace as `sizing_jobs` rows, its problems and quarantined records."""
    trace = read_swf(path)
    jobs, problems, quarantined = _bad_records(trace_jobs(trace, cluster_name(path)), str(path))
    return jobs, trace.problems + problems, trace.quarantined + quarantined


def event_log_jobs(jobs: list[EndedJob], cluster: str) -> pd.DataFrame:
    """The jobs that terminated in an event log as `sizing_jobs` rows (the module docstring says how)."""
    def per_cpu(job: EndedJob, table: dict) -> float | None:
        memory, cpus = table.get("memory_mb"), job.request.get("cpus") or job.allocated.get("cpus")
        return memory / cpus if memory is not None and memory >= 0 and cpus else None

    def utc(seconds: list[float]) -> pd.Series:
        return pd.to_datetime(pd.Series(seconds, dtype=float), unit="s", utc=True)

    return pd.DataFrame({
        "cluster": cluster,
        "job_id": pd.Series([j.cluster * PROCS_PER_CLUSTER + j.proc for j in jobs], dtype="int64"),
        "user": cluster,
        "group": None,
        "name": pd.Series([_TRAILING_NUMBER.sub("", j.dag_node) or j.dag_node if j.dag_node else None for j in jobs],
                          dtype=object),
        "queue": None,
        "procs": pd.Series([j.request.get("cpus") or j.allocated.get("cpus") or None for j in jobs], dtype=float),
        "time_req_s": np.nan,
        "mem_req_mb": pd.Series([per_cpu(j, j.request) for j in jobs], dtype=float),
        "submit_time": utc([j.submit for j in jobs]),
        "end_time": utc([j.end for j in jobs]),
        "run_s": pd.Series([j.end - j.start if j.start is not None else None for j in jobs], dtype=float),
        "mem_used_mb": pd.Series([per_cpu(j, j.usage) for j in jobs], dtype=float),
        "status": pd.Series(["COMPLETED" if j.return_value == 0 and j.signal is None else "FAILED" for j in jobs],
                            dtype=object),
        "line": pd.Series([j.line for j in jobs], dtype="int64"),
    })


def read_event_log(path: str | Path) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """One HTCondor event log as `sizing_jobs` rows, its problems and quarantined records (a proc number beyond
    the job_id's room, or memory beyond MAX_MEM_MB per CPU, besides what the log reader skips)."""
    ended, problems = read_ended_jobs(path)
    wide = [j for j in ended if j.proc >= PROCS_PER_CLUSTER]
    problems += [Problem(str(path), j.line, "job", j.job, f"proc number beyond {PROCS_PER_CLUSTER - 1:,}")
                 for j in wide]
    jobs = event_log_jobs([j for j in ended if j.proc < PROCS_PER_CLUSTER], Path(path).name)
    absurd = (jobs["mem_req_mb"] > MAX_MEM_MB) | (jobs["mem_used_mb"] > MAX_MEM_MB)
    problems += [Problem(str(path), int(line), "memory", f"{job // PROCS_PER_CLUSTER}.{job % PROCS_PER_CLUSTER}",
                         f"more than {MAX_MEM_MB:,} MB per CPU")
                 for line, job in zip(jobs.loc[absurd, "line"], jobs.loc[absurd, "job_id"], strict=True)]
    quarantined = [{"file": str(path), "line": p.line, "reason": p.reason} for p in problems]
    return jobs.loc[~absurd].reset_index(drop=True), problems, quarantined


def eagle_jobs(frame: pd.DataFrame, lines: np.ndarray, cluster: str) -> pd.DataFrame:
    """Canonical Slurm job rows (`jobaware.jobtable`) as `sizing_jobs` rows (the module docstring says how)."""
    state = frame["state"].astype("string")
    ended = (state.notna() & ~state.isin(UNFINISHED)).to_numpy()
    positive = lambda column: frame[column].astype("float64").where(frame[column] > 0)  # noqa: E731 - 0: not said
    run = frame["run_time"].astype("float64").fillna((frame["end_time"] - frame["start_time"]).dt.total_seconds())

    def utc(times: pd.Series) -> pd.Series:
        return times.dt.tz_localize("UTC").where(ended)

    return pd.DataFrame({
        "cluster": cluster,
        "job_id": frame["job_id"].astype("int64"),
        "user": frame["user"], "group": frame["account"], "name": frame["name"], "queue": frame["partition"],
        "procs": positive("processors_req"),
        "time_req_s": positive("wallclock_req"),
        "mem_req_mb": np.nan,
        "submit_time": frame["submit_time"].dt.tz_localize("UTC"),
        "end_time": utc(frame["end_time"]),
        "run_s": run.where(ended),
        "mem_used_mb": np.nan,
        "status": state.where(state.isin(("COMPLETED", "CANCELLED")), "FAILED").where(ended),
        "line": pd.Series(lines, dtype="float64").fillna(0).astype("int64"),
    })


def read_eagle(path: str | Path) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """One Eagle job table as `sizing_jobs` rows, its problems and quarantined records (the platform reader's)."""
    frames, problems, quarantined = [], [], []
    for batch in EAGLE_READERS[Path(path).suffix.lower()](Path(path)):
        frames.append(eagle_jobs(batch.frame, batch.lines, Path(path).stem))
        problems += batch.problems
        quarantined += batch.quarantined
    jobs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(SIZING_JOBS.names))
    return jobs, problems, quarantined


def read_source(path: str) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A trace, an Eagle table, an event log or a store's export as `sizing_jobs` rows, its problems and quarantined
    records."""
    from jobaware.sizing.export import read_export

    if is_export(path):
        return read_export(path)
    if is_job_table(path):
        return read_eagle(path)
    return read_event_log(path) if is_event_log(path) else read_trace(path)


def source_paths(sources: list[str] | str) -> list[str]:
    """The traces, Eagle tables, event logs and store exports named by paths, globs and folders (a folder: its files
    of any of these kinds, below it too)."""
    known = lambda path: is_swf(path) or is_export(path) or is_job_table(path) or is_event_log(path)  # noqa: E731
    found = source_files(sources, recursive=True, keep=known)
    for path in found:
        if not known(path):
            raise InputError(f"{path}: not a Standard Workload Format trace ({' or '.join(SUFFIXES)}), an NREL Eagle "
                             f"job table ({', '.join(sorted(EAGLE_READERS))}), an HTCondor event log (the classic "
                             f"text format; not XML or JSON), nor a job store's export ({EXPORT_SUFFIX})")
    return found


def ingest(sources: list[str] | str, out_dir: str | Path, *, strict: bool = False,
           progress: Callable[[int], None] | None = None) -> ReadReport:
    """Traces, event logs and store exports (paths, globs, folders) into `out_dir/sizing_jobs.parquet`, bad records
    into quarantine.jsonl."""
    return ingest_sources(source_paths(sources), read_source, out_dir, CONTRACT, SIZING_JOBS, strict=strict,
                          progress=progress)


def read_jobs(dataset_or_trace: str | Path) -> pd.DataFrame:
    """The `sizing_jobs` rows of a dataset folder's table, or of one source read directly."""
    path = Path(dataset_or_trace)
    if path.is_dir():
        return pd.read_parquet(path / f"{CONTRACT}.parquet")
    return read_source(str(path))[0]
