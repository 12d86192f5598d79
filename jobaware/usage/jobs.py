"""`jobaware report jobs`: one row per finished job (an array as one row with the distribution of its tasks), its
time, CPU and memory efficiency and its end, beside what jobaware said before it ran.

Jobs are read from the job store by submit time over a period (the store's bounded query), newest first; the
filters (job and array ids, user, account, partition) are applied to what that returns. What was said before the
run is read from the cards an adapter kept among the job's predictions (`said`): every answered part of the
latest card, put beside what happened by the part's own `after` where its capability's card part declares one
(`after(part, facts) -> {"said", "happened", "right", "released_node_hours"} | None`), else shown as the part's
fields. HTCondor jobs (`source="htcondor"`) come from the follower's `htcondor.usage` stream, by end time (the
stream is read whole: it has no time index).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from jobaware.errors import UsageError
from jobaware.store import JobStore
from jobaware.usage.measures import FAILED, TIMED_OUT, efficiencies, measured

USAGE_STREAM = "htcondor.usage"  # where the HTCondor follower keeps terminated jobs' use
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([mhdw])$")
_UNITS = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_NUMBER = re.compile(r"\d{1,7}(?:\.\d+)?")  # a bare number (8 digits are a date: 20260131)
_JOB = re.compile(r"^(\d+)(?:_(\d+))?$")
EFFICIENCIES = ("time_eff", "cpu_eff", "mem_eff")
SKIPPED_FIELDS = {"status", "reason", "model_version"}  # a part's fields not shown as what it said


def moment(text: str, now: float, name: str) -> float | None:
    """A point in time: `7d`, `12h`, `30m`, `2w` ago, `now`, a date `2026-01-31` or a local time
    `2026-01-31T08:00[:00]`; `all` (None: no bound). A usage error naming `name` otherwise."""
    text = text.strip()
    if text == "all":
        return None
    if text == "now":
        return now
    ago = _AGO.match(text)
    if ago:
        return now - float(ago.group(1)) * _UNITS[ago.group(2)]
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        if _NUMBER.fullmatch(text):  # days to one command, hours to another: never guessed
            raise UsageError(f"{name} {text!r}: a time ago needs its unit: {text}d (days), {text}h, {text}m or "
                             f"{text}w") from None
        raise UsageError(f"{name} {text!r}: expected a time ago (7d, 12h, 30m, 2w), a date (2026-01-31), a local time "
                         "(2026-01-31T08:00), now or all") from None


def job_ids(texts: list[str]) -> list[tuple[int, int | None]]:
    """`123` (a job, or an array as a whole) and `123_4` (an array's task) as (id, task or None)."""
    ids = []
    for text in texts:
        for part in text.split(","):
            found = _JOB.match(part.strip())
            if not found:
                raise UsageError(f"--job {part!r}: expected a job id (123) or an array task (123_4)")
            ids.append((int(found.group(1)), int(found.group(2)) if found.group(2) else None))
    return ids


@dataclass
class Filters:
    """What `report jobs` lists: jobs submitted in [since, until) (None: unbounded) of `cluster` (None: every one),
    and where given, only these jobs (`job_ids`), arrays, users, accounts and partitions."""

    since: float | None = None
    until: float | None = None
    cluster: str | None = None
    jobs: list[tuple[int, int | None]] = field(default_factory=list)
    arrays: set[int] = field(default_factory=set)
    users: set[str] = field(default_factory=set)
    accounts: set[str] = field(default_factory=set)
    partitions: set[str] = field(default_factory=set)

    def keeps(self, facts: dict) -> bool:
        if self.users and facts.get("user") not in self.users:
            return False
        if self.accounts and facts.get("account") not in self.accounts:
            return False
        if self.partitions and facts.get("partition") not in self.partitions:
            return False
        array, task = facts.get("array_job_id"), facts.get("array_task_id")
        if self.arrays and array not in self.arrays:
            return False
        if self.jobs:
            return any((wanted is None and job == facts["job_id"]) or (job == array and wanted in (None, task))
                       for job, wanted in self.jobs)
        return True

    def grouped(self, facts: dict) -> bool:
        """Whether the job is shown within its array's row: an array's task, unless the job ids asked for name it
        alone (`123_4`, or its own id where that is not the array's)."""
        array = facts.get("array_job_id")
        return array is not None and (not self.jobs or any(job == array and task is None for job, task in self.jobs))


# ---------------------------------------------------------------- what happened
def facts(record: dict) -> dict:
    """What happened to a job of the store: its usage dict (accounting's word) with the final state and the times
    of its record; the record's own row where accounting said nothing (`accounted` False)."""
    row, usage, final = record.get("row") or {}, record.get("usage") or {}, record.get("final") or {}

    def first(*values):
        return next((v for v in values if v is not None), None)

    submit, start = record["submit_time"], row.get("start_time")
    return measured({
        "job_id": record["job_id"], "cluster": record["cluster"], "name": row.get("name"), "user": row.get("user"),
        "account": row.get("account"), "partition": row.get("partition"),
        "array_job_id": usage.get("array_job_id"), "array_task_id": usage.get("array_task_id"),
        "state": first(final.get("state"), row.get("state")), "exit_code": first(final.get("exit_code"),
                                                                                 usage.get("exit_code")),
        "signal": first(final.get("signal"), usage.get("signal")),
        "submit_time": submit, "start_time": start, "end_time": row.get("end_time"),
        "wait_s": start - submit if isinstance(start, int | float) and start >= submit else None,
        "elapsed_s": first(usage.get("elapsed_s"), row.get("run_time")),
        "time_limit_s": first(usage.get("time_limit_s"), row.get("wallclock_req")),
        "cpus": first(usage.get("cpus"), row.get("processors_req")), "cpu_time_s": usage.get("cpu_time_s"),
        "mem_req_mib": first(usage.get("mem_req_mib"), row.get("mem_req") or None),
        "mem_used_mib": usage.get("mem_used_mib"), "mem_step": usage.get("mem_step"),
        "nodes": first(usage.get("nodes"), row.get("nodes_req")), "gpus": usage.get("gpus"),
        "accounted": bool(usage),
    })


def condor_facts(record: dict) -> dict:
    """What happened to an HTCondor job, from the follower's usage record."""
    usage = record["usage"]
    return measured({**usage, "job_id": record["cluster"], "job": f"{record['cluster']}.{record['proc']}",
            "cluster": "htcondor", "name": None, "user": None, "account": None, "partition": None,
            "array_job_id": None, "array_task_id": None, "submit_time": None, "start_time": None,
            "end_time": record["end_time"], "accounted": True})


# ---------------------------------------------------------------- what was said before
def latest_card(predictions: dict[str, dict]) -> dict | None:
    """The newest card an adapter kept among a job's predictions (an answer holding `card`)."""
    cards = [answer["card"] for answer in predictions.values()
             if isinstance(answer, dict) and isinstance(answer.get("card"), dict)]
    return max(cards, key=lambda card: card.get("created") or 0, default=None)


class Afters:
    """The `after` each capability's card part declares (None where it declares none), looked up once per key:
    the registry is read once per report, not once per job."""

    def __init__(self):
        self.found: dict = {}

    def __call__(self, key: str):
        if key not in self.found:
            from jobaware import capabilities

            card = getattr(capabilities.registry().get(key), "card", None)
            self.found[key] = getattr(card, "after", None)
        return self.found[key]


def _shown(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def said(predictions: dict[str, dict], happened: dict, afters: Afters | None = None) -> list[dict]:
    """What each answered part of the job's latest card said before the run, beside what happened where the part
    can tell (`right`: whether it came true; None: not a yes-or-no); `[]` without a card."""
    afters = afters or Afters()
    card = latest_card(predictions)
    if card is None:
        return []
    beside = []
    for key, part in (card.get("parts") or {}).items():
        if not isinstance(part, dict) or part.get("status") != "ok":
            continue
        after = afters(key)
        judged = after(part, happened) if after is not None else None
        if judged is None:
            fields = {k: v for k, v in part.items() if k not in SKIPPED_FIELDS and isinstance(v, str | int | float | bool)}
            judged = {"said": ", ".join(f"{k} {_shown(v)}" for k, v in sorted(fields.items())), "happened": None,
                      "right": None}
        beside.append({"part": key, "model_version": part.get("model_version"), "released_node_hours": None,
                       **judged})
    return beside


def said_text(beside: list[dict]) -> str:
    """`failure: failure risk 71%, TIMEOUT likely (right)` per part, `; ` between."""
    words = []
    for item in beside:
        mark = "" if item.get("right") is None else " (right)" if item["right"] else " (wrong)"
        happened = f" -> {item['happened']}" if item.get("happened") else ""
        words.append(f"{item['part']}: {item['said']}{happened}{mark}")
    return "; ".join(words)


# ---------------------------------------------------------------- rows
def distribution(values: list[float]) -> dict | None:
    """n, min, 10th percentile, median, 90th percentile, max and mean of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return {"n": len(ordered), "min": ordered[0], "p10": at(0.1), "median": at(0.5), "p90": at(0.9),
            "max": ordered[-1], "mean": sum(ordered) / len(ordered)}


def single_row(happened: dict, beside: list[dict]) -> dict:
    job = happened.get("job") or (f"{happened['array_job_id']}_{happened['array_task_id']}"
                                  if happened.get("array_job_id") is not None else str(happened["job_id"]))
    return {"job": job, "tasks": 1, **happened, **efficiencies(happened), "said": beside}


@dataclass
class ArrayRows:
    """An array's tasks as one row: counts by end state, and each measure's distribution."""

    array_job_id: int
    first: dict
    tasks: int = 0
    states: Counter = field(default_factory=Counter)
    task_ids: list[int] = field(default_factory=list)
    values: dict = field(default_factory=lambda: {k: [] for k in (*EFFICIENCIES, "elapsed_s", "mem_used_mib")})
    node_hours: float = 0.0
    beside: list[dict] = field(default_factory=list)

    def add(self, happened: dict, beside: list[dict]) -> None:
        self.tasks += 1
        self.states[happened["state"]] += 1
        self.task_ids.append(happened["array_task_id"])
        measured = {**happened, **efficiencies(happened)}
        for name, values in self.values.items():
            if measured.get(name) is not None:
                values.append(measured[name])
        self.node_hours += measured["node_hours"] or 0.0
        if beside and not self.beside:
            self.beside = beside

    def row(self) -> dict:
        spread = {name: distribution(values) for name, values in self.values.items()}
        first = self.first
        return {"job": f"{self.array_job_id}_[{min(self.task_ids)}-{max(self.task_ids)}]", "tasks": self.tasks,
                "job_id": self.array_job_id, "cluster": first["cluster"], "name": first["name"],
                "user": first["user"], "account": first["account"], "partition": first["partition"],
                "array_job_id": self.array_job_id, "state": ", ".join(f"{n} {s}" for s, n in self.states.most_common()),
                "states": dict(self.states), "submit_time": first["submit_time"],
                "time_limit_s": first["time_limit_s"], "cpus": first["cpus"], "mem_req_mib": first["mem_req_mib"],
                **{name: (spread[name] or {}).get("median") for name in EFFICIENCIES},
                "distribution": spread, "node_hours": self.node_hours, "said": self.beside}


@dataclass
class Report:
    """The rows (newest first, at most `limit`), how many more matched, and every matched job's measures for the
    plots and totals."""

    rows: list[dict] = field(default_factory=list)
    not_listed: int = 0
    jobs: int = 0
    unaccounted: int = 0
    not_finished: int = 0
    states: Counter = field(default_factory=Counter)
    points: dict = field(default_factory=lambda: {k: [] for k in (*EFFICIENCIES, "time", "memory")})
    node_hours: float = 0.0
    failed_node_hours: float = 0.0
    timeout_node_hours: float = 0.0

    def add_points(self, happened: dict, measured: dict) -> None:
        self.jobs += 1
        self.states[happened["state"]] += 1
        self.unaccounted += not happened["accounted"]
        for name in EFFICIENCIES:
            if measured[name] is not None:
                self.points[name].append(measured[name])
        if happened["time_limit_s"] and happened["elapsed_s"] is not None:
            self.points["time"].append((happened["time_limit_s"], happened["elapsed_s"]))
        if happened["mem_req_mib"] and happened["mem_used_mib"] is not None:
            self.points["memory"].append((happened["mem_req_mib"], happened["mem_used_mib"]))
        hours = measured["node_hours"] or 0.0
        self.node_hours += hours
        self.failed_node_hours += hours if happened["state"] in FAILED else 0.0
        self.timeout_node_hours += hours if happened["state"] in TIMED_OUT else 0.0


def finished(store: JobStore, filters: Filters, source: str = "slurm",
             at_most: int | None = None) -> Iterator[tuple[dict, dict]]:
    """(what happened, the job's predictions) of every finished job the filters keep, newest first; a job not
    finished yet is yielded as (None, its record) so that it can be counted. With `at_most`, the Slurm jobs are the
    filters' among the newest `at_most` jobs of the window only (a bounded read)."""
    if source == "htcondor":
        for event in store.events(USAGE_STREAM):
            happened = condor_facts(event["record"])
            ended = dt.datetime.fromisoformat(happened["end_time"]).timestamp()
            if (filters.since is None or ended >= filters.since) and (filters.until is None or ended < filters.until) \
                    and filters.keeps(happened):
                yield happened, {}
        return
    records = store.records(filters.cluster, filters.since, filters.until, newest_first=True, predictions="")
    for record in records if at_most is None else itertools.islice(records, at_most):
        happened = facts(record)
        if not filters.keeps(happened):
            continue
        if not record.get("final"):
            yield None, record
            continue
        yield happened, record["predictions"]


def report(store: JobStore, filters: Filters, limit: int = 200, source: str = "slurm",
           advance=lambda n: None, at_most: int | None = None) -> Report:
    """The report over the store's jobs that `filters` keep (see the module; `at_most`: among the newest so many
    jobs of the window only); `advance(1)` after each job read."""
    return summarize(finished(store, filters, source, at_most), limit, filters.grouped, advance)


def summarize(found: Iterable[tuple[dict | None, dict]], limit: int = 200,
              grouped: Callable[[dict], bool] = lambda facts: facts.get("array_job_id") is not None,
              advance=lambda n: None) -> Report:
    """The rows and totals of (what happened, the job's predictions) pairs (None for a job not finished): at most
    `limit` rows, an array's tasks (where `grouped`) as one row."""
    result, arrays, order, afters = Report(), {}, [], Afters()
    for happened, predictions in found:
        advance(1)
        if happened is None:
            result.not_finished += 1
            continue
        measured = efficiencies(happened)
        result.add_points(happened, measured)
        beside = said(predictions, happened, afters) if predictions else []
        array = happened.get("array_job_id")
        if grouped(happened):
            if array not in arrays:
                arrays[array] = ArrayRows(array, happened)
                order.append(("array", array))
            arrays[array].add(happened, beside)
        elif len(order) < limit:
            order.append(("job", single_row(happened, beside)))
        else:
            result.not_listed += 1
    for kind, item in order:
        if kind == "job":
            result.rows.append(item)
        elif len(result.rows) < limit:
            result.rows.append(arrays[item].row())
        else:
            result.not_listed += 1
    return result


def now() -> float:
    return time.time()
