"""The public traces: real job records of other sites, from which `failure` learns before a site has finished jobs
of its own.

A manifest (`jobaware/data/real/failure.public.json`, the default data of `failure`) lists the traces; `ingest` reads each
through the failure readers into one table, `public_jobs.parquet`: the canonical columns and `site`, the trace's
name (job ids and names are a site's own: they are told apart by the site). A listed trace whose labelled jobs hold
no failure is left out and said so. `public.json` beside the table names the sites read, with their jobs and
failures. Training featurizes each site on its own (its users, partitions and the site itself are its entities),
and the model fitted on them reads only features that mean the same at any site (`features.PORTABLE`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from jobaware.errors import InputError
from jobaware.failure.reader.dispatch import PARQUET_OPTIONS, account, iter_batches
from jobaware.failure.schema import FAILURES
from jobaware.fit import public_traces
from jobaware.jobtable.schema import CANONICAL
from jobaware.packaged import bundled
from jobaware.reading import QUARANTINE, ReadReport

TABLE = "public_jobs"
SUMMARY = "public.json"
SITE = "site"
SCHEMA = CANONICAL.append(pa.field(SITE, pa.string()))
MANIFEST = bundled("data", "real", "failure.public.json")


def manifest() -> Path:
    """The bundled manifest of public traces; an InputError where the traces are not there (an image without
    jobaware/data/real)."""
    if not MANIFEST.is_file():
        raise InputError(f"{MANIFEST}: the public traces are not here (the repository's jobaware/data/real)")
    return MANIFEST


def ingest(source: str | Path, out_dir: Path, *, strict: bool = False,
           progress: Callable[[int], None] | None = None) -> ReadReport:
    """Read every trace of a public manifest into `out_dir/public_jobs.parquet` (with `site`), bad records into
    the quarantine, and `public.json` (the sites read and left out)."""
    traces = public_traces(source)
    if not traces:
        raise InputError(f"{source}: lists no trace")
    report = ReadReport(str(source))
    sites, left_out = [], []
    with pq.ParquetWriter(out_dir / f"{TABLE}.parquet", SCHEMA, **PARQUET_OPTIONS) as writer, \
            open(out_dir / QUARANTINE, "w") as bad:
        for trace in traces:
            tables, failed = [], 0
            for batch in iter_batches(trace["path"], require_state=True):
                account(report, batch, strict)
                table = batch.table
                failed += int(np.isin(table["state"].to_numpy(zero_copy_only=False), FAILURES).sum())
                tables.append(table.append_column(SITE, pa.array([trace["name"]] * table.num_rows, pa.string())))
                for record in batch.quarantined:
                    bad.write(json.dumps(record, default=str) + "\n")
                if progress:
                    progress(len(batch) + len(batch.quarantined))
            jobs = sum(t.num_rows for t in tables)
            if not failed:
                left_out.append({"name": trace["name"], "jobs": jobs, "why": "no failed job among its records"})
                continue
            for table in tables:
                writer.write_table(table)
            sites.append({"name": trace["name"], "jobs": jobs, "failed": failed})
    if not sites:
        raise InputError(f"{source}: no trace with a failed job")
    (out_dir / SUMMARY).write_text(json.dumps({"sites": sites, "left_out": left_out}, indent=2))
    return report


def is_public(dataset_table: Path) -> bool:
    """Whether a canonical job table is the public traces' (it has the `site` column)."""
    return SITE in pq.read_schema(dataset_table).names


def site_names(dataset_table: Path) -> list[str]:
    """The sites of a public table, in the order they were read."""
    sites = pq.read_table(dataset_table, columns=[SITE])[SITE]
    return list(dict.fromkeys(sites.unique().to_pylist()))
