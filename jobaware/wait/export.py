"""A site's own jobs for `wait`: the records of a job store (`jobaware.store`, filled by the Slurm collector) as
`queue_jobs` rows, so that `jobaware pipeline run wait --data STORE` trains on them.

`from_store` writes the store's records, without their batch scripts, as JSON Lines (`EXPORT_SUFFIX`): a first line
naming the store, then one job a line in the store's order (submit time, cluster, job id). The wait ingest reads
such a file with `read_export` (the pipeline runs both in its ingest step: one code path).

A record's fields (its row is what the collector kept of `squeue --json` and `sacct`):
  cluster, job_id   the store's key;  user  the row's user;  group  its account;  queue  its partition (SWF's
                    queue; SWF's partition stays unknown)
  processors_req    CPUs asked;  wallclock_req  the time limit (s);  mem_req  MB in all: accounting's memory per node
                    times its nodes, else the row's for a one-node job (a row cannot tell memory per node from memory
                    per CPU beyond that); unknown when none was stated
  submit_time       the key's (as Slurm gave it, UTC);  start_time, end_time  the row's, back to UTC (below)
  status            COMPLETED, CANCELLED, or FAILED for any other end (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL,
                    ...); unknown while the job is open
  line              the record's place in the store's order (1 for the first job)

What the queue held at each submit (the sweep of `jobaware.wait.features` rebuilds it from these rows):
  - a job that started: pending from its submit to its start, then running to its end; its wait trains and enters
    the histories at its start;
  - a job that ended without starting (cancelled while pending: no start, or none before its end, as in
    `jobaware.failure.history.never_started`): no wait, so never a training row nor in any history; pending from its
    submit until its end, as squeue showed it to anyone asking then. Unless it was held (its last pending reason one
    of `reader.HELD`: held by a person, waiting for a begin time or a dependency): such a job is never in the queue,
    as a live snapshot (`reader.squeue_body`) leaves held jobs out; its row keeps no end;
  - a job still open when the store was read, as of the latest moment the store knows (its newest state change,
    submit, start or end): a running one runs until then, a pending one (unless held) waits until then; its end is
    that moment and its status unknown. A running job's wait is known and trains; a pending one's is not yet. No
    job of the store was submitted after that moment, so what an open job does later changes no job's features.

Times: the row keeps the collector's local wall clock (epoch seconds of it); the key keeps the true submit time. Each
job's submit gives its UTC offset exactly. When this process's time zone (`tzlocal`: TZ, else the system's) gives
the same offset at that submit, the job's start and end go back to UTC by that zone's rules (exact across a daylight
saving change) and `timezone` is the zone's name; otherwise (trained away from the site, without TZ set to its zone)
they take the submit's offset, a fixed one (off by the change for a job that spans one) that `timezone` names.

A record that cannot be read (a field of the wrong type or out of bounds, a start before its submit or an end before
its start) is quarantined with its store, job and reason; so is a job id seen before on the same cluster (Slurm
reuses ids after a reset or a wrap): the earlier job is kept, as the trace readers keep a job number's first line.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.reading import Problem
from jobaware.wait.reader import HELD
from jobaware.wait.schema import CENTURY, COLUMNS, MAX_PROCS

EXPORT_SUFFIX = ".store.jsonl"
EPOCH_MAX = 4_102_444_800  # 2100-01-01
JOB_ID_MAX = 2**53 - 1
TEXT_MAX = 4_096
DAY = 86_400
ENDS = {"COMPLETED": "COMPLETED", "CANCELLED": "CANCELLED"}  # any other final state: FAILED


def from_store(uri: str, out_dir: Path) -> str:
    """The records of the store at `uri` as an export in `out_dir` (`read_export` reads it); its path."""
    from jobaware.store import open_store

    out = Path(out_dir) / "store" / f"jobs{EXPORT_SUFFIX}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open_store(uri) as store, open(out, "w") as file:
        file.write(json.dumps({"store": uri}) + "\n")
        for record in store.records():
            record.pop("script", None)
            file.write(json.dumps(record, default=str) + "\n")
    return str(out)


def is_export(path: str | Path) -> bool:
    return str(path).lower().endswith(EXPORT_SUFFIX)


# ---------------------------------------------------------------- reading an export
class BadRecord(ValueError):
    def __init__(self, field: str, reason: str, value):
        super().__init__(reason)
        self.field, self.reason, self.value = field, reason, value


def _integer(value, field: str, low: int, high: int, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value != int(value) or not low <= value <= high:
        raise BadRecord(field, f"expected {what}", value)
    return int(value)


def _number(value, field: str, high: float, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 <= value <= high:
        raise BadRecord(field, f"expected {what}", value)
    return float(value)


def _text(value, field: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > TEXT_MAX:
        raise BadRecord(field, f"expected a text of at most {TEXT_MAX:,} characters", value)
    return value


_EPOCH = "epoch seconds between 1970 and 2100"


FACTS = ("cluster", "job_id", "submit", "row_submit", "start", "end", "user", "group", "queue", "processors_req",
         "wallclock_req", "mem_req", "final", "held", "seen")


def _fields(record) -> dict:
    """One store record's facts, checked (times as stored: the key's UTC submit, the row's wall-clock times)."""
    if not isinstance(record, dict):
        raise BadRecord("*", "expected a job record (an object)", record)
    row, final, usage = record.get("row"), record.get("final"), record.get("usage")
    if not isinstance(row, dict) or not row:
        raise BadRecord("row", "expected the job's row (what the collector saw of its request)", row)
    if final is not None and not (isinstance(final, dict) and isinstance(final.get("state"), str)):
        raise BadRecord("final", "expected a final state", final)
    states = record.get("states") or []
    if not isinstance(states, list) or not all(isinstance(s, dict) for s in states):
        raise BadRecord("states", "expected a list of state changes", states)
    cluster = _text(record.get("cluster"), "cluster")
    job_id = _integer(record.get("job_id"), "job_id", 0, JOB_ID_MAX, "a job id")
    submit = _integer(record.get("submit_time"), "submit_time", 1, EPOCH_MAX, _EPOCH)
    row_submit = _integer(row.get("submit_time"), "row.submit_time", 1, EPOCH_MAX + DAY, _EPOCH)
    for name, value in (("cluster", cluster), ("job_id", job_id), ("submit_time", submit)):
        if value is None:
            raise BadRecord(name, "expected the job's key (cluster, job id and submit time)", record.get(name))
    if row_submit is None or abs(row_submit - submit) > DAY:
        raise BadRecord("row.submit_time", "expected the key's submit time on the collector's wall clock", row_submit)
    nodes = _integer(row.get("nodes_req"), "nodes_req", 0, MAX_PROCS, "a number of nodes")
    mem = _number(row.get("mem_req"), "mem_req", 1e12, "a memory size in MB")
    if isinstance(usage, dict) and usage.get("mem_req_mib") is not None:  # accounting's memory per node
        per_node = _number(usage.get("mem_req_mib"), "usage.mem_req_mib", 1e12, "a memory size in MB")
        mem = per_node * (_integer(usage.get("nodes"), "usage.nodes", 1, MAX_PROCS, "a number of nodes") or 1)
    elif nodes != 1:
        mem = None  # per node or per CPU: the row cannot tell
    seen = [_number(s.get("time"), "states.time", EPOCH_MAX, _EPOCH) for s in states]
    return {
        "cluster": cluster, "job_id": job_id, "submit": submit, "row_submit": row_submit,
        "start": _integer(row.get("start_time"), "start_time", 1, EPOCH_MAX + DAY, _EPOCH),
        "end": _integer(row.get("end_time"), "end_time", 1, EPOCH_MAX + DAY, _EPOCH),
        "user": _text(row.get("user"), "user"),
        "group": _text(row.get("account"), "account"),
        "queue": _text(row.get("partition"), "partition"),
        "processors_req": _integer(row.get("processors_req"), "processors_req", 1, MAX_PROCS, "at least 1 processor"),
        "wallclock_req": _number(row.get("wallclock_req"), "wallclock_req", CENTURY, "a time limit in seconds"),
        "mem_req": mem or None,  # 0: none stated
        "final": final["state"] if final else None,
        "held": row.get("reason") in HELD,
        "seen": max((t for t in seen if t is not None), default=None),
    }


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


def to_utc(facts: pd.DataFrame, zone) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Start and end back to UTC epoch seconds (NaN: unknown), and each job's `timezone` (the module's docstring)."""
    submit = _numbers(facts, "submit")
    offset = _numbers(facts, "row_submit") - submit
    zoned = _offsets(submit, zone) == offset
    times = {}
    for column in ("start", "end"):
        local = _numbers(facts, column)
        known = np.isfinite(local)
        guess = np.where(known, local - offset, 0.0)
        for _ in range(2):  # the zone's offset where the wall clock points: the same as the submit's but across a change
            guess = np.where(known, local - _offsets(guess, zone), 0.0)
        times[column] = np.where(known, np.where(zoned, guess, local - offset), np.nan)
    zones = np.full(len(facts), getattr(zone, "key", None) or str(zone), dtype=object)
    fixed = {o: "UTC" if o == 0 else str(timezone(timedelta(seconds=int(o)))) for o in np.unique(offset[~zoned])}
    zones[~zoned] = [fixed[o] for o in offset[~zoned]]
    return times, zones


def _numbers(facts: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(facts[column], errors="coerce").to_numpy(float)


def _problem(uri: str, record, field: str, reason: str, value) -> Problem:
    key = ":".join(str(record.get(k)) for k in ("cluster", "job_id", "submit_time")) if isinstance(record, dict) else "?"
    return Problem(f"{uri} job {key}", None, field, json.dumps(value, default=str)[:200], reason)


def read_export(path: str | Path) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A store's export as `queue_jobs` rows (in the store's order), its problems and quarantined records."""
    path = Path(path)
    problems: list[Problem] = []
    quarantined: list[dict] = []
    facts, records, lines = [], [], []
    with open(path, encoding="utf-8", errors="replace") as file:
        try:
            uri = json.loads(file.readline())["store"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError(f"{path}: not a job store's export (its first line names the store)") from None
        for number, text in enumerate(file, start=1):
            try:
                record = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                problems.append(Problem(f"{uri} record {number}", None, "*", text[:200], f"not JSON ({exc})"))
                quarantined.append({"file": uri, "line": number, "reason": "not JSON", "text": text[:65_536]})
                continue
            try:
                facts.append(_fields(record))
            except BadRecord as bad:
                problems.append(_problem(uri, record, bad.field, bad.reason, bad.value))
                quarantined.append({"file": uri, "line": number, "reason": f"{bad.field}: {bad.reason}",
                                    "record": record})
                continue
            records.append(record)
            lines.append(number)
    if not facts and not quarantined:
        raise InputError(f"{uri}: the job store holds no jobs")
    jobs, bad = queue_jobs(pd.DataFrame(facts, columns=list(FACTS)), lines, site_zone())
    for k, (field, reason) in sorted(bad.items()):
        value = records[k].get(field) if field == "job_id" else records[k]["row"].get(field)
        problems.append(_problem(uri, records[k], field, reason, value))
        quarantined.append({"file": uri, "line": lines[k], "reason": f"{field}: {reason}", "record": records[k]})
    return jobs, problems, quarantined


def queue_jobs(facts: pd.DataFrame, lines: list[int], zone) -> tuple[pd.DataFrame, dict[int, tuple[str, str]]]:
    """Checked facts (`FACTS`, in the store's order) as `queue_jobs` rows, and the positions of the ones that cannot
    be rows with the field and why (the module's docstring says what each row holds)."""
    if facts.empty:
        return pd.DataFrame(columns=list(COLUMNS)), {}
    times, zones = to_utc(facts, zone)
    submit, start, end = _numbers(facts, "submit"), times["start"], times["end"]
    final = facts["final"]
    cancelled = (final == "CANCELLED").to_numpy()
    never = final.notna().to_numpy() & (np.isnan(start) | (cancelled & (start >= end)))
    start = np.where(never, np.nan, start)
    bad: dict[int, tuple[str, str]] = {}
    for k in np.flatnonzero(start < submit):
        bad[int(k)] = ("start_time", "before its submit")
    for k in np.flatnonzero(end < np.where(np.isnan(start), submit, start)):
        bad.setdefault(int(k), ("end_time", "before its start" if np.isfinite(start[k]) else "before its submit"))
    keep = np.ones(len(facts), bool)
    keep[list(bad)] = False
    twice = facts.loc[keep, ["cluster", "job_id"]].duplicated().reindex(facts.index, fill_value=False).to_numpy()
    for k in np.flatnonzero(twice):
        bad[int(k)] = ("job_id", "seen before on this cluster (Slurm reused it after a reset or a wrap); the "
                                 "earlier job is kept")
    keep &= ~twice
    if not keep.any():
        return pd.DataFrame(columns=list(COLUMNS)), bad
    # the latest moment the store knows: an open job is running, or pending, until then
    as_of = np.ceil(np.nanmax(np.concatenate([_numbers(facts, "seen")[keep], submit[keep], start[keep],
                                              end[keep]])))
    is_open = final.isna().to_numpy()
    held = facts["held"].to_numpy(bool) & np.isnan(start)
    end = np.where(is_open & np.isnan(end), np.maximum(as_of, np.where(np.isnan(start), submit, start)), end)
    end = np.where(held, np.nan, end)  # held and never run: never in the queue
    utc = lambda seconds: pd.to_datetime(seconds, unit="s", utc=True)  # noqa: E731
    jobs = pd.DataFrame({
        "cluster": facts["cluster"],
        "cluster_procs": None,
        "timezone": zones,
        "job_id": facts["job_id"],
        "user": facts["user"],
        "group": facts["group"],
        "queue": facts["queue"],
        "partition": None,
        "processors_req": _numbers(facts, "processors_req"),
        "wallclock_req": _numbers(facts, "wallclock_req"),
        "mem_req": _numbers(facts, "mem_req"),
        "submit_time": utc(submit),
        "start_time": utc(start),
        "end_time": utc(end),
        "wait_s": start - submit,
        "run_s": np.where(is_open, np.nan, end - start),
        "status": final.map(lambda s: ENDS.get(s, "FAILED"), na_action="ignore"),
        "line": lines,
    })
    return jobs.loc[keep].reset_index(drop=True), bad
