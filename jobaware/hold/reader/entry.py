"""Entry points: whole logs into one DataFrame, or streamed into a Parquet file and a quarantine file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jobaware.hold.reader.eventlog import EventLogReader
from jobaware.hold.reader.sources import Source
from jobaware.hold.reader.table import ReadOptions, ReadStats
from jobaware.hold.schema import CONTRACT, SCHEMA
from jobaware.reading import QUARANTINE, ReadReport


def read_events(sources: list[str] | str | list[Source], options: ReadOptions | None = None, *,
                strict: bool = False) -> tuple[pd.DataFrame, ReadReport]:
    """Read whole logs into one canonical events DataFrame (for logs that fit in memory)."""
    reader = EventLogReader(sources, options, strict=strict)
    table = pa.Table.from_batches(list(reader.batches()), schema=SCHEMA)
    return to_frame(table), reader.report


def to_frame(table: pa.Table) -> pd.DataFrame:
    """The canonical events table as pandas, with nullable integer and string dtypes."""
    return table.to_pandas(types_mapper={
        pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(), pa.int16(): pd.Int16Dtype(),
        pa.bool_(): pd.BooleanDtype(), pa.string(): pd.StringDtype(),
    }.get)


def write_events(sources: list[str] | str | list[Source], target: Path, quarantine: Path, *, strict: bool = False,
                 progress=None, options: ReadOptions | None = None) -> tuple[ReadReport, ReadStats]:
    """Stream logs into one canonical Parquet file (`target`) and their bad records into `quarantine` (JSON
    Lines, one object per record with file, line, reason and text). The file's key-value metadata holds
    `jobaware.read_stats`: the sources in reading order, duplicates dropped, segments."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(quarantine, "w") as bad:
        reader = EventLogReader(sources, options, strict=strict, progress=progress,
                                on_bad=lambda record: bad.write(record.as_json() + "\n"))
        with pq.ParquetWriter(target, SCHEMA, compression="zstd") as writer:
            for batch in reader.batches():
                writer.write_batch(batch)
            stats = {"files": reader.stats.files, "duplicates": reader.stats.duplicates,
                     "segments": reader.stats.segments}
            writer.add_key_value_metadata({"jobaware.read_stats": json.dumps(stats)})
    return reader.report, reader.stats


def ingest(sources: list[str], out_dir: Path, *, strict: bool = False, progress=None,
           options: ReadOptions | None = None) -> ReadReport:
    """Event log(s) -> `out_dir/condor_events.parquet` and `out_dir/quarantine.jsonl`; the read report."""
    out_dir = Path(out_dir)
    report, _ = write_events(sources, out_dir / f"{CONTRACT}.parquet", out_dir / QUARANTINE, strict=strict,
                             progress=progress, options=options)
    return report


def read_stats(path: str | Path) -> dict:
    """The read statistics stored in an ingested events file."""
    metadata = pq.ParquetFile(path).metadata.metadata or {}
    return json.loads(metadata.get(b"jobaware.read_stats", b"{}"))
