"""Pick the reader by file suffix; stream any source into a canonical Parquet file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jobaware.errors import InputError
from jobaware.failure.readers.common import Batch, to_canonical_dtypes
from jobaware.reading import ReadReport
from jobaware.failure.readers.nrel import iter_csv, iter_json, iter_parquet
from jobaware.failure.readers.swf import iter_swf
from jobaware.failure.schema import CANONICAL

READERS: dict[str, Callable[..., Iterator[Batch]]] = {
    ".csv": iter_csv,
    ".json": iter_json,
    ".jsonl": iter_json,
    ".ndjson": iter_json,
    ".parquet": iter_parquet,
    ".pq": iter_parquet,
    ".swf": iter_swf,
}


def iter_batches(path: str | Path, *, require_state: bool = False) -> Iterator[Batch]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise InputError(f"{path}: unknown format '{path.suffix}'; expected one of {', '.join(sorted(READERS))}")
    return reader(path, require_state=require_state)


def _account(report: ReadReport, batch: Batch, strict: bool) -> None:
    report.rows += len(batch.frame)
    report.bad_rows += len(batch.quarantined)
    report.add(batch.problems)
    if strict and batch.problems:
        raise InputError(f"{batch.problems[0]} (strict mode; {len(batch.quarantined)} bad record(s) in this batch)")


def read_jobs(path: str | Path, *, strict: bool = False, require_state: bool = False) -> tuple[pd.DataFrame, ReadReport]:
    """Read a whole job file into one canonical DataFrame (for files that fit in memory)."""
    report = ReadReport(str(path))
    frames = []
    for batch in iter_batches(path, require_state=require_state):
        _account(report, batch, strict)
        frames.append(batch.frame)
    frame = pd.concat(frames, ignore_index=True) if frames else to_canonical_dtypes(pd.DataFrame())
    return frame, report


def ingest(
    path: str | Path,
    out: str | Path,
    *,
    strict: bool = False,
    require_state: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ReadReport:
    """Stream a job file into canonical Parquet at `out`, bad records into `out`.quarantine.jsonl."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    quarantine = out.with_suffix(".quarantine.jsonl")
    report = ReadReport(str(path))
    with pq.ParquetWriter(out, CANONICAL) as writer, open(quarantine, "w") as bad:
        for batch in iter_batches(path, require_state=require_state):
            _account(report, batch, strict)
            writer.write_table(pa.Table.from_pandas(batch.frame, schema=CANONICAL, preserve_index=False))
            for record in batch.quarantined:
                bad.write(json.dumps(record, default=str) + "\n")
            if progress:
                progress(len(batch.frame))
    if report.rows == 0:
        raise InputError(f"{path}: no readable job records ({report.bad_rows} bad)")
    return report
