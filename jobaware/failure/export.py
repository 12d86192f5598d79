"""The finished jobs of a job store as an NREL-format table: what `jobaware failure export` writes and what
`pipeline run failure --data STORE` trains on (one code path)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jobaware.failure.reader.common import JobColumns
from jobaware.failure.writers import NrelWriter
from jobaware.store import JobStore, open_store


def finished_jobs(store: JobStore) -> pd.DataFrame:
    """Every job with a final state, once, in the canonical columns; its state is the final state as Slurm named it."""
    rows = [{**record["row"], "state": record["final"]["state"]} for record in store.records() if record["final"]]
    return JobColumns.from_rows(rows).frame()


def export(store: JobStore, out: str | Path) -> int:
    """Write the finished jobs to an NREL-format CSV (replaced atomically). Returns how many."""
    out = Path(out)
    jobs = finished_jobs(store)
    partial = out.with_name(out.name + ".partial")
    writer = NrelWriter(partial, "csv")
    try:
        writer.write(jobs)
    finally:
        writer.close()
    partial.replace(out)
    return len(jobs)


def from_store(uri: str, out_dir: Path) -> str:
    """The finished jobs of the store at `uri` as an NREL CSV in `out_dir`, for the failure readers."""
    out = Path(out_dir) / "store" / "jobs.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open_store(uri) as store:
        export(store, out)
    return str(out)
