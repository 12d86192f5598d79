"""Read queue traces into the canonical `queue_jobs` table: Standard Workload Format traces (`.swf`, `.swf.gz`,
through the platform's `jobaware.swf`), one trace a cluster."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jobaware.errors import InputError
from jobaware.reading import QUARANTINE, Problem, ReadReport
from jobaware.sources import files as source_files
from jobaware.swf import SUFFIXES, SwfTrace, read_swf
from jobaware.wait.schema import CONTRACT, QUEUE_JOBS

STATUS = {0: "FAILED", 1: "COMPLETED", 5: "CANCELLED"}


def cluster_name(path: str | Path) -> str:
    """A trace's cluster: its file name without the suffixes (`KTH-SP2-1996-2.1-cln`)."""
    name = Path(path).name
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def trace_jobs(trace: SwfTrace, cluster: str) -> pd.DataFrame:
    """A read trace's jobs as `queue_jobs` rows (times in UTC; -1 as unknown)."""
    jobs, header, known = trace.jobs, trace.header, trace.known
    procs = known("procs_req").fillna(known("procs_alloc"))
    max_procs = header.fields.get("MaxProcs", "").split(" ")[0]
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
        "cluster_procs": int(max_procs) if max_procs.isdigit() else None,
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
    jobs, problems, quarantined = _duplicates(trace_jobs(trace, cluster_name(path)), str(path))
    return jobs, trace.problems + problems, trace.quarantined + quarantined


def trace_files(sources: list[str] | str) -> list[str]:
    """The traces named by paths, globs and folders (a folder: its `.swf` and `.swf.gz` files)."""
    found = source_files(sources, SUFFIXES)
    for path in found:
        if not path.lower().endswith(SUFFIXES):
            raise InputError(f"{path}: not a Standard Workload Format trace (expected {' or '.join(SUFFIXES)})")
    return found


def ingest(sources: list[str] | str, out_dir: str | Path, *, strict: bool = False,
           progress: Callable[[int], None] | None = None) -> ReadReport:
    """Traces (paths, globs, folders) into `out_dir/queue_jobs.parquet`, bad records into quarantine.jsonl."""
    paths = trace_files(sources)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ReadReport(", ".join(paths))
    clusters: dict[str, str] = {}
    with pq.ParquetWriter(out_dir / f"{CONTRACT}.parquet", QUEUE_JOBS) as writer, \
            open(out_dir / QUARANTINE, "w") as bad:
        for path in paths:
            jobs, problems, quarantined = read_trace(path)
            cluster = cluster_name(path)
            if cluster in clusters:
                raise InputError(f"{path}: the same cluster as {clusters[cluster]}; one trace a cluster")
            clusters[cluster] = path
            if strict and problems:
                raise InputError(f"{problems[0]} (strict mode; {len(quarantined)} bad record(s) in this file)")
            report.rows += len(jobs)
            report.bad_rows += len(quarantined)
            report.add(problems)
            writer.write_table(pa.Table.from_pandas(jobs, schema=QUEUE_JOBS, preserve_index=False))
            for record in quarantined:
                bad.write(json.dumps(record, default=str) + "\n")
            if progress:
                progress(len(jobs) + len(quarantined))
    if report.rows == 0:
        raise InputError(f"{report.file}: no readable job records ({report.bad_rows} bad)")
    return report


def read_jobs(dataset_or_trace: str | Path) -> pd.DataFrame:
    """The `queue_jobs` rows of a dataset folder's table, or of one trace read directly."""
    path = Path(dataset_or_trace)
    if path.is_dir():
        return pd.read_parquet(path / f"{CONTRACT}.parquet")
    return read_trace(path)[0]

