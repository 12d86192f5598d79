"""A finished job's card, from the job store (`jobaware card` for a job squeue no longer lists): the newest card the
adapter kept for it before it ran, beside what happened (its end, run time and use, and each answered part judged
against that end where the part can tell: `jobaware.usage.jobs.said`).

The store has no index by job id: the job is looked for among the jobs of the cluster submitted in the last days
asked, newest first, and the scan stops once every job asked for is found. An array's task is found by the task
ids accounting gave it (sacct); a task judged while still pending shares the card kept on its array's record."""

from __future__ import annotations

import datetime as dt

from jobaware import card as cards
from jobaware.store import JobStore
from jobaware.usage.jobs import facts, said, said_text, single_row
from jobaware.usage.measures import clock, percent, size

PREFIX = "adapter:"  # the names the adapter keeps its verdicts under

Wanted = tuple[int, int | None]  # (job, or array, id; the task or None)


def matches(happened: dict, job: int, task: int | None) -> bool:
    if task is None:
        return happened["job_id"] == job
    return happened.get("array_job_id") == job and happened.get("array_task_id") == task


def find(store: JobStore, cluster: str | None, since: float | None, wanted: list[Wanted]) -> dict[Wanted, dict]:
    """The answer (`answer`) of each of `wanted` found among the jobs of `cluster` (None: every one) submitted from
    `since` on (None: every job); a job not found there is left out."""
    records: dict[Wanted, dict] = {}
    by_array: dict[int, dict] = {}  # array id -> the array's own record (where its pending tasks' cards are kept)
    array_ids = {job for job, task in wanted if task is not None}

    def complete() -> bool:
        return len(records) == len(wanted) and all(
            task is None or job in by_array or cards.kept_cards(records[job, task]["predictions"], PREFIX)
            for job, task in wanted)

    for record in store.records(cluster, since, newest_first=True, predictions=PREFIX):
        happened = facts(record)
        for job, task in wanted:
            if (job, task) not in records and matches(happened, job, task):
                records[job, task] = record
        if record["job_id"] in array_ids and happened.get("array_job_id") in (record["job_id"], None):
            by_array.setdefault(record["job_id"], record)
        if complete():
            break
    return {(job, task): answer(record, by_array.get(job) if task is not None else None)
            for (job, task), record in records.items()}


def answer(record: dict, array_record: dict | None = None) -> dict:
    """The newest card the adapter kept for the job (else for its array, `array_record`; empty parts when none)
    and `happened`: what happened (`jobaware.usage.jobs.single_row`: the end, times, use and efficiencies, and
    `said`, each answered part beside the end) and `finished` (False while the store has no end for it yet)."""
    kept = cards.kept_cards(record["predictions"], PREFIX) or \
        cards.kept_cards((array_record or {}).get("predictions") or {}, PREFIX)
    card = kept[-1] if kept else {"job_id": record["job_id"], "created": None, "parts": {}, "missing": [], "short": ""}
    happened = facts(record)
    beside = said({PREFIX: {"card": card}}, happened) if kept else []
    return {**card, "happened": {**single_row(happened, beside), "finished": bool(record.get("final"))}}


def title(name: str, answer: dict) -> str:
    """`job 103: said before it ran (2026-05-27 08:00): jobaware: failure risk 82%, TIMEOUT likely`."""
    if answer.get("created") is None:
        return f"job {name}: no card was kept before it ran (the adapter did not judge it)"
    when = dt.datetime.fromtimestamp(answer["created"]).strftime("%Y-%m-%d %H:%M")
    return f"job {name}: said before it ran ({when})" + (f": {answer['short']}" if answer.get("short") else "")


def ended(happened: dict) -> str:
    """`TIMEOUT, exit 0`, `OUT_OF_MEMORY, exit 0, signal 9`; `RUNNING (no end in the store yet)`."""
    words = [str(happened.get("state") or "unknown")]
    if happened.get("exit_code") is not None:
        words.append(f"exit {happened['exit_code']}")
    if happened.get("signal") is not None:
        words.append(f"signal {happened['signal']}")
    return ", ".join(words) + ("" if happened.get("finished") else " (no end in the store yet)")


def happened_row(happened: dict) -> dict:
    """What happened, as one table row."""
    return {"end": ended(happened), "ran": f"{clock(happened.get('elapsed_s'))} of {clock(happened.get('time_limit_s'))}",
            "time eff": percent(happened.get("time_eff")), "CPU eff": percent(happened.get("cpu_eff")),
            "memory used / asked": f"{size(happened.get('mem_used_mib'))} / {size(happened.get('mem_req_mib'))}",
            "mem eff": percent(happened.get("mem_eff")),
            "said -> happened": said_text(happened.get("said") or []) or "-"}
