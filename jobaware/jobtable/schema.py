"""The canonical Slurm job table (the NREL Eagle columns): what every reader of Slurm job records maps onto (Eagle's
published files, SWF traces, live `squeue`/`sacct` records), and the bounds every value is checked against."""

from __future__ import annotations

import pyarrow as pa

TIME_COLUMNS = ("submit_time", "start_time", "end_time")

CANONICAL = pa.schema(
    [
        ("job_id", pa.int64()),
        ("user", pa.string()),
        ("account", pa.string()),
        ("partition", pa.string()),
        ("qos", pa.string()),
        ("wallclock_req", pa.float64()),
        ("nodes_req", pa.int64()),
        ("processors_req", pa.int64()),
        ("gpus_req", pa.int64()),
        ("mem_req", pa.float64()),
        ("submit_time", pa.timestamp("s")),
        ("start_time", pa.timestamp("s")),
        ("end_time", pa.timestamp("s")),
        ("run_time", pa.float64()),
        ("state", pa.string()),
        ("name", pa.string()),
        ("work_dir", pa.string()),
        ("submit_line", pa.string()),
    ]
)
COLUMNS = tuple(CANONICAL.names)
NUMERIC = ("wallclock_req", "nodes_req", "processors_req", "gpus_req", "mem_req", "run_time")
INTEGER = ("job_id", "nodes_req", "processors_req", "gpus_req")

# The one place for what a value may be, used by every reader, the squeue mapping and the service alike.
# Numbers: finite and within [low, high] (beyond any real cluster, within int64 and float64 exactness).
_CENTURY = 100 * 365 * 86_400
LIMITS = {
    "job_id": (0, 2**53 - 1),
    "wallclock_req": (0, _CENTURY),     # seconds
    "nodes_req": (0, 10**7),
    "processors_req": (0, 10**9),
    "gpus_req": (0, 10**7),
    "mem_req": (0, 10**12),             # MB: an exabyte
    "run_time": (0, _CENTURY),          # seconds
}
EPOCH_RANGE = (0, 4_102_444_800)        # seconds: 1970-01-01 to 2100-01-01, the times a job may carry
MAX_TEXT = {"submit_line": 65_536}      # characters of a string field; the others take at most DEFAULT_MAX_TEXT
DEFAULT_MAX_TEXT = 4_096


def max_text(column: str) -> int:
    return MAX_TEXT.get(column, DEFAULT_MAX_TEXT)


def number_problem(column: str, value: int | float) -> str | None:
    """What `column`'s value should have been, when `value` is not it (None when it is)."""
    import math

    low, high = LIMITS[column]
    if isinstance(value, float) and not math.isfinite(value):
        return "a finite number"
    if value < low:
        return "a non-negative number" if low == 0 else f"at least {low:,}"
    if value > high:
        return f"at most {high:,}"
    if column in INTEGER and value != int(value):
        return "a whole number"
    return None


# Slurm's job states the table may hold (end states, then those of a job still in the queue)
STATES = ("COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "CANCELLED", "PREEMPTED", "REQUEUED",
          "BOOT_FAIL", "DEADLINE", "REVOKED", "PENDING", "RUNNING", "SUSPENDED")
# States of a job that has not finished (Slurm's transient ones included): no outcome, no history yet.
UNFINISHED = ("PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING")


def normalize_state(raw: str | None) -> str | None:
    """`CANCELLED by 1234` -> `CANCELLED`; upper-case, no trailing `+`."""
    if raw is None:
        return None
    text = str(raw).strip().upper().rstrip("+")
    return text.split(" ")[0] if text else None


def normalize_states(states):
    """normalize_state over a pandas Series, computed once per distinct value."""
    import pandas as pd

    codes, uniques = pd.factorize(states)
    mapped = pd.array([normalize_state(u) for u in uniques] + [None], dtype="string")
    return pd.Series(mapped[codes], index=states.index)


# A time in a request: 'YYYY-MM-DD HH:MM:SS' (or with a 'T') of a calendar day from 1970 to 2099, or epoch
# milliseconds. February 29th only in leap years (those divisible by 4: 2000 is one, 2100 lies outside).
_YEAR = r"(?:19[7-9][0-9]|20[0-9][0-9])"
_LEAP_YEAR = r"(?:19(?:7[26]|8[048]|9[26])|20(?:[02468][048]|[13579][26]))"
_MONTH_DAY = r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
TIME_TEXT_PATTERN = (rf"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)[ T]"
                     r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$")
