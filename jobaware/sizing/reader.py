"""Read job traces into the canonical `sizing_jobs` table: Standard Workload Format traces (`.swf`, `.swf.gz`,
through the platform's `jobaware.swf`), one trace a cluster, and a job store's export (`jobaware.store.export`,
mapped by `jobaware.sizing.export`: a site's own finished jobs with their use, each cluster of the store once).

A value the format calls unknown (-1) stays unknown (null). A request of zero (no time or no memory asked for)
says nothing of what the job needed and is read as unknown too; a memory figure beyond MAX_MEM_MB per processor is
quarantined with its file, line and field, as the platform reader quarantines what no job can have.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.reading import Problem, ReadReport, ingest_sources
from jobaware.sizing.schema import CONTRACT, MAX_MEM_MB, SIZING_JOBS
from jobaware.swf import SwfTrace, cluster_name, read_swf, trace_and_export_files

STATUS = {0: "FAILED", 1: "COMPLETED", 5: "CANCELLED"}
KB_PER_MB = 1024.0


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


def read_source(path: str) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A trace or a store's export as `sizing_jobs` rows, its problems and quarantined records."""
    from jobaware.sizing.export import read_export
    from jobaware.store.export import is_export

    return read_export(path) if is_export(path) else read_trace(path)


def ingest(sources: list[str] | str, out_dir: str | Path, *, strict: bool = False,
           progress: Callable[[int], None] | None = None) -> ReadReport:
    """Traces and store exports (paths, globs, folders) into `out_dir/sizing_jobs.parquet`, bad records into
    quarantine.jsonl."""
    return ingest_sources(trace_and_export_files(sources), read_source, out_dir, CONTRACT, SIZING_JOBS, strict=strict,
                          progress=progress)


def read_jobs(dataset_or_trace: str | Path) -> pd.DataFrame:
    """The `sizing_jobs` rows of a dataset folder's table, or of one trace read directly."""
    path = Path(dataset_or_trace)
    if path.is_dir():
        return pd.read_parquet(path / f"{CONTRACT}.parquet")
    return read_trace(path)[0]
