"""The Standard Workload Format (Parallel Workloads Archive): the one reader every slice that learns from SWF traces
shares.

A trace is a `;` header (`; Key: value` lines: UnixStartTime, TimeZone/TimeZoneString, `Queue:` and `Partition:`
code names, ...) and one job a line of 18 whitespace-separated numbers (FIELDS), -1 meaning unknown. `.swf` and
`.swf.gz` files are read line by line, a block of lines at a time, so memory holds the numbers of the jobs (18
floats each) and one block of text, never the whole file. A line that is not 18 numbers a job can have is
quarantined with its file, line and field, and the rest is read.

Rule for partial executions (status 2-4): lines that share a job number are one job. A line with status
0, 1 or 5 is the job's own line and decides its state; the partial lines only widen its time span. With
no such line, the last partial decides: 3 -> status 1 (completed), 4 -> status 0 (failed), 2 alone -> -1 (unknown).
"""

from __future__ import annotations

import gzip
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta, timezone, tzinfo
from pathlib import Path
from typing import TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from jobaware.errors import InputError, UnreadableFile
from jobaware.reading import Problem
from jobaware.sources import files as source_files
from jobaware.text import ascii_digits

FIELDS = (
    "job", "submit", "wait", "run", "procs_alloc", "cpu_avg", "mem_used", "procs_req", "time_req",
    "mem_req", "status", "user", "group", "executable", "queue", "partition", "preceding", "think",
)
SUFFIXES = (".swf", ".swf.gz")
UNKNOWN = -1
PARTIAL = (2, 3, 4)
EPOCH_RANGE = (0, 4_102_444_800)  # seconds: 1970-01-01 to 2100-01-01, the times a job may carry
_CENTURY = 100 * 365 * 86_400
# the largest value a field may hold (seconds, processors, a job number exact in a float64); the others need only
# be finite and at most 2**53
BOUNDS = {"job": 2**53 - 1, "wait": _CENTURY, "run": _CENTURY, "procs_alloc": 10**9, "procs_req": 10**9,
          "time_req": _CENTURY}
# numbers and codes that are whole by the format's definition
WHOLE = ("job", "procs_alloc", "procs_req", "status", "user", "group", "executable", "queue", "partition",
         "preceding")
BLOCK_LINES = 65_536  # job lines parsed at a time
_HIGH = np.array([BOUNDS.get(name, 2**53) for name in FIELDS], dtype=float)
_WHOLE = np.array([name in WHOLE for name in FIELDS])


@dataclass
class SwfHeader:
    fields: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    queues: dict[int, str] = field(default_factory=dict)
    partitions: dict[int, str] = field(default_factory=dict)
    start_epoch: int = 0
    tz: tzinfo = timezone.utc

    def local_times(self, offsets: pd.Series) -> pd.Series:
        """Seconds since the trace's start as the site's wall-clock times (naive, in the header's zone)."""
        utc = pd.to_datetime(self.start_epoch + offsets, unit="s", utc=True)
        return utc.dt.tz_convert(self.tz).dt.tz_localize(None)


@dataclass
class SwfTrace:
    """A whole trace: its header; one row per job (the 18 fields as written, -1 unknown, partial executions
    folded; `line`: the job's line in the file; `end`: submit + wait + run in seconds, NaN when the run time is
    unknown); the problems met and the quarantined lines."""

    header: SwfHeader
    jobs: pd.DataFrame
    problems: list[Problem]
    quarantined: list[dict]

    def known(self, column: str) -> pd.Series:
        """A field with its unknown values (-1) as NaN."""
        return self.jobs[column].where(self.jobs[column] >= 0)


def cluster_name(path: str | Path) -> str:
    """A trace's cluster: its file name without the suffixes (`KTH-SP2-1996-2.1-cln`)."""
    name = Path(path).name
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def trace_files(sources: list[str] | str) -> list[str]:
    """The traces named by paths, globs and folders (a folder: its `.swf` and `.swf.gz` files)."""
    found = source_files(sources, SUFFIXES)
    for path in found:
        if not path.lower().endswith(SUFFIXES):
            raise InputError(f"{path}: not a Standard Workload Format trace (expected {' or '.join(SUFFIXES)})")
    return found


def trace_and_export_files(sources: list[str] | str) -> list[str]:
    """The traces and job-store exports (`jobaware.store.export`) named by paths, globs and folders (a folder: its
    files of either kind)."""
    from jobaware.store.export import EXPORT_SUFFIX, is_export

    found = source_files(sources, SUFFIXES + (EXPORT_SUFFIX,))
    for path in found:
        if not (is_swf(path) or is_export(path)):
            raise InputError(f"{path}: not a Standard Workload Format trace (expected {' or '.join(SUFFIXES)}) "
                             f"nor a job store's export ({EXPORT_SUFFIX})")
    return found


def is_swf(path: str | Path) -> bool:
    """Whether a path names a trace in the Standard Workload Format (SUFFIXES: `.swf` or `.swf.gz`)."""
    return str(path).lower().endswith(SUFFIXES)


def open_text(path: str | Path) -> TextIO:
    """A trace as text, gzip or plain (told by its first bytes); undecodable bytes are replaced, never fatal."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def parse_header(path: str | Path) -> SwfHeader:
    """The `; Key: value` lines before the first job; a header value that cannot be used is an InputError
    naming its line."""
    header = SwfHeader()
    with open_text(path) as handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.startswith(";"):
                    if text.strip():
                        break
                    continue
                _header_line(header, number, text)
        except (OSError, EOFError) as exc:
            raise UnreadableFile(f"{path}: not a readable trace ({exc})") from None
    header.start_epoch = _header_number(path, header, "UnixStartTime", EPOCH_RANGE, "epoch seconds between 1970 and 2100")
    header.tz = _header_zone(path, header)
    return header


def _header_line(header: SwfHeader, number: int, text: str) -> None:
    key, sep, value = text[1:].partition(":")
    if not sep or not key.strip() or " " in key.strip():
        return
    key, value = key.strip(), value.strip()
    if key in ("Queue", "Partition") and value and ascii_digits(value.split(maxsplit=1)[0].removeprefix("-")):
        code, *name = value.split(maxsplit=1)
        (header.queues if key == "Queue" else header.partitions)[int(code)] = name[0].strip() if name else code
    elif key == "Note":
        header.fields["Note"] = (header.fields.get("Note", "") + " " + value).strip()
    elif key not in header.fields:
        header.fields[key], header.lines[key] = value, number


def _header_number(path, header: SwfHeader, key: str, bounds: tuple[int, int], expected: str) -> int:
    text = header.fields.get(key, "")
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not bounds[0] <= value <= bounds[1]:
        raise UnreadableFile(f"{path}:{header.lines[key]}: header {key}: expected {expected}, got {text[:80]!r}")
    return value


def _header_zone(path, header: SwfHeader) -> tzinfo:
    """TimeZoneString when it names a zone; else TimeZone (seconds east of UTC); else UTC."""
    offset = _header_number(path, header, "TimeZone", (-86_399, 86_399), "seconds from UTC, under a day")
    name = header.fields.get("TimeZoneString")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return timezone(timedelta(seconds=offset))


@dataclass
class SwfBlock:
    """Job lines of one block that passed every check: values (n x 18) and their file lines; the others."""

    values: np.ndarray
    lines: np.ndarray
    problems: list[Problem]
    quarantined: list[dict]


def iter_blocks(path: str | Path, start_epoch: int = 0, block_lines: int = BLOCK_LINES) -> Iterator[SwfBlock]:
    """The job lines of a trace, `block_lines` at a time, checked (see `line_problem`)."""
    texts, numbers = [], []
    with open_text(path) as handle:
        try:
            for number, text in enumerate(handle, start=1):
                stripped = text.strip()
                if not stripped or stripped.startswith(";"):
                    continue
                texts.append(stripped)
                numbers.append(number)
                if len(texts) == block_lines:
                    yield _check_block(str(path), texts, numbers, start_epoch)
                    texts, numbers = [], []
        except (OSError, EOFError) as exc:  # a truncated or corrupt gzip stream
            raise InputError(f"{path}: not a readable trace after line {numbers[-1] if numbers else 0} ({exc})") from None
    if texts:
        yield _check_block(str(path), texts, numbers, start_epoch)


def _check_block(path: str, texts: list[str], numbers: list[int], start_epoch: int) -> SwfBlock:
    """Parse a block in one go (NumPy's text parser); only a block with a line that is not 18 numbers goes line by
    line. Then the bounds of every field, vectorised; a line out of bounds is named by `line_problem`."""
    try:
        values = np.loadtxt(io.StringIO("\n".join(texts)), dtype=float, ndmin=2, comments=None)
        parsed = values.shape[1] == len(FIELDS)
    except ValueError:
        parsed = False
    if not parsed:
        values = np.full((len(texts), len(FIELDS)), np.nan)
        ok = np.zeros(len(texts), dtype=bool)
        for i, text in enumerate(texts):
            row = _numbers(text.split())
            if row is not None:
                values[i], ok[i] = row, True
    else:
        ok = np.ones(len(texts), dtype=bool)
    with np.errstate(invalid="ignore"):
        end = start_epoch + values[:, 1] + np.maximum(values[:, 2], 0) + np.maximum(values[:, 3], 0)
        suspect = (~ok | ~np.isfinite(values).all(axis=1) | (values > _HIGH).any(axis=1) | (values < UNKNOWN).any(axis=1)
                   | ((values != np.floor(values)) & _WHOLE).any(axis=1) | (values[:, 0] < 0) | (values[:, 1] < 0)
                   | (end > EPOCH_RANGE[1]))
    problems, quarantined = [], []
    for i in np.flatnonzero(suspect):
        reason, bad_field, value = line_problem(texts[i].split(), start_epoch)
        problems.append(Problem(path, numbers[i], bad_field, value, reason))
        quarantined.append({"file": path, "line": numbers[i], "text": texts[i]})
    keep = ~suspect
    return SwfBlock(values[keep], np.asarray(numbers)[keep], problems, quarantined)


def _numbers(parts: list[str]) -> list[float] | None:
    if len(parts) != len(FIELDS):
        return None
    try:
        return [float(p) for p in parts]
    except ValueError:
        return None


def line_problem(parts: list[str], start_epoch: int = 0) -> tuple[str, str, str]:
    """Why a job line cannot be read: (reason, field, value as written)."""
    if len(parts) != len(FIELDS):
        return f"expected {len(FIELDS)} whitespace-separated fields, got {len(parts)}", "*", " ".join(parts)[:80]
    values = _numbers(parts)
    if values is None:
        index = next(i for i, p in enumerate(parts) if not _is_number(p))
        return "not a number", FIELDS[index], parts[index][:80]
    if values[0] < 0:
        return "job number must be non-negative", "job", parts[0]
    if values[1] < 0:
        return "submit time must be known (not -1)", "submit", parts[1]
    for i, (name, number) in enumerate(zip(FIELDS, values, strict=True)):
        high = BOUNDS.get(name, 2**53)
        if not math.isfinite(number) or number > high:
            return f"not a finite number of at most {high:,}", name, parts[i][:80]
        if number < UNKNOWN:
            return "negative (only -1, unknown, may be)", name, parts[i][:80]
        if name in WHOLE and number != int(number):
            return "not a whole number", name, parts[i][:80]
    end = start_epoch + values[1] + max(values[2], 0) + max(values[3], 0)
    if end > EPOCH_RANGE[1]:
        return "submit + wait + run lies after 2100", "submit", parts[1][:80]
    return "unreadable", "*", " ".join(parts)[:80]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def end_offsets(jobs: pd.DataFrame) -> np.ndarray:
    """End offsets: submit + wait + run, unknown when the run time is.

    An unknown wait (-1; LLNL-Thunder records none at all) counts as 0: the end is then the earliest the job
    can have ended.
    """
    return np.where(jobs["run"] >= 0, jobs["submit"] + jobs["wait"].clip(lower=0) + jobs["run"], np.nan)


def fold_partials(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per job number, by the rule in this module's docstring (`raw` has the fields, `line` and `end`)."""
    partial = raw["status"].isin(PARTIAL)
    if not partial.any():
        return raw
    own = raw[~partial].drop_duplicates("job", keep="last").set_index("job")
    parts = raw[partial].groupby("job")
    span = parts.agg(submit=("submit", "min"), end=("end", "max"), run=("run", "sum"), status=("status", "last"))
    merged = []
    for job, row in span.iterrows():
        if job in own.index:
            base = own.loc[job].copy()
            base["end"] = np.nanmax([base["end"], row["end"]])
            base["submit"] = min(base["submit"], row["submit"])
        else:
            base = raw[partial & (raw["job"] == job)].iloc[0].copy()
            base["run"], base["end"] = row["run"], row["end"]
            base["status"] = {3: 1, 4: 0}.get(int(row["status"]), UNKNOWN)
        base["job"] = job
        merged.append(base)
    rest = raw[~partial & ~raw["job"].isin(span.index)]
    folded = pd.concat([rest, pd.DataFrame(merged)], ignore_index=True).sort_values("line", kind="stable")
    return folded.reset_index(drop=True)


def read_swf(path: str | Path, block_lines: int = BLOCK_LINES) -> SwfTrace:
    """A whole `.swf` or `.swf.gz` trace, streamed: header, jobs (partials folded), problems and quarantine."""
    header = parse_header(path)
    values, lines, problems, quarantined = [], [], [], []
    for block in iter_blocks(path, header.start_epoch, block_lines):
        values.append(block.values)
        lines.append(block.lines)
        problems += block.problems
        quarantined += block.quarantined
    table = np.concatenate(values) if values else np.zeros((0, len(FIELDS)))
    raw = pd.DataFrame(table, columns=FIELDS).assign(line=np.concatenate(lines) if lines else np.zeros(0, np.int64))
    raw["end"] = end_offsets(raw)
    return SwfTrace(header, fold_partials(raw), problems, quarantined)
