"""NREL Eagle job table in its three published encodings: CSV, JSON records and Parquet."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from jobaware.errors import InputError, UnreadableFile
from jobaware.jobtable.common import CSV_TIME_FORMAT, Batch, canonicalize, formulas_unescaped, valid_table
from jobaware.reading import Block, Problem, line_blocks

BLOCK_BYTES = 32 << 20
# what a clean CSV column parses to; a block that does not parse so is read as text and checked row by row
_ARROW_TYPES = {
    **{c: pa.int64() for c in ("job_id", "nodes_req", "processors_req", "gpus_req")},
    **{c: pa.float64() for c in ("wallclock_req", "mem_req", "run_time")},
    **{c: pa.timestamp("s") for c in ("submit_time", "start_time", "end_time")},
}


def _columns_once(where: str, names: list[str]) -> None:
    """Refuse a file whose columns are not named once each."""
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InputError(f"{where} names a column more than once: {', '.join(map(repr, twice))}")


def _csv_blocks(path: Path) -> Iterator[Block]:
    """Blocks of whole records (`line_blocks`), the header excluded."""
    with open(path, "rb") as handle:
        handle.readline()
        yield from line_blocks(handle, BLOCK_BYTES, 2, _last_record_end)


def _last_record_end(data: bytearray, end: int) -> int:
    """Offset just past the last newline in data[:end] that ends a record (one outside a quoted field); 0 if none."""
    cut = data.rfind(b"\n", 0, end) + 1
    if data.find(b'"', 0, end) < 0:
        return cut
    data = np.frombuffer(data, dtype=np.uint8, count=end)
    newlines = np.flatnonzero(data == ord("\n"))
    quotes_before = np.cumsum(data == ord('"'))[newlines]
    outside = newlines[quotes_before % 2 == 0]  # CSV escapes a quote as "", so parity tells inside from outside
    return int(outside[-1]) + 1 if len(outside) else 0


def _line_numbers(block: bytes, first_line: int, columns: int, parsed: int) -> tuple[np.ndarray, list[int]]:
    """Map parsed rows to the file line each record starts on; also return the records with the wrong field count."""
    if b'"' in block:  # quoted fields may hold commas and newlines: let the csv module find the records
        good, wrong = [], []
        reader = csv.reader(io.StringIO(block.decode("utf-8", "replace"), newline=""))
        start = 0
        for record in reader:
            if record:  # as Arrow reads: only an empty line is no record (a line of empty fields is one)
                (good if len(record) == columns else wrong).append(first_line + start)
            start = reader.line_num
        return np.asarray(good if len(good) == parsed else [None] * parsed), wrong
    count = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
    if parsed == count:
        return np.arange(first_line, first_line + parsed), []
    good, wrong = [], []
    for i, text in enumerate(block.split(b"\n")[:count]):
        if not text.strip():
            continue
        (good if text.count(b",") == columns - 1 else wrong).append(first_line + i)
    return np.asarray(good if len(good) == parsed else [None] * parsed), wrong


def iter_csv(path: Path, require_state: bool = False) -> Iterator[Batch]:
    with open(path, "rb") as handle:
        header = handle.readline().decode("utf-8-sig", "replace").strip().split(",")  # a BOM is no part of a name
    if not header or header == [""]:
        raise UnreadableFile(f"{path}: empty file, expected a CSV header line")
    if "job_id" not in header:
        raise UnreadableFile(f"{path}:1: header has no 'job_id' column; found {', '.join(header)}")
    _columns_once(f"{path}:1: header", header)
    for part in _csv_blocks(path):
        table = _valid_block(part, header, require_state)
        if table is not None:  # a row per line
            yield Batch(formulas_unescaped(table), [], [], np.arange(part.first_line, part.first_line + table.num_rows))
            continue
        block, first_line = bytes(part.data), part.first_line  # the record-accountable path, on a copy of its own
        quoted = b'"' in block
        wrong_texts: list[str] = []

        def read(column_types: dict) -> pa.Table:
            wrong_texts.clear()
            return pacsv.read_csv(
                io.BytesIO(block),  # one Arrow block for the whole block: a record of any size stays whole
                read_options=pacsv.ReadOptions(column_names=header, use_threads=True,
                                               block_size=min(max(len(block) + 1, 1 << 20), 2**31 - 1)),
                parse_options=pacsv.ParseOptions(
                    newlines_in_values=quoted, invalid_row_handler=lambda row: wrong_texts.append(row.text) or "skip"
                ),
                convert_options=pacsv.ConvertOptions(
                    column_types=column_types, timestamp_parsers=[CSV_TIME_FORMAT], strings_can_be_null=True
                ),
            )

        undecodable, lines = None, None
        if not _is_utf8(block):  # Arrow cannot read such bytes: the csv module, record by record
            raw, undecodable, lines, wrong = _read_record_by_record(block, first_line, header)
            wrong_texts[:] = [text for _, text in wrong]
            wrong_lines = [line for line, _ in wrong]
        else:
            try:  # Arrow parses numbers and times; canonicalize checks each record
                raw = read({c: _ARROW_TYPES.get(c, pa.string()) for c in header}).to_pandas()
            except pa.ArrowInvalid:  # a bad value somewhere in this block: read text, find and report it
                raw = read({c: pa.string() for c in header}).to_pandas()
        if lines is None:
            lines, wrong_lines = _line_numbers(block, first_line, len(header), len(raw))
        batch = canonicalize(raw, file=str(path), lines=lines, require_state=require_state, undecodable=undecodable)
        if (unescaped := formulas_unescaped(batch.table)) is not batch.table:
            batch = Batch(unescaped, batch.problems, batch.quarantined, batch.lines)
        for line, text in zip(wrong_lines or [None] * len(wrong_texts), wrong_texts, strict=False):
            batch.problems.insert(0, Problem(str(path), line, "*", text[:80], f"expected {len(header)} fields"))
            batch.quarantined.append({"file": str(path), "line": line, "text": text})
        yield batch


# the fast path reads times as text and checks their shape itself (Arrow's strptime is the slowest part of a read)
FAST_TYPES = {**_ARROW_TYPES, **{c: pa.string() for c in ("submit_time", "start_time", "end_time")}}
FAST_BLOCK_BYTES = 4 << 20  # Arrow parses blocks of this size in parallel


def _valid_block(block: Block, header: list[str], require_state: bool) -> pa.Table | None:
    """A block of plain records (UTF-8, no quotes, no carriage returns: one row per line) as the canonical Arrow
    table: parsed by Arrow from the bytes in place with the numbers typed, checked column by column
    (`valid_table`), no pandas; None when any record is not valid, and the record-accountable path then reads the
    block and names each bad record. Sets the block's line breaks, known from the parse."""
    data, size = block.data, len(block.data)
    if data.obj.find(b'"', 0, size) >= 0 or data.obj.find(b"\r", 0, size) >= 0:
        return None
    try:  # a row with the wrong number of fields raises (no handler: Arrow would decode its text for one)
        raw = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=pacsv.ReadOptions(column_names=header, use_threads=True, block_size=FAST_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(ignore_empty_lines=False),  # an empty line is a row, and not valid
            convert_options=pacsv.ConvertOptions(column_types={c: FAST_TYPES.get(c, pa.string()) for c in header},
                                                 strings_can_be_null=True),
        )
    except pa.ArrowInvalid:
        return None
    table = valid_table(raw, require_state=require_state)
    if table is not None:
        block.breaks = raw.num_rows - (data[-1] != ord("\n"))  # a row per line
    return table


def _escaped(text: str) -> str:
    """Text read with surrogateescape, its undecodable bytes shown as \\x escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _read_record_by_record(block: bytes, first_line: int, header: list[str]):
    """The last resort for a block Arrow cannot read at all: (raw text columns, undecodable marks, the line of
    each record, the (line, text) of each record with the wrong number of fields)."""
    csv.field_size_limit(2**31 - 1)
    reader = csv.reader(io.StringIO(block.decode("utf-8", "surrogateescape"), newline=""))
    rows, lines, wrong, marks = [], [], [], {c: [] for c in header}
    start = 0
    for record in reader:
        line, start = first_line + start, reader.line_num
        if not record or not any(field.strip() for field in record):
            continue
        if len(record) != len(header):
            wrong.append((line, _escaped(",".join(record))))
            continue
        for column, value in zip(header, record, strict=True):
            if _escaped(value) != value:
                marks[column].append(len(rows))
        rows.append([_escaped(value) if value != "" else None for value in record])
        lines.append(line)
    raw = pd.DataFrame(rows, columns=header, dtype=object)
    undecodable = {c: np.isin(np.arange(len(rows)), m) for c, m in marks.items() if m}
    return raw, undecodable, np.asarray(lines), wrong


def _is_utf8(block: bytes) -> bool:
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def iter_json(path: Path, require_state: bool = False) -> Iterator[Batch]:
    """JSON records (an array, epoch ms times) or JSON Lines (one record per line, streamed)."""
    with open(path, "rb") as handle:
        head = handle.read(1).lstrip()
        while head in (b" ", b"\n", b"\r", b"\t"):
            head = handle.read(1)
    if head == b"[":
        try:
            records = json.loads(Path(path).read_bytes())
        except json.JSONDecodeError as exc:
            raise UnreadableFile(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        except RecursionError:
            raise UnreadableFile(f"{path}: JSON nested too deeply to read (job records are flat objects)") from None
        except UnicodeDecodeError as exc:
            raise UnreadableFile(f"{path}: not UTF-8 JSON (byte {exc.start})") from None
        bad = [i for i, r in enumerate(records) if not isinstance(r, dict)]
        raw = pd.DataFrame([r for r in records if isinstance(r, dict)], dtype=object)
        lines = np.array([i + 1 for i, r in enumerate(records) if isinstance(r, dict)])
        batch = canonicalize(raw, file=f"{path} record", lines=lines, epoch_unit="ms", require_state=require_state)
        for i in bad:
            batch.problems.insert(0, Problem(f"{path} record", i + 1, "*", str(records[i])[:80], "not a JSON object"))
            batch.quarantined.append({"file": str(path), "record": i + 1, "text": str(records[i])})
        yield batch
        return
    rows, lines, problems, quarantined = [], [], [], []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, RecursionError) as exc:
                problems.append(Problem(str(path), number, "*", text[:80], f"invalid JSON line ({exc})"))
                quarantined.append({"file": str(path), "line": number, "text": text.rstrip("\n")})
                continue
            rows.append(record)
            lines.append(number)
            if len(rows) >= 250_000:
                yield _json_batch(path, rows, lines, problems, quarantined, require_state)
                rows, lines, problems, quarantined = [], [], [], []
    yield _json_batch(path, rows, lines, problems, quarantined, require_state)


def _json_batch(path, rows, lines, problems, quarantined, require_state) -> Batch:
    batch = canonicalize(
        pd.DataFrame(rows, dtype=object) if rows else pd.DataFrame(columns=["job_id", "submit_time"]),
        file=str(path), lines=np.asarray(lines), epoch_unit="ms", require_state=require_state,
    )
    batch.problems[:0] = problems
    batch.quarantined.extend(quarantined)
    return batch


def iter_parquet(path: Path, require_state: bool = False) -> Iterator[Batch]:
    try:
        source = pq.ParquetFile(path, pre_buffer=False)  # pre-buffering holds whole row groups' column chunks
    except (pa.ArrowInvalid, OSError) as exc:
        raise UnreadableFile(f"{path}: not a readable Parquet file ({exc})") from None
    _columns_once(f"{path}: schema", source.schema_arrow.names)
    first = 1
    for record_batch in source.iter_batches(batch_size=500_000):
        raw = record_batch.to_pandas()
        lines = np.arange(first, first + len(raw))
        first += len(raw)
        yield canonicalize(raw, file=f"{path} row", lines=lines, epoch_unit="ms", require_state=require_state)


# Eagle's published encodings (and JSON Lines), by file suffix
READERS: dict[str, Callable[..., Iterator[Batch]]] = {
    ".csv": iter_csv, ".json": iter_json, ".jsonl": iter_json, ".ndjson": iter_json,
    ".parquet": iter_parquet, ".pq": iter_parquet,
}


def is_job_table(path: str | Path) -> bool:
    """Whether a file is one of Eagle's job tables by its suffix and its first bytes: a CSV header, the first
    64 KB of JSON, or a Parquet schema naming `job_id` and `submit_time` (the columns every table has)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in READERS or not path.is_file():
        return False
    try:
        if suffix in (".parquet", ".pq"):
            names = set(pq.read_schema(path).names)
            return {"job_id", "submit_time"} <= names
        with open(path, "rb") as handle:
            head = handle.read(64 * 1024).decode("utf-8", "replace")
    except (OSError, pa.ArrowException):
        return False
    if suffix == ".csv":
        return {"job_id", "submit_time"} <= {name.strip() for name in head.lstrip("\ufeff").split("\n")[0].split(",")}
    return '"job_id"' in head and '"submit_time"' in head
