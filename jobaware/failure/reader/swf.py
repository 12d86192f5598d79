"""Standard Workload Format traces (Parallel Workloads Archive) mapped onto the canonical job table.

Rule for partial executions (status 2-4): lines that share a job number are one job. A line with status
0, 1 or 5 is the job's own line and decides its state; the partial lines only widen its time span. With
no such line, the last partial decides: 3 -> COMPLETED, 4 -> FAILED, 2 alone -> unknown (no label).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.failure.reader.common import Batch, to_canonical_dtypes
from jobaware.failure.schema import EPOCH_RANGE, LIMITS
from jobaware.reading import Problem

FIELDS = (
    "job", "submit", "wait", "run", "procs_alloc", "cpu_avg", "mem_used", "procs_req", "time_req",
    "mem_req", "status", "user", "group", "executable", "queue", "partition", "preceding", "think",
)
STATUS = {0: "FAILED", 1: "COMPLETED", 5: "CANCELLED"}
PARTIAL_FINAL = {3: "COMPLETED", 4: "FAILED"}


@dataclass
class SwfHeader:
    fields: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    queues: dict[int, str] = field(default_factory=dict)
    partitions: dict[int, str] = field(default_factory=dict)
    start_epoch: int = 0
    tz: tzinfo = timezone.utc


def parse_header(path: Path) -> SwfHeader:
    """The `; Key: value` lines before the first job; a header value that cannot be used is an InputError
    naming its line."""
    header = SwfHeader()
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.startswith(";"):
                if text.strip():
                    break
                continue
            key, sep, value = text[1:].partition(":")
            if not sep or not key.strip() or " " in key.strip():
                continue
            key, value = key.strip(), value.strip()
            if key in ("Queue", "Partition") and value and value.split(maxsplit=1)[0].lstrip("-").isdigit():
                code, _, name = value.partition(" ")
                (header.queues if key == "Queue" else header.partitions)[int(code)] = name.strip() or code
            elif key == "Note":
                header.fields["Note"] = (header.fields.get("Note", "") + " " + value).strip()
            elif key not in header.fields:
                header.fields[key], header.lines[key] = value, number
    header.start_epoch = _header_number(path, header, "UnixStartTime", EPOCH_RANGE, "epoch seconds between 1970 and 2100")
    header.tz = _header_zone(path, header)
    return header


def _header_number(path: Path, header: SwfHeader, key: str, bounds: tuple[int, int], expected: str) -> int:
    text = header.fields.get(key, "")
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not bounds[0] <= value <= bounds[1]:
        raise InputError(f"{path}:{header.lines[key]}: header {key}: expected {expected}, got {text[:80]!r}")
    return value


def _header_zone(path: Path, header: SwfHeader) -> tzinfo:
    """TimeZoneString when it names a zone; else TimeZone (seconds east of UTC); else UTC."""
    offset = _header_number(path, header, "TimeZone", (-86_399, 86_399), "seconds from UTC, under a day")
    name = header.fields.get("TimeZoneString")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return timezone(timedelta(seconds=offset))


def _read_lines(path: Path, start_epoch: int) -> tuple[np.ndarray, np.ndarray, list[Problem], list[dict]]:
    rows, lines, problems, quarantined = [], [], [], []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            stripped = text.strip()
            if not stripped or stripped.startswith(";"):
                continue
            parts = stripped.split()
            reason = None
            if len(parts) != len(FIELDS):
                reason = f"expected {len(FIELDS)} whitespace-separated fields, got {len(parts)}"
                bad_field, value = "*", stripped[:80]
            else:
                try:
                    values = [float(p) for p in parts]
                except ValueError:
                    index = next(i for i, p in enumerate(parts) if not _is_number(p))
                    reason, bad_field, value = "not a number", FIELDS[index], parts[index]
            if reason is None and values[0] < 0:
                reason, bad_field, value = "job number must be non-negative", "job", parts[0]
            if reason is None and values[1] < 0:
                reason, bad_field, value = "submit time must be known (not -1)", "submit", parts[1]
            if reason is None:
                reason, bad_field, value = _out_of_bounds(values, parts, start_epoch)
            if reason:
                problems.append(Problem(str(path), number, bad_field, value, reason))
                quarantined.append({"file": str(path), "line": number, "text": stripped})
                continue
            rows.append(values)
            lines.append(number)
    return np.asarray(rows, dtype=float).reshape(-1, len(FIELDS)), np.asarray(lines), problems, quarantined


# the canonical column each SWF field becomes, for its bounds; the others need only be finite and <= 2**53
_BOUNDED = {"job": "job_id", "wait": "run_time", "run": "run_time", "procs_alloc": "processors_req",
            "procs_req": "processors_req", "time_req": "wallclock_req"}
# numbers and codes that are whole by the format's definition
_WHOLE = {"job", "procs_alloc", "procs_req", "status", "user", "group", "executable", "queue", "partition", "preceding"}


def _out_of_bounds(values: list[float], parts: list[str], start_epoch: int) -> tuple[str | None, str, str]:
    """The first field of a job line that no job can have (reason, field, value), or (None, "", "")."""
    for i, (name, number) in enumerate(zip(FIELDS, values, strict=True)):
        low, high = LIMITS[_BOUNDED[name]] if name in _BOUNDED else (-1, 2**53)
        if not math.isfinite(number) or number > high:
            return f"not a finite number of at most {high:,}", name, parts[i][:80]
        if name in _WHOLE and number != int(number):
            return "not a whole number", name, parts[i][:80]
    end = start_epoch + values[1] + max(values[2], 0) + max(values[3], 0)
    if end > EPOCH_RANGE[1]:
        return "submit + wait + run lies after 2100", "submit", parts[1][:80]
    return None, "", ""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _end(raw: pd.DataFrame) -> np.ndarray:
    """End offsets: submit + wait + run, unknown when the run time is.

    An unknown wait (-1; LLNL-Thunder records none at all) counts as 0: the end is then the earliest the job
    can have ended, so its outcome may enter later jobs' history up to its (unknown) wait too early.
    """
    return np.where(raw["run"] >= 0, raw["submit"] + raw["wait"].clip(lower=0) + raw["run"], np.nan)


def _fold_partials(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per job number, by the rule in this module's docstring."""
    if not raw["status"].between(2, 4).any():
        return raw
    raw = raw.assign(end=_end(raw))
    partial = raw["status"].between(2, 4)
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
            base["status"] = {3: 1, 4: 0}.get(int(row["status"]), -1)
        base["job"] = job
        merged.append(base)
    rest = raw[~partial & ~raw["job"].isin(span.index)]
    folded = pd.concat([rest, pd.DataFrame(merged)], ignore_index=True).sort_values("line", kind="stable")
    return folded.reset_index(drop=True)


def iter_swf(path: Path, require_state: bool = False) -> Iterator[Batch]:
    header = parse_header(path)
    values, lines, problems, quarantined = _read_lines(path, header.start_epoch)
    raw = pd.DataFrame(values, columns=FIELDS).assign(line=lines)
    if "end" not in raw:
        raw["end"] = _end(raw)
    raw = _fold_partials(raw)
    known = lambda col: raw[col].where(raw[col] >= 0)  # noqa: E731 - SWF's -1 means unknown

    def clock(offsets: pd.Series) -> pd.Series:
        utc = pd.to_datetime(header.start_epoch + offsets, unit="s", utc=True)
        return utc.dt.tz_convert(header.tz).dt.tz_localize(None)

    submit = raw["submit"]
    start = submit + known("wait")
    procs = known("procs_req").fillna(known("procs_alloc"))
    names = lambda col, table, prefix: known(col).map(  # noqa: E731
        lambda v: table.get(int(v), f"{prefix}{int(v)}"), na_action="ignore"
    )
    frame = pd.DataFrame(
        {
            "job_id": raw["job"].astype("int64"),
            "user": known("user").map(lambda v: f"user{int(v)}", na_action="ignore"),
            "account": known("group").map(lambda v: f"group{int(v)}", na_action="ignore"),
            "partition": names("partition", header.partitions, "partition"),
            "qos": names("queue", header.queues, "queue"),
            "wallclock_req": known("time_req"),
            "nodes_req": np.nan,
            "processors_req": procs,
            "gpus_req": np.nan,
            "mem_req": known("mem_req") * procs / 1024.0,
            "submit_time": clock(submit),
            "start_time": clock(start),
            "end_time": clock(raw["end"].where(raw["end"].notna(), np.nan)),
            "run_time": known("run"),
            "state": raw["status"].map(lambda s: STATUS.get(int(s)), na_action="ignore"),
            "name": known("executable").map(lambda v: f"exe{int(v)}", na_action="ignore"),
            "work_dir": None,
            "submit_line": None,
        }
    )
    if require_state:
        missing = frame["state"].isna().to_numpy()
        for i in np.flatnonzero(missing)[:20]:
            problems.append(Problem(str(path), int(raw["line"].iloc[i]), "status", str(int(raw["status"].iloc[i])), "no final state"))
        quarantined += [{"file": str(path), "line": int(raw["line"].iloc[i])} for i in np.flatnonzero(missing)]
        frame = frame.loc[~missing]
    yield Batch(to_canonical_dtypes(frame.reset_index(drop=True)), problems, quarantined)
