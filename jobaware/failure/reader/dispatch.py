"""Pick the reader by file suffix; stream any source into a canonical Parquet file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from jobaware.errors import InputError, UnreadableFile
from jobaware.failure.reader.swf import iter_swf
from jobaware.fit import is_public
from jobaware.jobtable.common import Batch, to_canonical_dtypes
from jobaware.jobtable.nrel import READERS as EAGLE_READERS
from jobaware.jobtable.schema import CANONICAL, TIME_COLUMNS
from jobaware.reading import QUARANTINE, ReadReport, unreadable
from jobaware.sources import files as source_files
from jobaware.swf import SUFFIXES as SWF_SUFFIXES
from jobaware.swf import is_swf

READERS: dict[str, Callable[..., Iterator[Batch]]] = {**EAGLE_READERS, ".swf": iter_swf}


def iter_batches(path: str | Path, *, require_state: bool = False) -> Iterator[Batch]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    reader = iter_swf if is_swf(path) else READERS.get(path.suffix.lower() or _sniff(path))
    if reader is None:
        raise InputError(f"{path}: unknown format '{path.suffix}'; expected one of {', '.join(sorted({*READERS, *SWF_SUFFIXES}))}")
    return reader(path, require_state=require_state)


def _sniff(path: Path) -> str:
    """The format of a file without a suffix, from its first bytes (as the generator writes them)."""
    with open(path, "rb") as handle:
        head = handle.read(64).lstrip()
    if head.startswith(b"PAR1"):
        return ".parquet"
    if head.startswith((b"[", b"{")):
        return ".json"
    if head.startswith(b";"):
        return ".swf"
    return ".csv" if head.startswith(b"job_id,") else ""


def account(report: ReadReport, batch: Batch, strict: bool) -> None:
    report.rows += len(batch)
    report.bad_rows += len(batch.quarantined)
    report.add(batch.problems)
    if strict and batch.problems:
        raise InputError(f"{batch.problems[0]} (strict mode; {len(batch.quarantined)} bad record(s) in this batch)")


def read_jobs(path: str | Path, *, strict: bool = False, require_state: bool = False) -> tuple[pd.DataFrame, ReadReport]:
    """Read a whole job file into one canonical DataFrame (for files that fit in memory)."""
    report = ReadReport(str(path))
    frames = []
    for batch in iter_batches(path, require_state=require_state):
        account(report, batch, strict)
        frames.append(batch.frame)
    frame = pd.concat(frames, ignore_index=True) if frames else to_canonical_dtypes(pd.DataFrame())
    return frame, report


def job_files(sources: list[str] | str) -> list[str]:
    """The job files named by paths, globs and folders (a folder: its files of a known format)."""
    return source_files(sources, (*READERS, *SWF_SUFFIXES))


def contract_for(path: str | Path) -> str:
    """The contract (and canonical table name) a source file is held to, by its format."""
    swf = is_swf(path) or (not Path(path).suffix and Path(path).is_file() and _sniff(Path(path)) == ".swf")
    return "swf_jobs" if swf else "nrel_jobs"


# dictionaries for the columns with few distinct values only; statistics for the times that row filters use
PARQUET_OPTIONS = {"use_dictionary": ["user", "account", "partition", "qos", "state"],
                   "write_statistics": list(TIME_COLUMNS)}


def ingest(
    sources: list[str],
    out_dir: str | Path,
    *,
    strict: bool = False,
    require_state: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ReadReport:
    """Stream job files of one format (paths, globs or folders) into `out_dir/<contract>.parquet`; bad records
    into quarantine.jsonl. A manifest of public traces (`jobaware.fit.PUBLIC_SUFFIX`), alone, is read by
    `jobaware.failure.public.ingest`."""
    if any(is_public(s) for s in sources):
        from jobaware.failure import public

        if len(sources) > 1:
            raise InputError(f"{', '.join(sources)}: a list of public traces is read alone, not with other sources")
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        return public.ingest(sources[0], out_dir, strict=strict, progress=progress)
    sources = job_files(sources)
    contracts = {contract_for(s) for s in sources}
    if len(contracts) > 1:
        raise InputError(f"{', '.join(sources)}: one format per run (NREL or SWF), got a mix")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ReadReport(", ".join(str(s) for s in sources))
    writing = None  # the previous batch's write, which runs while the next batch is read (Arrow frees the GIL)
    with pq.ParquetWriter(out_dir / f"{contracts.pop()}.parquet", CANONICAL, **PARQUET_OPTIONS) as writer, \
            open(out_dir / QUARANTINE, "w") as bad, ThreadPoolExecutor(1) as background:
        for source in sources:
            try:
                for batch in iter_batches(source, require_state=require_state):
                    account(report, batch, strict)
                    table = batch.table
                    if writing is not None:
                        writing.result()
                    writing = background.submit(writer.write_table, table)
                    for record in batch.quarantined:
                        bad.write(json.dumps(record, default=str) + "\n")
                    if progress:
                        progress(len(batch) + len(batch.quarantined))
            except UnreadableFile as error:  # among several files, one bad record; the others are read
                if strict or len(sources) == 1:
                    raise
                problem, record = unreadable(source, error)
                report.bad_rows += 1
                report.add([problem])
                bad.write(json.dumps(record, default=str) + "\n")
        if writing is not None:
            writing.result()
    if report.rows == 0:
        raise InputError(f"{report.file}: no readable job records ({report.bad_rows} bad)")
    return report
