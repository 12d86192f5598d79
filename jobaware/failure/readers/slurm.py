"""Live Slurm records: `squeue --json` (Slurm 22.05, later versions' wrapped numbers too) and request records.

Both map onto the canonical job table, so the feature code that serves training serves live jobs.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pandas as pd

from jobaware.errors import InputError
from jobaware.failure.readers.common import canonical_frame
from jobaware.reading import abbreviated
from jobaware.failure.schema import (COLUMNS, EPOCH_RANGE, INTEGER, LIMITS, NUMERIC, STATES, TIME_COLUMNS,
                                     max_text, normalize_state, number_problem)

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


def _epoch(field: str, value) -> pd.Timestamp | None:
    value = _number(value)
    if value in (None, 0):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not EPOCH_RANGE[0] <= value <= EPOCH_RANGE[1]:
        raise FieldError(field, "epoch seconds between 1970 and 2100", value)
    local = datetime.fromtimestamp(int(value)).astimezone()
    return pd.Timestamp(local.replace(tzinfo=None))


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


def from_squeue(record: dict) -> dict:
    """One `squeue --json` job record as a canonical row; FieldError names a field that cannot be read."""
    cpus = _checked("cpus", record.get("cpus"), "processors_req")
    per_node = _checked("memory_per_node", record.get("memory_per_node"), "mem_req")
    per_cpu = _checked("memory_per_cpu", record.get("memory_per_cpu"), "mem_req")
    mem = float(per_node) if per_node else (float(per_cpu) * cpus if per_cpu and cpus else 0.0)
    if number_problem("mem_req", mem):
        raise FieldError("memory_per_cpu", f"at most {LIMITS['mem_req'][1]:,} MB in all (times cpus)", per_cpu)
    limit = _checked("time_limit", record.get("time_limit"), "wallclock_req")
    if limit is not None and number_problem("wallclock_req", limit * 60.0):
        raise FieldError("time_limit", f"at most {LIMITS['wallclock_req'][1] // 60:,} minutes", limit)
    state = _state(record.get("job_state"))
    gpus = _GPU.search(" ".join(str(record.get(k) or "")[:4096] for k in ("tres_per_node", "tres_per_job", "tres_req_str")))
    gpus_req = int(gpus.group(1)) if gpus else 0
    if number_problem("gpus_req", gpus_req):
        raise FieldError("tres_req_str", f"at most {LIMITS['gpus_req'][1]:,} GPUs", gpus.group(0))
    start, end = _epoch("start_time", record.get("start_time")), _epoch("end_time", record.get("end_time"))
    ended = state not in (None, "PENDING", "RUNNING", "SUSPENDED")
    return {
        "job_id": _checked("job_id", record.get("job_id"), "job_id"),
        "user": _text(record, "user_name", "user"),
        "account": _text(record, "account", "account"),
        "partition": _text(record, "partition", "partition"),
        "qos": _text(record, "qos", "qos"),
        "wallclock_req": None if limit is None else float(limit) * 60.0,
        "nodes_req": _checked("node_count", record.get("node_count"), "nodes_req"),
        "processors_req": cpus,
        "gpus_req": gpus_req,
        "mem_req": mem,
        "submit_time": _epoch("submit_time", record.get("submit_time")),
        "start_time": start if ended or state == "RUNNING" else None,
        "end_time": end if ended else None,
        "run_time": (end - start).total_seconds() if ended and start is not None and end is not None else None,
        "state": state,
        "name": _text(record, "name", "name"),
        "work_dir": _text(record, "current_working_directory", "work_dir"),
        "submit_line": _text(record, "command", "submit_line"),
    }


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
    return canonical_frame(rows), quarantined, problems


def _field_error(where: str, field: str, expected: str, value) -> InputError:
    return InputError(f"{where}.{field}: expected {expected}, got {_shown(value)}")


_TIME = "a time 'YYYY-MM-DD HH:MM:SS' or epoch milliseconds, between 1970 and 2100"


def _canonical_value(where: str, field: str, value):
    if value is None or value == "":
        return None
    if field in TIME_COLUMNS:
        if isinstance(value, bool) or not isinstance(value, int | float | str) or len(str(value)) > 64:
            raise _field_error(where, field, _TIME, value)
        try:
            if isinstance(value, str):
                time = pd.Timestamp(value).tz_localize(None)
            elif not EPOCH_RANGE[0] * 1000 <= value <= EPOCH_RANGE[1] * 1000:
                raise ValueError("outside the range")
            else:
                time = pd.Timestamp(int(value), unit="ms")
        except (ValueError, OverflowError, TypeError):
            raise _field_error(where, field, _TIME, value) from None
        if not pd.Timestamp(EPOCH_RANGE[0], unit="s") <= time <= pd.Timestamp(EPOCH_RANGE[1], unit="s"):
            raise _field_error(where, field, _TIME, value)
        return time
    if field in NUMERIC or field in INTEGER:
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


def parse_request_jobs(jobs) -> pd.DataFrame:
    """Validate request records (canonical or squeue) into a canonical table; errors name the bad field."""
    if not isinstance(jobs, list) or not jobs:
        raise InputError("jobs: expected a non-empty list of job records")
    rows = []
    now = pd.Timestamp.now().floor("s")
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
            unknown = sorted(set(record) - set(COLUMNS))
            if unknown:
                raise InputError(f"{where}.{unknown[0]}: unknown field; expected canonical fields ({', '.join(COLUMNS)}) or an squeue --json record")
            row = {f: _canonical_value(where, f, record.get(f)) for f in COLUMNS}
        if row["job_id"] is None:
            raise InputError(f"{where}.job_id: missing")
        row["submit_time"] = row["submit_time"] or now
        rows.append(row)
    return canonical_frame(rows)
