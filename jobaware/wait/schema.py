"""The `wait` capability's canonical table, `queue_jobs`: one row per job of a scheduler's queue, with when it was
submitted, what it asked for, and when it started and ended (the waits it learns from)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from jobaware.errors import InputError

KEY = "wait"
CONTRACT = "queue_jobs"

UTC = pa.timestamp("s", tz="UTC")
QUEUE_JOBS = pa.schema([
    pa.field("cluster", pa.string(), nullable=False),      # the system: a trace's name, or a Slurm cluster's
    pa.field("cluster_procs", pa.int64()),                 # its processors (a trace's MaxProcs), when known
    pa.field("timezone", pa.string()),                     # the site's zone (hour of day, day of week)
    pa.field("job_id", pa.int64(), nullable=False),
    pa.field("user", pa.string()),
    pa.field("group", pa.string()),
    pa.field("queue", pa.string()),                        # SWF queue, Slurm partition
    pa.field("partition", pa.string()),                    # SWF partition
    pa.field("processors_req", pa.int64()),
    pa.field("wallclock_req", pa.float64()),               # seconds
    pa.field("mem_req", pa.float64()),                     # MB in all
    pa.field("submit_time", UTC, nullable=False),
    pa.field("start_time", UTC),                           # unknown: the job never started, or the trace lacks it
    pa.field("end_time", UTC),                             # with no start: when it left the queue unstarted
    pa.field("wait_s", pa.float64()),                      # start - submit
    pa.field("run_s", pa.float64()),
    pa.field("status", pa.string()),                       # COMPLETED, FAILED, CANCELLED, or unknown (still open)
    pa.field("line", pa.int64()),                          # where the record was in its source
])
COLUMNS = tuple(QUEUE_JOBS.names)
TIME_COLUMNS = ("submit_time", "start_time", "end_time")
STATUSES = ("COMPLETED", "FAILED", "CANCELLED")

# the bounds of a value, the reader's and the contract's (seconds: a century; processors: 10^9)
CENTURY = 100 * 365 * 86_400
MAX_PROCS = 10**9


def table_path(dataset: str | Path) -> Path:
    """The queue_jobs table of a dataset folder."""
    path = Path(dataset) / f"{CONTRACT}.parquet"
    if not path.is_file():
        raise InputError(f"{path}: no such table; run ingest first")
    return path


def complete(frame):
    """Records with any of the queue_jobs columns as a queue_jobs frame: missing columns unknown, times in UTC
    (naive times are taken as UTC), a missing cluster `unnamed`, missing lines numbered in order."""
    import numpy as np
    import pandas as pd

    frame = frame.reset_index(drop=True)
    out = {}
    for column in COLUMNS:
        values = frame[column] if column in frame else pd.Series([None] * len(frame), dtype="object")
        if column in TIME_COLUMNS:
            values = pd.to_datetime(values, errors="coerce")
            values = values.dt.tz_localize("UTC") if values.dt.tz is None else values.dt.tz_convert("UTC")
        elif column in ("cluster_procs", "job_id", "processors_req", "line"):
            values = pd.to_numeric(values, errors="coerce").astype("float64")
        elif column in ("wallclock_req", "mem_req", "wait_s", "run_s"):
            values = pd.to_numeric(values, errors="coerce").astype("float64")
        else:
            values = values.astype("string")
        out[column] = values
    jobs = pd.DataFrame(out)
    jobs["cluster"] = jobs["cluster"].fillna("unnamed")
    jobs["line"] = jobs["line"].fillna(pd.Series(np.arange(1, len(jobs) + 1, dtype=float)))
    start, submit = jobs["start_time"], jobs["submit_time"]
    jobs["wait_s"] = jobs["wait_s"].fillna((start - submit).dt.total_seconds())
    return jobs
