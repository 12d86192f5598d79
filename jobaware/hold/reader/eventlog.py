"""`EventLogReader`: reads event logs block by block into record batches of the canonical events table."""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from jobaware.errors import InputError
from jobaware.hold.reader.blocks import Block, decode_block
from jobaware.hold.reader.dates import DateState, anchor_year, first_time
from jobaware.hold.reader.overlaps import Overlaps
from jobaware.hold.reader.sources import Source, resolve_sources
from jobaware.hold.reader.table import BadRecord, ReadOptions, ReadStats
from jobaware.reading import ReadReport


class EventLogReader:
    """Reads event logs block by block; yields record batches of the canonical events table.

    `sources`: paths, globs or folders (or `Source` objects). `report` counts good and bad records and keeps
    the first problems; `stats` the duplicates dropped; `on_bad(record)` is called for every bad record.
    """

    def __init__(self, sources: list[str] | str | list[Source], options: ReadOptions | None = None, *,
                 strict: bool = False, on_bad: Callable[[BadRecord], None] | None = None,
                 progress: Callable[[int], None] | None = None):
        self.options = options or ReadOptions()
        given = [sources] if isinstance(sources, str | Path | Source) else list(sources)
        named = [s for s in given if not isinstance(s, Source)]
        self.sources = [s for s in given if isinstance(s, Source)] + \
            ([Source.file(path) for path in resolve_sources(named)] if named else [])
        if not self.sources:
            raise InputError("no event log given")
        self.strict = strict
        self.on_bad = on_bad
        self.progress = progress
        self.report = ReadReport(", ".join(s.label for s in self.sources))
        self.stats = ReadStats()
        self._overlaps = Overlaps()
        self._seq = 0
        self._segment = -1
        self._last_ms: int | None = None

    def _ordered(self) -> list[tuple[Source, int | None]]:
        """Sources in the order of their first event's time (unreadable starts last), with their anchor years."""
        keyed = []
        for index, source in enumerate(self.sources):
            anchor = self.options.year if self.options.year is not None else anchor_year(source)
            first = first_time(source, anchor if anchor is not None else _time.localtime().tm_year)
            keyed.append((first is None, first or 0, index, source, anchor))
        return [(source, anchor) for *_, source, anchor in sorted(keyed, key=lambda k: k[:3])]

    def batches(self) -> Iterator[pa.RecordBatch]:
        for source, anchor in self._ordered():
            self.stats.files.append(source.label)
            yield from self._read(source, anchor)

    def _read(self, source: Source, anchor: int | None) -> Iterator[pa.RecordBatch]:
        dates = DateState(anchor if anchor is not None else _time.localtime().tm_year)
        line = 1
        self._segment += 1
        self._last_ms = None
        block = self.options.block_bytes
        with source.open() as handle:
            pending, eof = b"", False
            while True:
                if not eof and len(pending) < block:
                    more = handle.read(block - len(pending))
                    eof = not more
                    pending += more
                if not pending:
                    break
                cut = len(pending) if eof else _cut(pending)
                if cut == 0 and len(pending) < self.options.max_event_bytes:
                    more = handle.read(block)  # an event longer than the block: read on
                    eof = not more
                    pending += more
                    continue
                if cut == 0:  # longer than max_event_bytes: cut at its last whole line, the rest is reported
                    cut = pending.rfind(b"\n") + 1 or len(pending)
                part, pending = pending[:cut], pending[cut:]
                if not part.endswith(b"\n"):
                    part += b"\n"
                decoded = decode_block(part, source.label, line, dates)
                line += part.count(b"\n")
                yield from self._account(decoded)

    def _account(self, block: Block) -> Iterator[pa.RecordBatch]:
        for record in block.bad:
            if self.strict:
                raise InputError(f"{record.problem()} (strict mode)")
            if self.on_bad:
                self.on_bad(record)
        self.report.bad_rows += len(block.bad)
        self.report.add([r.problem() for r in block.bad])
        n = len(block.ms)
        if self.progress:
            self.progress(n + len(block.bad))
        if n == 0:
            return
        previous = np.r_[block.ms[0] if self._last_ms is None else self._last_ms, block.ms[:-1]]
        steps_back = block.ms < previous - int(self.options.backstep_seconds * 1000)
        segment = self._segment + np.cumsum(steps_back)
        self._segment = int(segment[-1])
        self._last_ms = int(block.ms[-1])
        dup = self._overlaps.duplicates(block.keys, segment, block.ms)
        batch = block.batch.filter(pa.array(~dup)) if dup.any() else block.batch
        self.stats.duplicates += int(dup.sum())
        kept = batch.num_rows
        batch = batch.set_column(0, "seq", pa.array(np.arange(self._seq, self._seq + kept, dtype=np.int64)))
        self._seq += kept
        self.report.rows += kept
        self.stats.segments = self._segment + 1
        yield batch


def _cut(chunk: bytes) -> int:
    """The end of the last whole event in `chunk` (just after a `...` line), or 0."""
    best = 0
    for terminator in (b"\n...\n", b"\n...\r\n"):
        found = chunk.rfind(terminator)
        if found >= 0:
            best = max(best, found + len(terminator))
    if best == 0 and (chunk.startswith(b"...\n") or chunk.startswith(b"...\r\n")):
        best = chunk.index(b"\n") + 1
    return best
