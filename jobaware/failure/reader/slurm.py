"""Live Slurm records: `squeue --json` (Slurm 22.05, later versions' wrapped numbers too) and request records.

Both map onto the canonical job table, so the feature code that serves training serves live jobs.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.jobtable.common import NAT, JobColumns
from jobaware.jobtable.schema import (
    COLUMNS,
    EPOCH_RANGE,
    INTEGER,
    LIMITS,
    NUMERIC,
    STATES,
    TIME_COLUMNS,
    max_text,
    normalize_state,
    number_problem,
)
from jobaware.reading import abbreviated
from jobaware.text import ascii_digits

SQUEUE_KEYS = {"job_state", "user_name", "time_limit", "tres_req_str"}
_GPU = re.compile(r"gres[/:]gpu(?::[^=,:]+)?[=:](\d+)")


def is_squeue_record(record: dict) -> bool:
    return bool(SQUEUE_KEYS & set(record))


class FieldError(ValueError):
    """A field of a record that cannot be read: which field, what was expected, what came."""

    def __init__(self, field: str, expected: str, value):
        super().__init__(f"{field}: expected {expected}, got {_shown(value)}")
        self.field, self.expected, self.value = field, expected, value


def _shown(value) -> str:
    """A value as JSON, cut short: an error never repeats a huge input."""
    return abbreviated(json.dumps(value, default=str))


def _number(value):
    """Slurm >= 23.02 wraps numbers as {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value


def _checked(field: str, value, canonical: str):
    """A number of an squeue field, held to the canonical column's bounds; None when not set."""
    value = _number(value)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(field, "a number", value)
    problem = number_problem(canonical, value)
    if problem:
        raise FieldError(field, problem, value)
    return value


def _epoch(field: str, value) -> int | None:
    """An squeue time (epoch seconds) as the canonical table keeps times: the local wall clock, in seconds."""
    value = _number(value)
    if value in (None, 0):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not EPOCH_RANGE[0] <= value <= EPOCH_RANGE[1]:
        raise FieldError(field, "epoch seconds between 1970 and 2100", value)
    return int(value) + time.localtime(int(value)).tm_gmtoff


def _text(record: dict, field: str, canonical: str) -> str | None:
    value = record.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise FieldError(field, "a string", value)
    if len(str(value)) > max_text(canonical):
        raise FieldError(field, f"at most {max_text(canonical):,} characters", value)
    return str(value)


def _state(value) -> str | None:
    state = value[0] if isinstance(value, list) and value else value
    if state is None or state == []:
        return None
    if not isinstance(state, str) or len(state) > 64:
        raise FieldError("job_state", "a job state such as PENDING", value)
    return normalize_state(state)


# the squeue fields `from_squeue` reads as numbers: (the canonical column whose bounds hold, JSON type, scale)
SQUEUE_NUMBERS = {"cpus": ("processors_req", "integer", 1), "node_count": ("nodes_req", "integer", 1),
                   "memory_per_node": ("mem_req", "number", 1), "memory_per_cpu": ("mem_req", "number", 1),
                   "time_limit": ("wallclock_req", "integer", 60)}  # minutes
SQUEUE_TEXTS = {"user_name": "user", "account": "account", "partition": "partition", "qos": "qos", "name": "name",
                 "current_working_directory": "work_dir", "command": "submit_line"}


def from_squeue(record: dict) -> dict:
    """One `squeue --json` job record as a canonical row; FieldError names a field that cannot be read."""
    cpus, per_node, per_cpu = (_squeue_number(record, field) for field in ("cpus", "memory_per_node", "memory_per_cpu"))
    mem = float(per_node) if per_node else (float(per_cpu) * cpus if per_cpu and cpus else 0.0)
    if number_problem("mem_req", mem):
        raise FieldError("memory_per_cpu", f"at most {LIMITS['mem_req'][1]:,} MB in all (times cpus)", per_cpu)
    limit = _squeue_number(record, "time_limit")
    if limit is not None and number_problem("wallclock_req", limit * 60.0):
        raise FieldError("time_limit", f"at most {LIMITS['wallclock_req'][1] // 60:,} minutes", limit)
    state = _state(record.get("job_state"))
    gpus = _GPU.search(" ".join(str(record.get(k) or "")[:4096] for k in ("tres_per_node", "tres_per_job", "tres_req_str")))
    gpus_req = int(gpus.group(1)) if gpus else 0
    if number_problem("gpus_req", gpus_req):
        raise FieldError("tres_req_str", f"at most {LIMITS['gpus_req'][1]:,} GPUs", gpus.group(0))
    start, end = _epoch("start_time", record.get("start_time")), _epoch("end_time", record.get("end_time"))
    ended = state not in (None, "PENDING", "RUNNING", "SUSPENDED")
    row = {
        "job_id": _checked("job_id", record.get("job_id"), "job_id"),
        "wallclock_req": None if limit is None else float(limit) * 60.0,
        "nodes_req": _squeue_number(record, "node_count"),
        "processors_req": cpus,
        "gpus_req": gpus_req,
        "mem_req": mem,
        "submit_time": _epoch("submit_time", record.get("submit_time")),
        "start_time": start if ended or state == "RUNNING" else None,
        "end_time": end if ended else None,
        "run_time": float(end - start) if ended and start is not None and end is not None else None,
        "state": state,
    }
    return row | {column: _text(record, field, column) for field, column in SQUEUE_TEXTS.items()}


def _squeue_number(record: dict, field: str):
    """An squeue number field, checked against the bounds of the canonical column it becomes."""
    return _checked(field, record.get(field), SQUEUE_NUMBERS[field][0])


def read_squeue_json(path: str | Path) -> tuple[pd.DataFrame, list[dict], list[str]]:
    """Canonical table from a file holding `squeue --json` output; the records that cannot be read are
    quarantined (file, record number, the field and why), never the whole file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not readable squeue --json output ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise InputError(f"{path}: expected squeue --json output, an object with a 'jobs' list")
    rows, quarantined, problems = [], [], []
    for number, record in enumerate(data["jobs"], start=1):
        try:
            if not isinstance(record, dict):
                raise FieldError("*", "a job object", record)
            row = from_squeue(record)
            if row["job_id"] is None:
                raise FieldError("job_id", "a job id", None)
            rows.append(row)
        except FieldError as exc:
            problems.append(f"{path} job {number}: {exc}")
            quarantined.append({"file": str(path), "record": number, "reason": str(exc), "text": json.dumps(record)})
    return JobColumns.from_rows(rows).frame(), quarantined, problems


def _field_error(where: str, field: str, expected: str, value) -> InputError:
    return InputError(f"{where}.{field}: expected {expected}, got {_shown(value)}")


_TIME = "a time 'YYYY-MM-DD HH:MM:SS' or epoch milliseconds, between 1970 and 2100"
_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)


def _time_seconds(where: str, field: str, value) -> int:
    """A request time (text, or epoch milliseconds) as epoch seconds of its wall clock (a zone is dropped, the
    wall time kept; fractions of a second cut off, as the canonical table's whole seconds do)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str) or len(str(value)) > 64:
        raise _field_error(where, field, _TIME, value)
    try:
        if isinstance(value, str):
            if len(value) == 19 and value[10] in " T":  # the usual 'YYYY-MM-DD HH:MM:SS': the fast parser
                seconds = (datetime.fromisoformat(value).replace(tzinfo=None) - _EPOCH) // _SECOND
            else:
                seconds = pd.Timestamp(value).tz_localize(None).value // 10**9
        elif not EPOCH_RANGE[0] * 1000 <= value <= EPOCH_RANGE[1] * 1000:
            raise ValueError("outside the range")
        else:
            seconds = int(value) // 1000
    except (ValueError, OverflowError, TypeError):
        raise _field_error(where, field, _TIME, value) from None
    if not EPOCH_RANGE[0] <= seconds <= EPOCH_RANGE[1]:
        raise _field_error(where, field, _TIME, value)
    return seconds


_KIND = {f: "time" if f in TIME_COLUMNS else "number" if f in NUMERIC or f in INTEGER else "state" if f == "state"
         else "text" for f in COLUMNS}
_ACCEPTED = {f: (*LIMITS[f], f in INTEGER) for f in LIMITS}  # (low, high, whole) of each number
_LONGEST = {f: max_text(f) for f in COLUMNS}


def _canonical_value(where: str, field: str, value):
    """A request field's value, checked (numbers and text that pass at once take the first lines)."""
    kind = _KIND[field]
    if kind == "number" and (type(value) is int or type(value) is float):
        low, high, whole = _ACCEPTED[field]
        if low <= value <= high and (not whole or type(value) is int or value.is_integer()):
            return value
    elif kind == "text" and type(value) is str and 0 < len(value) <= _LONGEST[field]:
        return value
    if value is None or value == "":
        return None
    if kind == "time":
        return _time_seconds(where, field, value)
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _field_error(where, field, "a number", value)
        problem = number_problem(field, value)
        if problem:
            raise _field_error(where, field, problem, value)
        return value
    if field == "state":
        state = normalize_state(str(value)[:64])
        if state not in STATES:
            raise _field_error(where, field, f"one of {', '.join(STATES)}", value)
        return state
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise _field_error(where, field, "a string", value)
    if len(str(value)) > max_text(field):
        raise _field_error(where, field, f"at most {max_text(field):,} characters", value)
    return str(value)


_FIELDS = frozenset(COLUMNS)


def parse_request(jobs, max_jobs: int | None = None) -> JobColumns:
    """Validate request records (canonical or squeue, at most `max_jobs`) into canonical columns; errors name the
    bad field. A job without a submit time was submitted now."""
    if not isinstance(jobs, list) or not jobs:
        raise InputError("jobs: expected a non-empty list of job records")
    if max_jobs is not None and len(jobs) > max_jobs:
        raise InputError(f"jobs: at most {max_jobs} jobs per request, got {len(jobs)}")
    now = pd.Timestamp.now().floor("s").value // 10**9
    columns = _valid_columns(jobs, now)
    return columns if columns is not None else _record_by_record(jobs, now)


def _record_by_record(jobs: list, now: int) -> JobColumns:
    """Each record checked in turn, each field by `_canonical_value`: the first bad one is named."""
    rows = []
    for i, record in enumerate(jobs):
        where = f"jobs[{i}]"
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected an object (a canonical job or an squeue --json record)")
        if is_squeue_record(record):
            try:
                row = from_squeue(record)
            except FieldError as exc:
                raise InputError(f"{where}.{exc}") from None
        else:
            if not _FIELDS.issuperset(record):
                unknown = sorted(set(record) - _FIELDS)
                raise InputError(f"{where}.{unknown[0]}: unknown field; expected canonical fields ({', '.join(COLUMNS)}) or an squeue --json record")
            row = {f: _canonical_value(where, f, v) for f, v in record.items()}
        if row.get("job_id") is None:
            raise InputError(f"{where}.job_id: missing")
        if row.get("submit_time") is None:
            row["submit_time"] = now
        rows.append(row)
    return JobColumns.from_rows(rows)


def _valid_columns(jobs: list, now: int) -> JobColumns | None:
    """The columns of a request whose records are all canonical and valid, checked a column at a time (what a
    large batch from an adapter is); None as soon as anything is not, and `_record_by_record` then names it.
    Accepts exactly what `_record_by_record` accepts, with the same values (a test holds them equal)."""
    if not all(type(record) is dict for record in jobs):
        return None
    fields = set().union(*jobs)
    if not fields <= _FIELDS or "job_id" not in fields:
        return None
    columns = {}
    for field in COLUMNS:
        values = list(map(dict.get, jobs, repeat(field, len(jobs)))) if field in fields else [None] * len(jobs)
        column = _valid_column(field, values)
        if column is None:
            return None
        columns[field] = column
    if np.isnan(columns["job_id"]).any():
        return None
    columns["submit_time"][columns["submit_time"] == NAT] = now
    return JobColumns(columns)


_NONE = type(None)


def _valid_column(field: str, values: list):
    """One request field's values as a JobColumns column, or None if any is not valid (or not plain)."""
    kind, types = _KIND[field], set(map(type, values))
    if kind == "number":
        if not types <= {int, float, _NONE}:
            return None
        try:
            numbers = np.array(values, dtype=np.float64)  # None -> NaN
        except OverflowError:
            return None
        unknown = np.isnan(numbers)
        known = numbers[~unknown]
        low, high, whole = _ACCEPTED[field]
        if int(unknown.sum()) != values.count(None) or (len(known) and (known.min() < low or known.max() > high)):
            return None
        return None if whole and (known != np.floor(known)).any() else numbers
    if kind == "time":
        if not types <= {str, int, float, _NONE}:
            return None
        try:
            seconds = {v: _time_seconds("jobs", field, v) for v in set(values) if v is not None and v != ""}
        except InputError:
            return None
        return np.array([NAT if v is None or v == "" else seconds[v] for v in values], dtype=np.int64)
    if not types <= {str, _NONE}:
        return None
    texts = [v or None for v in values]  # "" is unknown
    if kind == "state":
        states = {v: normalize_state(v[:64]) for v in set(texts) if v is not None}
        if not set(states.values()) <= set(STATES):
            return None
        texts = [None if v is None else states[v] for v in texts]
    elif max(map(len, filter(None, texts)), default=0) > _LONGEST[field]:
        return None
    return np.array(texts, dtype=object)


# ---------------------------------------------------------------- accounting (`sacct`) records
# Slurm's own words when it kills a job for memory (jobacct_gather's OverMemoryKill, the cgroup OOM killer)
MEMORY_KILLED = re.compile(r"exceeded (?:job )?memory limit|oom[-_ ]kill event|out of memory", re.IGNORECASE)
OOM_RSS_SHARE = 0.95  # a step whose largest resident size reached this share of its memory per node hit its limit
SACCT_ENDS = ("JobIDRaw", "ExitCode", "MaxRSS", "AllocTRES", "NNodes")  # the fields `sacct_ends` reads, in order
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.ASCII)
_UNITS = {"": 1 / 2**20, "K": 1 / 2**10, "M": 1.0, "G": 2.0**10, "T": 2.0**20, "P": 2.0**30}  # to MiB


def sacct_as_squeue(job: dict) -> dict:
    """An `sacct --json` job record (Slurm 22.05) with squeue's field names, so `from_squeue` reads both alike."""
    times, required = job.get("time") or {}, job.get("required") or {}
    memory, cpus = required.get("memory"), required.get("CPUs")
    per_cpu = isinstance(memory, int) and memory >= 2**63  # Slurm's MEM_PER_CPU flag bit
    requested = (job.get("tres") or {}).get("requested") or []
    tres = ",".join(f"{t.get('type')}{'/' + t['name'] if t.get('name') else ''}={t.get('count')}"
                    for t in requested if isinstance(t, dict))
    state = (job.get("state") or {}).get("current")
    return {"job_id": job.get("job_id"), "job_state": state, "user_name": job.get("user"),
            "account": job.get("account"), "partition": job.get("partition"), "qos": job.get("qos"),
            "name": job.get("name"), "current_working_directory": job.get("working_directory"),
            "cpus": cpus, "node_count": job.get("allocation_nodes"),
            "memory_per_cpu" if per_cpu else "memory_per_node": memory - 2**63 if per_cpu else memory,
            "time_limit": times.get("limit"), "submit_time": times.get("submission"),
            "start_time": times.get("start"), "end_time": times.get("end"), "tres_req_str": tres}


def _mib(text: str) -> float | None:
    """A size as sacct prints it (`201304K`, `100M`, `1.5G`) in MiB; None when there is none."""
    found = _SIZE.match(text.strip())
    return float(found.group(1)) * _UNITS[found.group(2)] if found else None


@dataclass
class SacctEnd:
    """How a job ended, by accounting: its exit code, the signal that killed it, and the largest share of its
    memory limit (per node) that any of its steps reached."""

    exit_code: int | None = None
    signal: int | None = None
    rss_share: float | None = None


def exit_status(text: str) -> tuple[int | None, int | None]:
    """(exit code, signal) of Slurm's `CODE:SIGNAL` (`0:9` is code 0, killed by signal 9; signal None when 0)."""
    code, _, signal = text.strip().partition(":")
    return (int(code) if ascii_digits(code) else None), (int(signal) if ascii_digits(signal) and int(signal) else None)


def sacct_ends(parsable: str) -> dict[int, SacctEnd]:
    """Job id -> how it ended, from `sacct -P -n -o JobIDRaw,ExitCode,MaxRSS,AllocTRES,NNodes` (the job's line and
    its steps' lines: `5`, `5.batch`, `5.0`). A line that cannot be read is skipped."""
    ends: dict[int, SacctEnd] = {}
    for line in parsable.splitlines():
        fields = line.split("|")
        if len(fields) < 2:
            continue
        job, _, step = fields[0].partition(".")
        if not ascii_digits(job):
            continue
        end = ends.setdefault(int(job), SacctEnd())
        if not step:
            end.exit_code, end.signal = exit_status(fields[1])
            continue
        rss = _mib(fields[2]) if len(fields) > 2 else None
        tres = dict(part.split("=", 1) for part in (fields[3] if len(fields) > 3 else "").split(",") if "=" in part)
        limit = _mib(tres.get("mem", ""))
        nodes = int(fields[4]) if len(fields) > 4 and ascii_digits(fields[4]) and int(fields[4]) > 0 else 1
        if rss is not None and limit:
            end.rss_share = max(end.rss_share or 0.0, rss / (limit / nodes))
    return ends


def memory_killed(text: str) -> bool:
    """Whether a job's error output holds Slurm's words for a job killed for memory."""
    return MEMORY_KILLED.search(text) is not None


def end_state(state: str | None, signal: int | None, rss_share: float | None = None, message: bool = False) -> str | None:
    """The job's end state, OUT_OF_MEMORY for a job that Slurm reports FAILED (or CANCELLED) killed by signal 9
    when its memory reached its limit (`rss_share` at least OOM_RSS_SHARE) or Slurm said so (`message`): with
    jobacct_gather's OverMemoryKill, Slurm reports such a job `FAILED 0:9` and names no memory."""
    hit = message or (rss_share is not None and rss_share >= OOM_RSS_SHARE)
    return "OUT_OF_MEMORY" if state in ("FAILED", "CANCELLED") and signal == 9 and hit else state
