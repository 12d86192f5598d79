"""The `sizing` capability's canonical table, `sizing_jobs`: one row per job, with what it asked for (time,
processors, memory per processor) and what it used (run time, memory per processor), and when it was submitted
and ended (the history a later job's recommendation learns from)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from jobaware.errors import InputError

KEY = "sizing"
CONTRACT = "sizing_jobs"

UTC = pa.timestamp("s", tz="UTC")
SIZING_JOBS = pa.schema([
    pa.field("cluster", pa.string(), nullable=False),  # the system: a trace's name
    pa.field("job_id", pa.int64(), nullable=False),
    pa.field("user", pa.string()),
    pa.field("group", pa.string()),                    # SWF group, Slurm account
    pa.field("name", pa.string()),                     # job name or executable
    pa.field("queue", pa.string()),                    # SWF queue, Slurm partition
    pa.field("procs", pa.int64()),                     # processors requested (allocated where no request)
    pa.field("time_req_s", pa.float64()),              # the time limit asked for, seconds
    pa.field("mem_req_mb", pa.float64()),              # memory asked for, MB per processor
    pa.field("submit_time", UTC, nullable=False),
    pa.field("end_time", UTC),                         # unknown: the trace does not say how long it ran
    pa.field("run_s", pa.float64()),                   # seconds it ran
    pa.field("mem_used_mb", pa.float64()),             # memory it used, MB per processor (SWF: the average)
    pa.field("status", pa.string()),                   # COMPLETED, FAILED, CANCELLED, or unknown
    pa.field("line", pa.int64()),                      # where the record was in its source
])
COLUMNS = tuple(SIZING_JOBS.names)
STATUSES = ("COMPLETED", "FAILED", "CANCELLED")

# the bounds of a value, the reader's, the contract's and the service's
CENTURY = 100 * 365 * 86_400       # seconds
MAX_PROCS = 10**9
MAX_MEM_MB = 10**9                 # MB per processor: a petabyte
# the largest request a recommendation is made for (and `POST /size` accepts): a year, 10 TB per processor
YEAR = 366 * 86_400
MAX_MEM_PER_CPU_MB = 10**7


def table_path(dataset: str | Path) -> Path:
    """The sizing_jobs table of a dataset folder."""
    path = Path(dataset) / f"{CONTRACT}.parquet"
    if not path.is_file():
        raise InputError(f"{path}: no such table; run ingest first")
    return path
