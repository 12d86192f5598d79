"""What every reader reports: the records it kept, the bad ones it quarantined, and where they were."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

MAX_EXAMPLES = 20


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
        return f"{where}: field '{self.field}': {self.reason} (got {abbreviated(self.value)!r})"


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


def line_blocks(handle: BinaryIO, block_bytes: int, first_line: int,
                record_end: Callable[[bytes], int] = lambda chunk: chunk.rfind(b"\n") + 1) -> Iterator[tuple[bytes, int]]:
    """(block of whole records, file line number of its first line) from `handle`'s current position on.

    `record_end(chunk)` is the offset just past the chunk's last complete record (0: none yet); the default cuts
    after the last newline. The remainder is carried into the next block."""
    line, rest = first_line, b""
    while True:
        chunk = handle.read(block_bytes)
        if not chunk:
            if rest.strip():
                yield rest, line
            return
        chunk = rest + chunk
        cut = record_end(chunk)
        if cut == 0:
            rest = chunk
            continue
        block, rest = chunk[:cut], chunk[cut:]
        yield block, line
        line += block.count(b"\n")


def write_quarantine(output: Path, records: list[dict]) -> str | None:
    """The bad records of a prediction as `<output>.quarantine.jsonl` beside it; its path (None when none)."""
    if not records:
        return None
    quarantine = output.with_name(output.name + ".quarantine.jsonl")
    with open(quarantine, "w") as handle:
        for record in records:
            handle.write(json.dumps(record, default=str) + "\n")
    return str(quarantine)
