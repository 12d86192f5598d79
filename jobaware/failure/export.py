"""The finished jobs of a job store as an NREL-format table: what `jobaware failure export` writes and what
`pipeline run failure --data STORE` trains on (one code path); and the store's recent jobs, from which a served
model computes history features (`recent_jobs`)."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from jobaware.failure.writers import NrelWriter
from jobaware.jobtable.common import JobColumns
from jobaware.outputs import atomic_path
from jobaware.store import JobStore, open_store


def finished_jobs(store: JobStore) -> pd.DataFrame:
    """Every job with a final state, once, in the canonical columns; its state is the final state as Slurm named it."""
    rows = [{**record["row"], "state": record["final"]["state"]} for record in store.records() if record["final"]]
    return JobColumns.from_rows(rows).frame()


def recent_jobs(store: JobStore, days: float, now: float | None = None) -> pd.DataFrame:
    """The jobs submitted in the last `days`, in the canonical columns: a finished one with its final state, the
    others as last seen (no end yet)."""
    since = (time.time() if now is None else now) - days * 86_400
    rows = [{**record["row"], "state": record["final"]["state"]} if record["final"] else record["row"]
            for record in store.records(since=since)]
    return JobColumns.from_rows(rows).frame()


def export(store: JobStore, out: str | Path) -> int:
    """Write the finished jobs to an NREL-format CSV, whole or not at all (`jobaware.outputs.atomic_path`: on any
    failure, a full disk included, nothing is left of it). Returns how many."""
    jobs = finished_jobs(store)
    with atomic_path(out, ".csv") as partial:
        writer = NrelWriter(partial, "csv")
        try:
            writer.write(jobs)
        finally:
            writer.close()
    return len(jobs)


def from_store(uri: str, out_dir: Path) -> str:
    """The finished jobs of the store at `uri` as an NREL CSV in `out_dir`, for the failure readers."""
    out = Path(out_dir) / "store" / "jobs.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open_store(uri) as store:
        export(store, out)
    return str(out)
