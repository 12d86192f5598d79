"""What every reader reports: the records it kept, the bad ones it quarantined, and where they were."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

MAX_EXAMPLES = 20
QUARANTINE = "quarantine.jsonl"  # the bad records of a read, one JSON object a line
BINARY_SUFFIXES = (".parquet", ".pq", ".arrow", ".feather", ".gz", ".bz2", ".xz", ".zst", ".zip")  # formats not text
WHOLE_FILE = "file"  # the field of a Problem that is a whole file's (empty, binary, not of its format)


_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\v\x1b") + b"\x7f"


def binary_reason(head: bytes) -> str | None:
    """Why the first bytes of a file are no text (a NUL byte, or more than a tenth control bytes), or None."""
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"binary data, not text (a NUL byte at offset {nul:,})"
    controls = sum(head.count(bytes([b])) for b in _CONTROL)
    if controls * 10 > len(head):
        return f"binary data, not text ({controls:,} control bytes in the first {len(head):,})"
    return None


def abbreviated(text: str) -> str:
    """A value as an error shows it: whole up to 80 characters, else its start and its length."""
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text):,} characters)"


@dataclass
class Problem:
    """One bad record: where it was and what was wrong with it."""

    file: str
    line: int | None
    field: str
    value: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        if self.field == WHOLE_FILE:
            return f"{where}: {self.reason}"
        return f"{where}: field '{self.field}': {self.reason} (got {abbreviated(self.value)!r})"


def unreadable(path: str | Path, error: Exception) -> tuple[Problem, dict]:
    """A file no record could be read from (`jobaware.errors.UnreadableFile`), as one bad record among a read of
    several files: its problem and its quarantine record. An empty file, or binary content, is named as such, not as
    the header it lacks or garbles."""
    text = str(error)
    reason = text.removeprefix(f"{path}:1: ").removeprefix(f"{path}: ")
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536)
    except OSError:
        head = b""
    if not head and Path(path).is_file():
        reason = "empty file"
    elif (binary := binary_reason(head)) and not str(path).lower().endswith(BINARY_SUFFIXES):
        reason = binary
    return Problem(str(path), None, WHOLE_FILE, "", reason), {"file": str(path), "reason": reason}


def read_each(paths: list[str], read: Callable, on_unreadable: Callable[[Problem, dict], None], *,
              strict: bool = False) -> Iterator:
    """`read(path)` of each path, in order. A file no record can be read from (`UnreadableFile`), among several and
    not `strict`, goes to `on_unreadable` (its problem and quarantine record) and the next is read; alone, or in
    strict mode, it is the error."""
    from jobaware.errors import UnreadableFile

    for path in paths:
        try:
            found = read(path)
        except UnreadableFile as error:
            if strict or len(paths) == 1:
                raise
            on_unreadable(*unreadable(path, error))
            continue
        yield found


@dataclass
class ReadReport:
    """What a read saw: rows kept, rows quarantined and the first problems."""

    file: str
    rows: int = 0
    bad_rows: int = 0
    problems: list[Problem] = field(default_factory=list)

    def add(self, problems: list[Problem]) -> None:
        room = MAX_EXAMPLES - len(self.problems)
        self.problems.extend(problems[: max(room, 0)])

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "rows": self.rows,
            "bad_rows": self.bad_rows,
            "problems": [str(p) for p in self.problems],
        }


@dataclass
class Block:
    """Whole records of a file: the bytes (a view, valid until the next block is asked for), the file line of the
    first, and the number of line breaks, which a reader that learnt it from its own parse sets (else it is
    counted when the next block is asked for)."""

    data: memoryview
    first_line: int
    breaks: int | None = None


def line_blocks(handle: BinaryIO, block_bytes: int, first_line: int,
                record_end: Callable[[bytearray, int], int] = lambda data, end: data.rfind(b"\n", 0, end) + 1
                ) -> Iterator[Block]:
    """Blocks of whole records from `handle`'s current position on.

    The blocks are read into one buffer that is used again for the next block (no fresh memory, no copy per
    block). `record_end(data, end)` is the offset just past the last complete record in `data[:end]` (0: none
    yet); the default cuts after the last newline. The remainder is carried into the next block; a record longer
    than the buffer grows it."""
    buffer, filled, line = bytearray(min(block_bytes, _left(handle) + 1)), 0, first_line
    while True:
        read = handle.readinto(memoryview(buffer)[filled:])
        filled += read
        if not read:  # the end of the file: what is left is the last block
            if filled and bytes(buffer[:filled]).strip():
                yield Block(memoryview(buffer)[:filled], line)
            return
        cut = record_end(buffer, filled)
        if cut == 0:
            if filled == len(buffer):
                buffer = buffer[:filled] + bytearray(len(buffer))
            continue
        block = Block(memoryview(buffer)[:cut], line)
        yield block
        line += block.breaks if block.breaks is not None else buffer.count(b"\n", 0, cut)
        buffer[: filled - cut] = buffer[cut:filled]  # the carry, to the front (the buffer keeps its size)
        filled -= cut


def _left(handle: BinaryIO) -> int:
    """Bytes left in a file from the handle's position (a large number when that cannot be told)."""
    try:
        return max(os.fstat(handle.fileno()).st_size - handle.tell(), 0)
    except (OSError, AttributeError, ValueError):
        return 1 << 62


def quarantine_path(output: str | Path) -> Path | None:
    """Where a prediction's bad records go: `<output>.quarantine.jsonl` beside it; None for standard output (they
    then go under JOBAWARE_HOME's logs, in a file of their own)."""
    from jobaware.outputs import is_stdout

    return None if is_stdout(output) else Path(output).with_name(f"{Path(output).name}.{QUARANTINE}")


def write_quarantine(output: str | Path, records: list[dict]) -> str | None:
    """The bad records of a prediction at `quarantine_path(output)`, written whole; its path (None when none).
    `jobaware predict` checks that path as it checks the output (`--overwrite`, never a link) before it reads."""
    from jobaware import config
    from jobaware.outputs import atomic_text

    if not records:
        return None
    quarantine = quarantine_path(output) or config.logs_dir() / f"predict-{time.strftime('%Y%m%d-%H%M%S')}.{QUARANTINE}"
    with atomic_text(quarantine) as handle:
        for record in records:
            handle.write(json.dumps(record, default=str) + "\n")
    return str(quarantine)


def ingest_sources(paths: list[str], read_source, out_dir: str | Path, contract: str, schema, *,
                   strict: bool = False, progress=None) -> ReadReport:
    """Each source's rows (`read_source(path) -> (rows, problems, quarantined records)`, rows with a `cluster`
    column) into `out_dir/<contract>.parquet` written with `schema`, its bad records into QUARANTINE, as a slice's
    ingest step writes them. One source a cluster: a cluster read twice would train on its jobs twice. `strict`:
    the first problem is an error. No readable row at all is an error too."""
    import json

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobaware.errors import InputError

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ReadReport(", ".join(paths))
    clusters: dict[str, str] = {}
    with pq.ParquetWriter(out_dir / f"{contract}.parquet", schema) as writer, open(out_dir / QUARANTINE, "w") as bad:
        def unreadable_file(problem: Problem, record: dict) -> None:
            report.bad_rows += 1
            report.add([problem])
            bad.write(json.dumps(record, default=str) + "\n")

        for path, (jobs, problems, quarantined) in read_each(paths, lambda path: (path, read_source(path)),
                                                             unreadable_file, strict=strict):
            for cluster in pd.unique(jobs["cluster"]):
                if cluster in clusters:
                    raise InputError(f"{path}: the same cluster ({cluster}) as {clusters[cluster]}; one source a "
                                     "cluster")
                clusters[cluster] = path
            if strict and problems:
                raise InputError(f"{problems[0]} (strict mode; {len(quarantined)} bad record(s) in this file)")
            report.rows += len(jobs)
            report.bad_rows += len(quarantined)
            report.add(problems)
            writer.write_table(pa.Table.from_pandas(jobs, schema=schema, preserve_index=False))
            for record in quarantined:
                bad.write(json.dumps(record, default=str) + "\n")
            if progress:
                progress(len(jobs) + len(quarantined))
    if report.rows == 0:
        raise InputError(f"{report.file}: no readable job records ({report.bad_rows} bad)")
    return report
