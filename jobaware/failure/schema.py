"""`failure`'s view of the canonical Slurm job table (`jobaware.jobtable.schema`): which fields are known at submit,
which end states are the outcomes it learns, and where a dataset folder keeps its table."""

from __future__ import annotations

from pathlib import Path

from jobaware.errors import JobawareError
from jobaware.jobtable.schema import COLUMNS

# Facts known only after a job ran: they label a job and feed the history of later jobs, never its own features.
POST_RUN = ("start_time", "end_time", "run_time", "state")

# Fields a scheduler knows when the job is submitted; what a prediction request may carry.
SUBMIT_FIELDS = tuple(c for c in COLUMNS if c not in POST_RUN)

OUTCOMES = ("COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")
FAILURES = OUTCOMES[1:]
# Ended by a person or the scheduler's policy rather than by the job: kept for history, not used as labels.
NOT_LABELS = ("CANCELLED", "PREEMPTED", "REQUEUED", "BOOT_FAIL", "DEADLINE", "REVOKED")


def jobs_table(dataset: str | Path) -> Path:
    """The one canonical job table of a dataset folder (NREL- or SWF-sourced)."""
    tables = sorted(Path(dataset).glob("*_jobs.parquet"))
    if len(tables) != 1:
        raise JobawareError(f"{dataset}: expected one canonical job table, found {len(tables)}")
    return tables[0]
