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
from jobaware.failure.readers.common import to_canonical_dtypes
from jobaware.failure.schema import COLUMNS, INTEGER, NUMERIC, STATES, TIME_COLUMNS, normalize_state

SQUEUE_KEYS = {"job_state", "user_name", "time_limit", "tres_req_str"}
_GPU = re.compile(r"gres[/:]gpu(?::[^=,:]+)?[=:](\d+)")


def is_squeue_record(record: dict) -> bool:
    return bool(SQUEUE_KEYS & set(record))


def _number(value):
    """Slurm >= 23.02 wraps numbers as {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value


def _epoch(value) -> pd.Timestamp | None:
    value = _number(value)
    if value in (None, 0):
        return None
    local = datetime.fromtimestamp(int(value)).astimezone()
    return pd.Timestamp(local.replace(tzinfo=None))


def from_squeue(record: dict) -> dict:
    """One `squeue --json` job record as a canonical row."""
    cpus = _number(record.get("cpus"))
    per_node, per_cpu = _number(record.get("memory_per_node")), _number(record.get("memory_per_cpu"))
    mem = per_node if per_node else (per_cpu * cpus if per_cpu and cpus else 0.0)
    limit = _number(record.get("time_limit"))
    state = record.get("job_state")
    state = state[0] if isinstance(state, list) and state else state
    gpus = _GPU.search(" ".join(str(record.get(k) or "") for k in ("tres_per_node", "tres_per_job", "tres_req_str")))
    start, end = _epoch(record.get("start_time")), _epoch(record.get("end_time"))
    ended = normalize_state(state) not in (None, "PENDING", "RUNNING", "SUSPENDED")
    return {
        "job_id": _number(record.get("job_id")),
        "user": record.get("user_name") or None,
        "account": record.get("account") or None,
        "partition": record.get("partition") or None,
        "qos": record.get("qos") or None,
        "wallclock_req": None if limit is None else float(limit) * 60.0,
        "nodes_req": _number(record.get("node_count")),
        "processors_req": cpus,
        "gpus_req": int(gpus.group(1)) if gpus else 0,
        "mem_req": float(mem),
        "submit_time": _epoch(record.get("submit_time")),
        "start_time": start if ended or normalize_state(state) == "RUNNING" else None,
        "end_time": end if ended else None,
        "run_time": (end - start).total_seconds() if ended and start is not None and end is not None else None,
        "state": normalize_state(state),
        "name": record.get("name") or None,
        "work_dir": record.get("current_working_directory") or None,
        "submit_line": record.get("command") or None,
    }


def read_squeue_json(path: str | Path) -> pd.DataFrame:
    """Canonical table from a file holding `squeue --json` output."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not readable squeue --json output ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise InputError(f"{path}: expected squeue --json output, an object with a 'jobs' list")
    return to_canonical_dtypes(pd.DataFrame([from_squeue(j) for j in data["jobs"]], columns=list(COLUMNS)))


def _field_error(where: str, field: str, expected: str, value) -> InputError:
    return InputError(f"{where}.{field}: expected {expected}, got {json.dumps(value, default=str)}")


def _canonical_value(where: str, field: str, value):
    if value is None or value == "":
        return None
    if field in TIME_COLUMNS:
        if isinstance(value, bool):
            raise _field_error(where, field, "a time 'YYYY-MM-DD HH:MM:SS' or epoch milliseconds", value)
        if isinstance(value, int | float):
            return pd.Timestamp(int(value), unit="ms")
        try:
            return pd.Timestamp(str(value)).tz_localize(None)
        except ValueError:
            raise _field_error(where, field, "a time 'YYYY-MM-DD HH:MM:SS' or epoch milliseconds", value) from None
    if field in NUMERIC or field in INTEGER:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _field_error(where, field, "a number", value)
        if value < 0:
            raise _field_error(where, field, "a non-negative number", value)
        if field in INTEGER and value != int(value):
            raise _field_error(where, field, "a whole number", value)
        return value
    if field == "state":
        state = normalize_state(str(value))
        if state not in STATES:
            raise _field_error(where, field, f"one of {', '.join(STATES)}", value)
        return state
    if not isinstance(value, str | int):
        raise _field_error(where, field, "a string", value)
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
            except (TypeError, ValueError) as exc:
                raise InputError(f"{where}: not a valid squeue --json job record ({exc})") from None
        else:
            unknown = sorted(set(record) - set(COLUMNS))
            if unknown:
                raise InputError(f"{where}.{unknown[0]}: unknown field; expected canonical fields ({', '.join(COLUMNS)}) or an squeue --json record")
            row = {f: _canonical_value(where, f, record.get(f)) for f in COLUMNS}
        if row["job_id"] is None:
            raise InputError(f"{where}.job_id: missing")
        if not isinstance(row["job_id"], int | float) or isinstance(row["job_id"], bool):
            raise _field_error(where, "job_id", "a whole number", row["job_id"])
        row["submit_time"] = row["submit_time"] or now
        rows.append(row)
    return to_canonical_dtypes(pd.DataFrame(rows, columns=list(COLUMNS)))
