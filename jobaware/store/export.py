"""A job store's records as a file a capability's ingest reads: `from_store` writes them, `read_export` reads them
back record by record, and `to_utc` gives a record's times in UTC. The capabilities that train on a site's own jobs
map these records onto their tables (each slice keeps only its mapping and its rules).

An export is JSON Lines (`EXPORT_SUFFIX`): a first line naming the store, then one job a line in the store's order
(submit time, cluster, job id), each a record as `JobStore.records` gives it (key, row, states, final state, usage)
without its batch script. A record's place in that order is its `line` (1 for the first job).

Times: the row keeps the collector's local wall clock (epoch seconds of it: `jobaware.failure.reader.slurm`'s
`from_squeue`); the key keeps the true submit time. Each job's submit gives its UTC offset exactly. When this
process's time zone (`tzlocal`: TZ, else the system's) gives the same offset at that submit, the row's other times go
back to UTC by that zone's rules (exact across a daylight saving change) and the job's zone is the zone's name;
otherwise (read away from the site, without TZ set to its zone) they take the submit's offset, a fixed one (off by
the change for a job that spans one) that the job's zone names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.reading import Problem
from jobaware.text import redacted

EXPORT_SUFFIX = ".store.jsonl"
EPOCH_MAX = 4_102_444_800  # 2100-01-01
JOB_ID_MAX = 2**53 - 1
TEXT_MAX = 4_096
DAY = 86_400
EPOCH = "epoch seconds between 1970 and 2100"
ENDS = {"COMPLETED": "COMPLETED", "CANCELLED": "CANCELLED"}  # any other final state: FAILED


def from_store(uri: str, out_dir: Path) -> str:
    """The records of the store at `uri` as an export in `out_dir` (`read_export` reads it); its path."""
    from jobaware.outputs import atomic_text
    from jobaware.store import open_store

    out = Path(out_dir) / "store" / f"jobs{EXPORT_SUFFIX}"
    with open_store(uri) as store, atomic_text(out) as file:
        file.write(json.dumps({"store": redacted(uri)}) + "\n")  # a name for messages: never its password
        for record in store.records():
            record.pop("script", None)
            file.write(json.dumps(record, default=str) + "\n")
    return str(out)


def is_export(path: str | Path) -> bool:
    return str(path).lower().endswith(EXPORT_SUFFIX)


# ---------------------------------------------------------------- checking a record's fields
class BadRecord(ValueError):
    """A record's field that cannot be read: the field, why, and the value."""

    def __init__(self, field: str, reason: str, value):
        super().__init__(reason)
        self.field, self.reason, self.value = field, reason, value


def integer(value, field: str, low: int, high: int, what: str) -> int | None:
    """A whole number in [low, high] (None stays None); BadRecord naming `what` was expected otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value != int(value) or not low <= value <= high:
        raise BadRecord(field, f"expected {what}", value)
    return int(value)


def number(value, field: str, high: float, what: str) -> float | None:
    """A number in [0, high] (None stays None); BadRecord naming `what` was expected otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 <= value <= high:
        raise BadRecord(field, f"expected {what}", value)
    return float(value)


def text(value, field: str) -> str | None:
    """A text of at most TEXT_MAX characters ('' and None: unknown)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > TEXT_MAX:
        raise BadRecord(field, f"expected a text of at most {TEXT_MAX:,} characters", value)
    return value


KEY_FACTS = ("cluster", "job_id", "submit", "row_submit", "final", "run_time", "seen_running")


def key_facts(record) -> dict:
    """What every mapping reads first, checked: the key (`cluster`, `job_id`, `submit`: the key's UTC submit),
    `row_submit` (the row's, on the collector's wall clock), `final` (the final state, None while open), and what
    `never_started` reads besides: `run_time` (the row's, None unless a number) and `seen_running`; the row and the
    state changes are checked to be an object and a list of objects."""
    if not isinstance(record, dict):
        raise BadRecord("*", "expected a job record (an object)", record)
    row, final = record.get("row"), record.get("final")
    if not isinstance(row, dict) or not row:
        raise BadRecord("row", "expected the job's row (what the collector saw of its request)", row)
    if final is not None and not (isinstance(final, dict) and isinstance(final.get("state"), str)):
        raise BadRecord("final", "expected a final state", final)
    states = record.get("states") or []
    if not isinstance(states, list) or not all(isinstance(s, dict) for s in states):
        raise BadRecord("states", "expected a list of state changes", states)
    cluster = text(record.get("cluster"), "cluster")
    job_id = integer(record.get("job_id"), "job_id", 0, JOB_ID_MAX, "a job id")
    submit = integer(record.get("submit_time"), "submit_time", 1, EPOCH_MAX, EPOCH)
    row_submit = integer(row.get("submit_time"), "row.submit_time", 1, EPOCH_MAX + DAY, EPOCH)
    for name, value in (("cluster", cluster), ("job_id", job_id), ("submit_time", submit)):
        if value is None:
            raise BadRecord(name, "expected the job's key (cluster, job id and submit time)", record.get(name))
    if row_submit is None or abs(row_submit - submit) > DAY:
        raise BadRecord("row.submit_time", "expected the key's submit time on the collector's wall clock", row_submit)
    return {"cluster": cluster, "job_id": job_id, "submit": submit, "row_submit": row_submit,
            "final": final["state"] if final else None, "run_time": row_run_time(row), "seen_running": seen_running(record)}


def row_run_time(row: dict) -> float | None:
    """The row's run time (Slurm's end minus start, seconds) where it is a finite number; None otherwise (it is only
    evidence of whether the job ran: `never_started`)."""
    run = row.get("run_time")
    return float(run) if isinstance(run, int | float) and not isinstance(run, bool) and math.isfinite(run) else None


def row_time(row: dict, field: str) -> int | None:
    """One of the row's times (epoch seconds of the collector's wall clock), checked."""
    return integer(row.get(field), field, 1, EPOCH_MAX + DAY, EPOCH)


# ---------------------------------------------------------------- reading an export back
@dataclass
class Export:
    """An export read back: the store, each kept record's facts (as a mapping's `facts` gave them) with the record
    and its line, and the problems and quarantined records of the ones that could not be read."""

    uri: str
    facts: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    quarantined: list[dict] = field(default_factory=list)

    def reject(self, record, line: int, field: str, reason: str, value) -> None:
        """Quarantine a record (with its store, job key and the reason)."""
        self.problems.append(problem(self.uri, record, field, reason, value))
        self.quarantined.append({"file": self.uri, "line": line, "reason": f"{field}: {reason}", "record": record})


def problem(uri: str, record, field: str, reason: str, value) -> Problem:
    key = ":".join(str(record.get(k)) for k in ("cluster", "job_id", "submit_time")) if isinstance(record, dict) else "?"
    return Problem(f"{uri} job {key}", None, field, json.dumps(value, default=str)[:200], reason)


def read_export(path: str | Path, facts: Callable[[dict], dict]) -> Export:
    """Every record of an export through `facts` (a mapping's reading of one record, raising BadRecord for what it
    cannot read): the facts kept, in the store's order, and the records quarantined (not JSON, or BadRecord).
    InputError when the file is no export, or the store holds no jobs."""
    path = Path(path)
    with open(path, encoding="utf-8", errors="replace") as file:
        try:
            read = Export(json.loads(file.readline())["store"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError(f"{path}: not a job store's export (its first line names the store)") from None
        for line, text_ in enumerate(file, start=1):
            try:
                record = json.loads(text_)
            except (json.JSONDecodeError, RecursionError) as exc:
                read.problems.append(Problem(f"{read.uri} record {line}", None, "*", text_[:200], f"not JSON ({exc})"))
                read.quarantined.append({"file": read.uri, "line": line, "reason": "not JSON", "text": text_[:65_536]})
                continue
            try:
                read.facts.append(facts(record))
            except BadRecord as bad:
                read.reject(record, line, bad.field, bad.reason, bad.value)
                continue
            read.records.append(record)
            read.lines.append(line)
    if not read.facts and not read.quarantined:
        raise InputError(f"{read.uri}: the job store holds no jobs")
    return read


# ---------------------------------------------------------------- times in UTC, and what the end states say
def site_zone():
    """This process's time zone (`tzlocal`: TZ, else the system's); UTC when it cannot be told."""
    from zoneinfo import ZoneInfo

    import tzlocal

    try:
        return tzlocal.get_localzone()
    except Exception:  # noqa: BLE001 - no zone configured: the collector's wall clock was UTC too
        return ZoneInfo("UTC")


def _offsets(utc: np.ndarray, zone) -> np.ndarray:
    """Seconds the zone's wall clock is ahead of UTC at each epoch second."""
    moments = pd.Series(pd.to_datetime(utc, unit="s", utc=True))
    return ((moments.dt.tz_convert(zone).dt.tz_localize(None) - moments.dt.tz_localize(None))
            .dt.total_seconds().to_numpy())


def numbers(facts: pd.DataFrame, column: str) -> np.ndarray:
    """A column of facts as floats (None: NaN)."""
    return pd.to_numeric(facts[column], errors="coerce").to_numpy(float)


def to_utc(facts: pd.DataFrame, zone, columns: tuple[str, ...] = ("start", "end")) -> tuple[dict[str, np.ndarray],
                                                                                            np.ndarray]:
    """The row's times in `columns` (the collector's wall clock) back to UTC epoch seconds (NaN: unknown), by each
    job's `submit` and `row_submit` (the module's docstring; a row without its submit: the zone's rules), and each
    job's zone (a name, or a fixed offset)."""
    submit = numbers(facts, "submit")
    offset = numbers(facts, "row_submit") - submit
    offset = np.where(np.isnan(offset), _offsets(submit, zone), offset)  # a row without its submit: the zone's
    zoned = _offsets(submit, zone) == offset
    times = {}
    for column in columns:
        local = numbers(facts, column)
        known = np.isfinite(local)
        guess = np.where(known, local - offset, 0.0)
        for _ in range(2):  # the zone's offset where the wall clock points: the same as the submit's but across a change
            guess = np.where(known, local - _offsets(guess, zone), 0.0)
        times[column] = np.where(known, np.where(zoned, guess, local - offset), np.nan)
    zones = np.full(len(facts), getattr(zone, "key", None) or str(zone), dtype=object)
    fixed = {o: "UTC" if o == 0 else str(timezone(timedelta(seconds=int(o)))) for o in np.unique(offset[~zoned])}
    zones[~zoned] = [fixed[o] for o in offset[~zoned]]
    return times, zones


def seen_running(record: dict) -> bool:
    """Whether the collector saw a store record's job RUNNING (one of its state changes)."""
    return any(isinstance(change, dict) and change.get("state") == "RUNNING" for change in record.get("states") or [])


def never_started(final, start, end, run_time, seen=None) -> np.ndarray:
    """Which jobs ended without ever starting, from each job's final state (None: still open), start, end and run time
    (seconds, NaN: unknown) and, where known, whether each was `seen` RUNNING (None: not known, as none was).

    Such a job was CANCELLED (or ended DEADLINE: Slurm ends a pending job whose --deadline can no longer be met), was
    never seen running, has no positive run time, and has no start, or none before its end, or a run time of 0: it
    was cancelled while pending, or held and then cancelled. Slurm's accounting gives it
    no start; squeue gives its cancel time as both its start and its end (start == end, a run time of 0). A job seen
    running started, even if it was cancelled within the second it started. Any other end (COMPLETED, FAILED,
    TIMEOUT, ...) came after a start, known or not: a trace that gives no start (SWF's wait of -1) does not say that
    the job never ran. An open job has not ended: it may start yet."""
    cancelled = pd.Series(final, dtype=object).isin(("CANCELLED", "DEADLINE")).to_numpy(bool)
    start, end, run = (np.asarray(values, float) for values in (start, end, run_time))
    seen = np.zeros(len(cancelled), bool) if seen is None else np.asarray(seen, bool)
    with np.errstate(invalid="ignore"):  # NaN compares False: an unknown end or run time says nothing
        no_start = np.isnan(start) | (start >= end) | (run == 0)
    return cancelled & ~seen & ~(run > 0) & no_start


def statuses(final: pd.Series) -> pd.Series:
    """Final states as the traces' three: COMPLETED, CANCELLED, or FAILED for any other end (FAILED, TIMEOUT,
    OUT_OF_MEMORY, NODE_FAIL, ...); unknown while a job is open."""
    return final.map(lambda s: ENDS.get(s, "FAILED"), na_action="ignore")
