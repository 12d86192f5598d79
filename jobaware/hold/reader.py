"""A streaming reader of HTCondor's classic text job event log (user logs and the schedd's global EVENT_LOG).

Format: each event is a header line `EEE (CLUSTER.PROC.SUBPROC) DATE TIME TEXT`, zero or more body lines,
and a terminator line `...`. The reader works on blocks of whole events (`block_bytes`, cut after a `...`
line) with NumPy over the block's bytes: it finds every line, tells headers and terminators apart, pairs
them, and decodes the fixed-position header fields of all events of the block at once; only the few event
types whose bodies matter (005, 012, 013, 009, 004, 021, 024, 028) are looked at one by one. Memory is
bounded by the block size, not the log size (plus 12 bytes per event for the overlap index, below).
(Hand-written positional decoding rather than a regular-expression engine: RE2 through pyarrow.compute
took about 3 us per header line here, more than this whole reader spends per event.)

Dates and the year rule. `YYYY-MM-DD HH:MM:SS` (or with `T`, `.fff` and `Z`, HTCondor's ISO_DATE, SUB_SECOND
and UTC options) is taken as written. The year-less `MM/DD HH:MM:SS` of old logs gets its year thus:
  - from `ReadOptions.year` when given: the year of the file's first year-less date;
  - else from the file itself: the last year-less date before any ISO date lies in the year of the file's
    modification time (a log is last written at or after its last event), or the year before when its
    month/day/time falls after the modification time's; earlier year-less dates count back from there;
  - an ISO date in the same file sets the year for the year-less dates after it;
  - roll-over: a year-less date more than six months before the previous event's month/day (12/31 ->
    01/01) starts the next year.
  HTCondor's own reader gives every year-less date the current year and never rolls over.
Times are the access point's wall clock as written (naive), `utc` true where the header carried `Z`.

Several files, overlaps and duplicates. Files (and globs, and the files of a folder) are read in the order
of their first event's time, each file in its own order. A file or a time step backwards (more than
`backstep_seconds`) starts a new segment: the signature of a concatenated or overlapping log. An event
whose whole record (header and body) is identical to one of an EARLIER segment is an overlap and is
dropped; identical events within one segment are kept (they are separate events). Records are compared by
a 64-bit key of the header fields, the record's length and its byte sum. `seq` numbers the kept events in
reading order, so the order within a job is the log's.

Bad input. A header that does not parse, a date that does not exist, an event without its `...`
terminator, or lines outside any event: the record is skipped, counted and reported (file, line, reason);
`strict=True` raises an InputError at the first one. Bodies are read leniently (fields left empty when a
line is missing), because HTCondor versions differ in what they write there.
"""

from __future__ import annotations

import glob
import io
import json
import re
import time as _time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from jobaware.errors import InputError
from jobaware.hold.events import EVENT_NAMES, FUTURE_EVENT
from jobaware.hold.schema import CONTRACT, SCHEMA
from jobaware.reading import Problem, ReadReport

QUARANTINE = "quarantine.jsonl"

ID_WIDTH = 48  # bytes of a header decoded by position: code and job id ...
DATE_WIDTH = 40  # ... and from the date on
MAX_DIGITS = 18
PAD = 128
HALF_YEAR = 6 * 32  # in units of the month*32+day ordinal
MAX_QUARANTINE_TEXT = 2000
_NAMES = pa.array(list(EVENT_NAMES) + [FUTURE_EVENT])


class ReadOptions(BaseModel):
    """How to read: the year of year-less dates, the block size and the segment threshold."""

    model_config = ConfigDict(extra="forbid")

    year: int | None = Field(default=None, ge=1970, le=2200, strict=True)
    block_bytes: int = Field(default=8 << 20, ge=1 << 12, le=1 << 30, strict=True)
    max_event_bytes: int = Field(default=64 << 20, ge=1 << 12, le=1 << 31, strict=True)
    backstep_seconds: float = Field(default=0.0, ge=0.0, le=366 * 86400.0, allow_inf_nan=False)


@dataclass
class BadRecord:
    file: str
    line: int
    reason: str
    text: str

    def problem(self) -> Problem:
        first = self.text.split("\n", 1)[0]
        return Problem(self.file, self.line, "event", first[:200], self.reason)

    def as_json(self) -> str:
        return json.dumps({"file": self.file, "line": self.line, "reason": self.reason,
                           "text": self.text[:MAX_QUARANTINE_TEXT]})


@dataclass
class ReadStats:
    """What a read saw besides good and bad records: the sources in reading order, duplicates, segments."""

    files: list[str] = field(default_factory=list)
    duplicates: int = 0
    segments: int = 0


# ---------------------------------------------------------------- sources
@dataclass
class Source:
    """One log to read: its name in reports, how to open it, and when it was last written (epoch seconds)."""

    label: str
    open: Callable[[], BinaryIO]
    written: float

    @classmethod
    def file(cls, path: Path) -> Source:
        return cls(str(path), lambda: open(path, "rb"), path.stat().st_mtime)

    @classmethod
    def text(cls, data: bytes, label: str) -> Source:
        return cls(label, lambda: io.BytesIO(data), _time.time())


NOT_LOGS = (".parquet", ".json", ".jsonl", ".md", ".yaml", ".yml")  # skipped inside folders (truth files, notes)
NOT_LOG_NAMES = ("notice", "license", "licence", "readme", "provenance")


def resolve_sources(sources: list[str] | str) -> list[Path]:
    """Files named, matched by globs, or inside folders (not recursively); each once."""
    if isinstance(sources, str | Path):
        sources = [str(sources)]
    if not sources:
        raise InputError("no event log given")
    found: list[Path] = []
    for source in sources:
        source = str(source)
        if any(ch in source for ch in "*?["):
            matches = sorted(Path(p) for p in glob.glob(source, recursive=True) if Path(p).is_file())
            if not matches:
                raise InputError(f"{source}: no file matches this pattern")
            found += matches
        elif Path(source).is_dir():
            inside = sorted(p for p in Path(source).iterdir()
                            if p.is_file() and not p.name.startswith(".") and p.suffix.lower() not in NOT_LOGS
                            and p.stem.lower() not in NOT_LOG_NAMES)
            if not inside:
                raise InputError(f"{source}: folder holds no file")
            found += inside
        elif Path(source).is_file():
            found.append(Path(source))
        else:
            raise InputError(f"{source}: no such file")
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path.resolve(), None)
    return list(unique)


# ---------------------------------------------------------------- dates
def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm), vectorised."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _days_in_month(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[np.clip(m, 0, 12)]
    return days + ((m == 2) & leap)


_DATE_HEADER = re.compile(
    rb"^\d{3} \([^)\n]*\) (?:(\d{4})-(\d\d)-(\d\d)[ T]|(\d\d)/(\d\d) )(\d\d):(\d\d):(\d\d)", re.MULTILINE)


def _anchor_year(source: Source, block: int = 1 << 20) -> int | None:
    """The year of the source's first year-less date by the module's rule; None when it starts with ISO dates."""
    dates: list[tuple[int, int, int]] = []
    iso: tuple[int, int, int] | None = None
    with source.open() as handle:
        carry = b""
        while iso is None:
            chunk = handle.read(block)
            if not chunk:
                break
            text = carry + chunk
            cut = text.rfind(b"\n") + 1
            text, carry = text[:cut], text[cut:]
            for match in _DATE_HEADER.finditer(text):
                g = match.groups()
                if g[0]:
                    iso = (int(g[0]), int(g[1]), int(g[2]))
                    break
                dates.append((int(g[3]), int(g[4]), int(g[5]) * 3600 + int(g[6]) * 60 + int(g[7])))
    if not dates:
        return None
    rollovers = sum(b[0] * 32 + b[1] < a[0] * 32 + a[1] - HALF_YEAR for a, b in zip(dates, dates[1:]))
    month, day, seconds = dates[-1]
    if iso is not None:  # the year-less run ends just before an ISO date
        last_year = iso[0] - int(iso[1] * 32 + iso[2] < month * 32 + day - HALF_YEAR)
    else:
        mtime = _time.localtime(source.written)
        now = (mtime.tm_mon, mtime.tm_mday, mtime.tm_hour * 3600 + mtime.tm_min * 60 + mtime.tm_sec)
        last_year = mtime.tm_year - int((month, day, seconds) > now)
    return last_year - rollovers


# ---------------------------------------------------------------- block decoding
def _gather(pad: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The byte ranges [starts, ends) of the block as one binary array (copied, contiguous)."""
    lengths = np.maximum(ends - starts, 0)
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(starts - offsets[:-1], lengths)
    index += np.arange(offsets[-1], dtype=np.int64)
    data = pad[index]
    kind = pa.binary() if offsets[-1] < 2**31 else pa.large_binary()
    width = np.int32 if kind == pa.binary() else np.int64
    return pa.Array.from_buffers(kind, len(starts), [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)])


def _to_text(binary: pa.Array) -> pa.Array:
    """UTF-8 text; bytes that are not UTF-8 become U+FFFD (the record is kept)."""
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in binary.to_pylist()],
                        pa.string())


def _number(digits: np.ndarray, start: np.ndarray, signed: bool = True):
    """The integer written at column `start` of each row of `digits` (byte - 48): an optional '-', then up to
    MAX_DIGITS digits. Returns (value, column after it, at least one digit)."""
    rows = np.arange(len(start))
    last = digits.shape[1] - 1
    negative = (digits[rows, np.minimum(start, last)] == 45 - 48) & signed
    column = start + negative
    value = np.zeros(len(start), np.int64)
    going = np.ones(len(start), bool)
    count = np.zeros(len(start), np.int64)
    for _ in range(MAX_DIGITS):
        d = digits[rows, np.minimum(column, last)]
        going &= (d >= 0) & (d <= 9) & (column < last)
        if not going.any():
            break
        value = np.where(going, value * 10 + d, value)
        column = column + going
        count += going
    return np.where(negative, -value, value), column, count > 0


def _two(digits: np.ndarray, at: int | np.ndarray, rows: np.ndarray | None = None):
    """Two-digit fields at column `at` (a column, or one per row): (value, both were digits)."""
    if rows is None:
        a, b = digits[:, at], digits[:, at + 1]
    else:
        a, b = digits[rows, at], digits[rows, at + 1]
    return a.astype(np.int64) * 10 + b, (a >= 0) & (a <= 9) & (b >= 0) & (b <= 9)


@dataclass
class _DateState:
    """Per-file year context for year-less dates (see the module docstring)."""

    year: int
    ordinal: int | None = None


@dataclass
class _Header:
    ok: np.ndarray
    reason: np.ndarray
    code: np.ndarray
    cluster: np.ndarray
    proc: np.ndarray
    subproc: np.ndarray
    ms: np.ndarray
    utc: np.ndarray
    text_start: np.ndarray


def _decode_headers(pad: np.ndarray, starts: np.ndarray, ends: np.ndarray, dates: _DateState) -> _Header:
    """Decode every header line of the block at once; `ok` false where the line does not parse."""
    n = len(starts)
    rows = np.arange(n)
    ids = pad[starts[:, None] + np.arange(ID_WIDTH)].astype(np.int16) - 48
    reason = np.full(n, "", dtype=object)
    code = ids[:, 0] * 100 + ids[:, 1] * 10 + ids[:, 2]
    cluster, p1, ok1 = _number(ids, np.full(n, 5))
    proc, p2, ok2 = _number(ids, p1 + 1)
    subproc, p3, ok3 = _number(ids, p2 + 1)
    last = ID_WIDTH - 2
    ids_ok = ok1 & ok2 & ok3 & (ids[rows, np.minimum(p1, last)] == 46 - 48) & (ids[rows, np.minimum(p2, last)] == 46 - 48) \
        & (ids[rows, np.minimum(p3, last)] == 41 - 48) & (ids[rows, np.minimum(p3 + 1, last)] == 32 - 48)
    reason[~ids_ok] = "header: job id is not (CLUSTER.PROC.SUBPROC)"
    date_start = starts + np.minimum(p3 + 2, last)
    date = pad[date_start[:, None] + np.arange(DATE_WIDTH)].astype(np.int16) - 48
    iso = (date[:, 4] == 45 - 48) & (date[:, 7] == 45 - 48) & ((date[:, 10] == 32 - 48) | (date[:, 10] == 84 - 48))
    old = ~iso & (date[:, 2] == 47 - 48) & (date[:, 5] == 32 - 48)
    century, ok_c = _two(date, 0)
    decade, ok_d = _two(date, 2)
    year = century * 100 + decade
    month = np.where(iso, _two(date, 5)[0], _two(date, 0)[0])
    day = np.where(iso, _two(date, 8)[0], _two(date, 3)[0])
    md_ok = np.where(iso, _two(date, 5)[1] & _two(date, 8)[1] & ok_c & ok_d, _two(date, 0)[1] & _two(date, 3)[1])
    clock = np.where(iso, 11, 6)
    hh, ok_h = _two(date, clock, rows)
    mi, ok_m = _two(date, clock + 3, rows)
    ss, ok_s = _two(date, clock + 6, rows)
    colons = (date[rows, clock + 2] == 58 - 48) & (date[rows, clock + 5] == 58 - 48)
    form_ok = (iso | old) & md_ok & ok_h & ok_m & ok_s & colons
    reason[ids_ok & ~form_ok] = "header: date/time is neither YYYY-MM-DD HH:MM:SS nor MM/DD HH:MM:SS"
    end = clock + 8
    millis = np.zeros(n, np.int64)
    has_frac = date[rows, end] == 46 - 48
    if has_frac.any():
        frac, frac_end, _ = _number(date, end + 1, signed=False)
        places = frac_end - (end + 1)
        with_frac = has_frac & (places > 0)
        millis = np.where(with_frac, frac * 1000 // 10 ** np.clip(places, 0, MAX_DIGITS), 0)
        end = np.where(with_frac, frac_end, end)
    utc = date[rows, np.minimum(end, DATE_WIDTH - 1)] == 90 - 48
    end = end + utc
    text_start = date_start + end + (date[rows, np.minimum(end, DATE_WIDTH - 1)] == 32 - 48)
    form_ok &= (date_start + end <= ends) & (end < DATE_WIDTH)
    year = _years(iso & form_ok & ids_ok, old & form_ok & ids_ok, year, month, day, dates)
    valid = (month >= 1) & (month <= 12) & (day >= 1) & (day <= _days_in_month(year, month)) \
        & (hh <= 23) & (mi <= 59) & (ss <= 60)
    ok = ids_ok & form_ok & valid
    reason[ids_ok & form_ok & ~valid] = "header: no such date or time"
    days = _days_from_civil(year.astype(np.int64), np.clip(month, 1, 12).astype(np.int64),
                            np.clip(day, 1, 31).astype(np.int64))
    ms = (days * 86400 + hh * 3600 + mi * 60 + ss) * 1000 + millis
    return _Header(ok, reason, code.astype(np.int64), cluster, proc, subproc, ms, utc, text_start)


def _years(iso: np.ndarray, old: np.ndarray, year: np.ndarray, month: np.ndarray, day: np.ndarray,
           dates: _DateState) -> np.ndarray:
    """The year of every header: ISO years as written, year-less ones by context and roll-over."""
    used = iso | old
    if not old.any():
        if iso.any():
            last = np.flatnonzero(iso)[-1]
            dates.year, dates.ordinal = int(year[last]), int(month[last] * 32 + day[last])
        return year
    index = np.flatnonzero(used)
    ordinal = (month * 32 + day)[index]
    previous = np.concatenate([[dates.ordinal if dates.ordinal is not None else ordinal[0]], ordinal[:-1]])
    roll = old[index] & (ordinal < previous - HALF_YEAR)
    rolls = np.cumsum(roll)
    is_iso = iso[index]
    # the year and roll count at the last ISO event at or before each event (the file context before it)
    last_iso = np.maximum.accumulate(np.where(is_iso, np.arange(len(index)), -1))
    base_year = np.where(last_iso >= 0, year[index][np.maximum(last_iso, 0)], dates.year)
    base_rolls = np.where(last_iso >= 0, rolls[np.maximum(last_iso, 0)], 0)
    resolved = np.where(is_iso, year[index], base_year + rolls - base_rolls)
    out = year.copy()
    out[index] = resolved
    dates.year, dates.ordinal = int(resolved[-1]), int(ordinal[-1])
    return out


_TERMINATION = re.compile(rb"^\((\d)\) (Normal|Abnormal) termination \((?:return value|signal) (-?\d+)\)")
_CODE_LINE = re.compile(rb"^Code (-?\d+) Subcode (-?\d+)")
_EVICT_CODE = re.compile(rb" Code (-?\d+) Subcode (-?\d+)")
_VIA = re.compile(r"via (condor_\w+)")
_BY_USER = re.compile(r"\(by user ([^)]+)\)")
_TRANSFER = {b"Entered queue to transfer ": "queued", b"Started transferring ": "started",
             b"Finished transferring ": "finished"}


def _int32(digits: bytes) -> int | None:
    """A number of a body line as its int32 column holds it; one out of that range is left empty (None)."""
    if len(digits) > 11:
        return None
    value = int(digits)
    return value if -(2**31) <= value < 2**31 else None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


@dataclass
class _Block:
    batch: pa.RecordBatch
    ms: np.ndarray
    keys: np.ndarray
    bad: list[BadRecord]


def _decode_block(buf: bytes, file: str, first_line: int, dates: _DateState) -> _Block:
    """All events of one block of whole lines: a record batch (no seq yet), their keys, and the bad records."""
    n_bytes = len(buf)
    pad = np.frombuffer(buf + b"\n" * PAD, np.uint8)
    ends = np.flatnonzero(pad[:n_bytes] == 10)
    if len(ends) == 0 or ends[-1] != n_bytes - 1:
        raise AssertionError("a block must end with a newline")
    starts = np.empty(len(ends), np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    content_end = ends - ((pad[np.maximum(ends - 1, 0)] == 13) & (ends > starts))
    length = content_end - starts
    s0, s1, s2 = pad[starts], pad[starts + 1], pad[starts + 2]
    is_header = (length >= 5) & (s0 - 48 < 10) & (s1 - 48 < 10) & (s2 - 48 < 10) \
        & (pad[starts + 3] == 32) & (pad[starts + 4] == 40)
    is_term = (length == 3) & (s0 == 46) & (s1 == 46) & (s2 == 46)
    blank = length == 0
    markers = np.flatnonzero(is_header | is_term)
    kinds = is_header[markers]
    nxt = np.concatenate([kinds[1:], [True]])  # past the last marker: as if a header followed
    nxt_line = np.concatenate([markers[1:], [len(ends)]])
    event_h = markers[kinds & ~nxt]
    event_t = nxt_line[kinds & ~nxt]
    bad: list[BadRecord] = []

    def record_text(first: int, last: int) -> str:
        return _text(buf[starts[first]:ends[min(last, len(ends) - 1)]])

    def add_bad(first: int, last: int, reason: str) -> None:
        bad.append(BadRecord(file, first_line + first, reason, record_text(first, last)))

    # headers not followed by their terminator: truncated or unterminated events
    for h, following in zip(markers[kinds & nxt], nxt_line[kinds & nxt]):
        reason = "event has no '...' terminator before the next event" if following < len(ends) \
            else "event is truncated: the file ends before its '...' terminator"
        add_bad(int(h), int(following) - 1, reason)
    # stretches of non-blank lines that belong to no event
    covered = np.zeros(len(ends) + 1, np.int64)
    np.add.at(covered, event_h, 1)
    np.add.at(covered, event_t + 1, -1)
    bad_h = markers[kinds & nxt]
    np.add.at(covered, bad_h, 1)
    np.add.at(covered, nxt_line[kinds & nxt], -1)
    outside = (np.cumsum(covered)[:-1] == 0) & ~blank
    if outside.any():
        lines = np.flatnonzero(outside)
        # a stretch ends at a gap or just after a terminator line
        breaks = np.flatnonzero((np.diff(lines) > 1) | is_term[lines[:-1]])
        for first, last in zip(np.r_[lines[0], lines[breaks + 1]], np.r_[lines[breaks], lines[-1]]):
            if is_term[last]:
                reason = "'...' terminator without an event" if first == last \
                    else "record has no event header (its first line is not 'EEE (C.P.S) DATE TIME ...')"
            else:
                reason = "lines outside any event (no event header before them)"
            add_bad(int(first), int(last), reason)

    header = _decode_headers(pad, starts[event_h], content_end[event_h], dates)
    for i in np.flatnonzero(~header.ok):
        add_bad(int(event_h[i]), int(event_t[i]), str(header.reason[i]))
    bad.sort(key=lambda record: record.line)
    keep = header.ok
    h, t = event_h[keep], event_t[keep]
    n = len(h)
    code = header.code[keep]
    ms = header.ms[keep]
    text_start = header.text_start[keep]
    text = _to_text(_gather(pad, text_start, content_end[h]))

    # record keys: header fields, record length and byte sum
    record_start, record_end = starts[h], ends[t]  # up to the terminator's newline (always inside the block)
    sums = np.add.reduceat(pad[:n_bytes], np.ravel(np.column_stack([record_start, record_end])),
                           dtype=np.uint64)[::2] if n else np.zeros(0, np.uint64)
    keys = mix64([ms, header.cluster[keep], header.proc[keep], header.subproc[keep], code,
                 record_end - record_start, sums])

    columns = _body_fields(buf, pad, starts, content_end, h, t, code, text_start, content_end[h], n)
    names = _NAMES.take(pa.array(np.where((code >= 0) & (code < len(EVENT_NAMES)), code, len(EVENT_NAMES))))
    batch = pa.RecordBatch.from_arrays([
        pa.nulls(n, pa.int64()),
        pa.array([file]).take(pa.array(np.zeros(n, np.int64))) if n else pa.array([], pa.string()),
        pa.array(first_line + h),
        pa.array(code.astype(np.int16)),
        names,
        pa.array(header.cluster[keep]),
        pa.array(header.proc[keep]),
        pa.array(header.subproc[keep]),
        pa.array(ms.astype("datetime64[ms]")),
        pa.array(header.utc[keep]),
        text,
        *columns,
    ], schema=SCHEMA)
    return _Block(batch, ms, keys, bad)


def mix64(parts: list[np.ndarray]) -> np.ndarray:
    """A 64-bit key of several integer columns (splitmix64 rounds), vectorised."""
    with np.errstate(over="ignore"):
        key = np.full(len(parts[0]), 0x9E3779B97F4A7C15, np.uint64)
        for part in parts:
            key ^= np.asarray(part).astype(np.uint64)
            key += np.uint64(0x9E3779B97F4A7C15)
            key = (key ^ (key >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            key = (key ^ (key >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            key ^= key >> np.uint64(31)
    return key


def _body_fields(buf, pad, starts, content_end, h, t, code, text_start, text_end, n) -> list[pa.Array]:
    """code, subcode, reason, via, by_user, terminated_normally, return_value, signal, direction, stage, job_ad.

    Only the few event types whose bodies matter are visited one by one (plain Python ints: no NumPy scalars)."""
    code_v: list[int | None] = [None] * n
    subcode_v: list[int | None] = [None] * n
    reason: list[str | None] = [None] * n
    via: list[str | None] = [None] * n
    by_user: list[str | None] = [None] * n
    normal: list[bool | None] = [None] * n
    return_value: list[int | None] = [None] * n
    signal: list[int | None] = [None] * n
    job_ad: list[str | None] = [None] * n
    first_body = (h + 1).tolist()
    terminator = t.tolist()
    kinds = code.tolist()
    line_start, line_end = starts.tolist(), content_end.tolist()

    def line(i: int) -> bytes:
        return buf[line_start[i]:line_end[i]].lstrip(b" \t")

    def visit(codes: tuple[int, ...]) -> list[int]:
        return np.flatnonzero(np.isin(code, codes)).tolist()

    for e in visit((5, 15, 16)):
        if first_body[e] < terminator[e]:
            match = _TERMINATION.match(line(first_body[e]))
            if match:
                value = _int32(match.group(3))
                normal[e] = match.group(2) == b"Normal"
                if normal[e]:
                    return_value[e] = value
                else:
                    signal[e] = value
    for e in visit((2, 7, 9, 12, 13, 21, 24)):
        wants_code = kinds[e] in (12, 21)
        for i in range(first_body[e], min(first_body[e] + 4, terminator[e])):
            raw = line(i)
            match = _CODE_LINE.match(raw) if wants_code else None
            if match:
                code_v[e], subcode_v[e] = _int32(match.group(1)), _int32(match.group(2))
                break
            if i == first_body[e] and raw:
                reason[e] = _text(raw)
        if reason[e]:
            found = _VIA.search(reason[e])
            via[e] = found.group(1) if found else None
            found = _BY_USER.search(reason[e])
            by_user[e] = found.group(1) if found else None
    header_text_start, header_text_end = text_start.tolist(), text_end.tolist()
    for e in visit((4,)):
        match = _EVICT_CODE.search(buf[header_text_start[e]:header_text_end[e]])
        if match:
            code_v[e], subcode_v[e] = _int32(match.group(1)), _int32(match.group(2))
        for i in range(first_body[e], terminator[e]):
            raw = line(i)
            if raw.startswith(b"Reason: "):
                reason[e] = _text(raw[len(b"Reason: "):])
                break
    for e in visit((28,)):
        ad = {}
        if first_body[e] < terminator[e]:
            for item in _text(buf[line_start[first_body[e]]:line_end[terminator[e] - 1]]).split("\n"):
                key, sep, value = item.partition("=")
                key = key.strip()
                if sep and key.replace("_", "a").replace(".", "a").isalnum():
                    ad[key] = value.strip()
        job_ad[e] = _JSON.encode(ad)
    stage, direction = _transfer_kinds(pad, text_start, code)
    return [
        pa.array(code_v, pa.int32()),
        pa.array(subcode_v, pa.int32()),
        pa.array(reason, pa.string()),
        pa.array(via, pa.string()),
        pa.array(by_user, pa.string()),
        pa.array(normal, pa.bool_()),
        pa.array(return_value, pa.int32()),
        pa.array(signal, pa.int32()),
        direction,
        stage,
        pa.array(job_ad, pa.string()),
    ]


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
_STAGES = pa.array(["queued", "started", "finished"])
_DIRECTIONS = pa.array(["input", "output"])


def _transfer_kinds(pad: np.ndarray, text_start: np.ndarray, code: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """Stage (queued/started/finished) and direction (input/output) of every 040 event, from its header text."""
    n = len(code)
    stage = np.full(n, -1)
    direction = np.full(n, -1)
    transfers = np.flatnonzero(code == 40)
    if len(transfers):
        head = pad[np.minimum(text_start[transfers][:, None] + np.arange(32), len(pad) - 1)]
        for k, prefix in enumerate(_TRANSFER):
            width = len(prefix)
            hit = (head[:, :width] == np.frombuffer(prefix, np.uint8)).all(axis=1)
            word = head[:, width:width + 3]
            is_input = (word == np.frombuffer(b"inp", np.uint8)).all(axis=1)
            is_output = (word == np.frombuffer(b"out", np.uint8)).all(axis=1)
            known = hit & (is_input | is_output)
            stage[transfers[known]] = k
            direction[transfers[known]] = np.where(is_input[known], 0, 1)
    return (_STAGES.take(pa.array(np.maximum(stage, 0), mask=stage < 0)),
            _DIRECTIONS.take(pa.array(np.maximum(direction, 0), mask=direction < 0)))


# ---------------------------------------------------------------- the overlap index
@dataclass
class _Run:
    keys: np.ndarray  # sorted
    segment: np.ndarray  # the first segment each key was seen in
    low: int
    high: int


class _Overlaps:
    """Keys of the events read so far, in runs (one per block), to drop records repeated from an earlier segment."""

    def __init__(self):
        self.runs: list[_Run] = []

    def duplicates(self, keys: np.ndarray, segment: np.ndarray, ms: np.ndarray) -> np.ndarray:
        dup = np.zeros(len(keys), bool)
        if len(keys) == 0:
            return dup
        low, high = int(ms.min()), int(ms.max())
        for run in self.runs:
            if run.high < low or run.low > high:
                continue
            candidates = np.flatnonzero((ms >= run.low) & (ms <= run.high))
            if len(candidates) == 0:
                continue
            pos = np.searchsorted(run.keys, keys[candidates]).clip(max=len(run.keys) - 1)
            hit = (run.keys[pos] == keys[candidates]) & (run.segment[pos] < segment[candidates])
            dup[candidates[hit]] = True
        # within the block: a key first seen in an earlier segment of this same block
        order = np.lexsort((segment, keys))
        sorted_keys = keys[order]
        group_start = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
        first_segment = segment[order][np.maximum.accumulate(np.where(group_start, np.arange(len(order)), 0))]
        dup[order] |= first_segment < segment[order]
        unique = order[group_start]
        self.runs.append(_Run(keys[unique], segment[unique].astype(np.int32), low, high))
        return dup


# ---------------------------------------------------------------- the reader
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
        self._overlaps = _Overlaps()
        self._seq = 0
        self._segment = -1
        self._last_ms: int | None = None

    def _ordered(self) -> list[tuple[Source, int | None]]:
        """Sources in the order of their first event's time (unreadable starts last), with their anchor years."""
        keyed = []
        for index, source in enumerate(self.sources):
            anchor = self.options.year if self.options.year is not None else _anchor_year(source)
            first = _first_time(source, anchor if anchor is not None else _time.localtime().tm_year)
            keyed.append((first is None, first or 0, index, source, anchor))
        return [(source, anchor) for *_, source, anchor in sorted(keyed, key=lambda k: k[:3])]

    def batches(self) -> Iterator[pa.RecordBatch]:
        for source, anchor in self._ordered():
            self.stats.files.append(source.label)
            yield from self._read(source, anchor)

    def _read(self, source: Source, anchor: int | None) -> Iterator[pa.RecordBatch]:
        dates = _DateState(anchor if anchor is not None else _time.localtime().tm_year)
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
                decoded = _decode_block(part, source.label, line, dates)
                line += part.count(b"\n")
                yield from self._account(decoded)

    def _account(self, block: _Block) -> Iterator[pa.RecordBatch]:
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


_FIRST = re.compile(rb"^\d{3} \(-?\d+\.-?\d+\.-?\d+\) (?:(\d{4})-(\d\d)-(\d\d)[ T]|(\d\d)/(\d\d) )(\d\d):(\d\d):(\d\d)",
                    re.MULTILINE)


def _first_time(source: Source, year: int) -> int | None:
    """Seconds since the epoch of the first parseable header in the source's first MiB (for ordering)."""
    with source.open() as handle:
        match = _FIRST.search(handle.read(1 << 20))
    if not match:
        return None
    g = match.groups()
    y, m, d = (int(g[0]), int(g[1]), int(g[2])) if g[0] else (year, int(g[3]), int(g[4]))
    try:
        return int(pd.Timestamp(year=y, month=m, day=d, hour=int(g[5]), minute=int(g[6]), second=min(int(g[7]), 59))
                   .timestamp())
    except ValueError:
        return None


# ---------------------------------------------------------------- entry points
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
