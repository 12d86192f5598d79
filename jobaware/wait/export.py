"""A site's own jobs for `wait`: the records of a job store (`jobaware.store`, filled by the Slurm collector) as
`queue_jobs` rows, so that `jobaware pipeline run wait --data STORE` trains on them.

`from_store` is the platform's (`jobaware.store.export`: the store's records, without their batch scripts, as JSON
Lines, in the store's order); the wait ingest reads such a file with `read_export` (the pipeline runs both in its
ingest step: one code path), which maps each record onto `queue_jobs` by the rules below.

A record's fields (its row is what the collector kept of `squeue --json` and `sacct`):
  cluster, job_id   the store's key;  user  the row's user;  group  its account;  queue  its partition (SWF's
                    queue; SWF's partition stays unknown)
  processors_req    CPUs asked;  wallclock_req  the time limit (s);  mem_req  MB in all: accounting's memory per node
                    times its nodes, else the row's for a one-node job (a row cannot tell memory per node from memory
                    per CPU beyond that); unknown when none was stated
  submit_time       when the job entered the queue: the key's submit (as Slurm gave it, UTC), or its eligible time
                    where that came later (below);  start_time, end_time  the row's, back to UTC (below)
  status            COMPLETED, CANCELLED, or FAILED for any other end (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL,
                    ...); unknown while the job is open
  line              the record's place in the store's order (1 for the first job)

What the queue held at each submit (the sweep of `jobaware.wait.features` rebuilds it from these rows):
  - a job enters the queue at its submit, or at its eligible time (the row's `eligible_time`: what accounting keeps
    once the job has left the queue, else what squeue said when the collector last saw the job pending) where that is
    after its submit and not after the job left the queue (its start, else its end): a begin time, a dependency or a
    hold kept it out until then, as a live snapshot leaves it out. Its row's submit_time is that moment, so its wait
    (start minus eligible time) trains from its eligibility and it is pending ahead of other jobs only from then. An
    eligible time before the submit or after the job left the queue, or none (a store from before the collector kept
    it), leaves the submit. "Submit" below is that moment;
  - a job that started: pending from its submit to its start, then running to its end; its wait trains and enters
    the histories at its start;
  - a job that ended without starting (cancelled while pending, or held and then cancelled, as the platform's
    `jobaware.store.export.never_started` tells it): no wait, so never a training row nor in any history; pending
    from its submit until its end, as squeue showed it to anyone asking then. Unless it was held (its last pending reason one
    of `reader.HELD`: held by a person, waiting for a begin time or a dependency): such a job is never in the queue,
    as a live snapshot (`reader.squeue_body`) leaves held jobs out; its row keeps no end;
  - a job still open when the store was read, as of the latest moment the store knows (its newest state change,
    submit, start or end): a running one runs until then, a pending one (unless held) waits until then; its end is
    that moment and its status unknown. A running job's wait is known and trains; a pending one's is not yet. No
    job of the store was submitted after that moment, so what an open job does later changes no job's features.

Times: the row keeps the collector's local wall clock; start, end and eligible time go back to UTC by the platform's
`to_utc` (by this process's zone when it gives the offset each job's submit had, exact across a daylight saving
change, and `timezone` is the zone's name; else the submit's offset, which `timezone` names).

A record that cannot be read (a field of the wrong type or out of bounds, the eligible time included, a start before
its submit or an end before its start) is quarantined with its store, job and reason; so is a job id seen before on
the same cluster (Slurm reuses ids after a reset or a wrap): the earlier job is kept, as the trace readers keep a job
number's first line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.reading import Problem
from jobaware.store.export import (
    EPOCH,
    EPOCH_MAX,
    integer,
    key_facts,
    never_started,
    number,
    numbers,
    row_time,
    site_zone,
    statuses,
    text,
    to_utc,
)
from jobaware.wait.reader import HELD, queue_entry
from jobaware.wait.schema import CENTURY, COLUMNS, MAX_PROCS

FACTS = ("cluster", "job_id", "submit", "row_submit", "final", "run_time", "seen_running", "start", "end", "user",
         "group", "queue", "processors_req", "wallclock_req", "mem_req", "held", "seen", "eligible")


def _fields(record) -> dict:
    """One store record's facts, checked (times as stored: the key's UTC submit, the row's wall-clock times)."""
    facts = key_facts(record)
    row, usage = record["row"], record.get("usage")
    nodes = integer(row.get("nodes_req"), "nodes_req", 0, MAX_PROCS, "a number of nodes")
    mem = number(row.get("mem_req"), "mem_req", 1e12, "a memory size in MB")
    if isinstance(usage, dict) and usage.get("mem_req_mib") is not None:  # accounting's memory per node
        per_node = number(usage.get("mem_req_mib"), "usage.mem_req_mib", 1e12, "a memory size in MB")
        mem = per_node * (integer(usage.get("nodes"), "usage.nodes", 1, MAX_PROCS, "a number of nodes") or 1)
    elif nodes != 1:
        mem = None  # per node or per CPU: the row cannot tell
    seen = [number(s.get("time"), "states.time", EPOCH_MAX, EPOCH) for s in record.get("states") or []]
    return {
        **facts,
        "start": row_time(row, "start_time"),
        "end": row_time(row, "end_time"),
        "user": text(row.get("user"), "user"),
        "group": text(row.get("account"), "account"),
        "queue": text(row.get("partition"), "partition"),
        "processors_req": integer(row.get("processors_req"), "processors_req", 1, MAX_PROCS, "at least 1 processor"),
        "wallclock_req": number(row.get("wallclock_req"), "wallclock_req", CENTURY, "a time limit in seconds"),
        "mem_req": mem or None,  # 0: none stated
        "held": row.get("reason") in HELD,
        "seen": max((t for t in seen if t is not None), default=None),
        "eligible": row_time(row, "eligible_time"),
    }


def read_export(path: str | Path) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A store's export as `queue_jobs` rows (in the store's order), its problems and quarantined records."""
    from jobaware.store.export import read_export as read_records

    read = read_records(path, _fields)
    jobs, bad = queue_jobs(pd.DataFrame(read.facts, columns=list(FACTS)), read.lines, site_zone())
    for k, (field, reason) in sorted(bad.items()):
        record = read.records[k]
        read.reject(record, read.lines[k], field, reason,
                    record.get(field) if field == "job_id" else record["row"].get(field))
    return jobs, read.problems, read.quarantined


def queue_jobs(facts: pd.DataFrame, lines: list[int], zone) -> tuple[pd.DataFrame, dict[int, tuple[str, str]]]:
    """Checked facts (`FACTS`, in the store's order) as `queue_jobs` rows, and the positions of the ones that cannot
    be rows with the field and why (the module's docstring says what each row holds)."""
    if facts.empty:
        return pd.DataFrame(columns=list(COLUMNS)), {}
    times, zones = to_utc(facts, zone, ("start", "end", "eligible"))
    submit, start, end = numbers(facts, "submit"), times["start"], times["end"]
    final = facts["final"]
    start = np.where(never_started(final, start, end, numbers(facts, "run_time"), facts["seen_running"]),
                     np.nan, start)
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
    as_of = np.ceil(np.nanmax(np.concatenate([numbers(facts, "seen")[keep], submit[keep], start[keep],
                                              end[keep]])))
    is_open = final.isna().to_numpy()
    held = facts["held"].to_numpy(bool) & np.isnan(start)
    end = np.where(is_open & np.isnan(end), np.maximum(as_of, np.where(np.isnan(start), submit, start)), end)
    end = np.where(held, np.nan, end)  # held and never run: never in the queue
    left = np.where(np.isnan(start), end, start)  # when it left the queue: its start, else its end (NaN: never in it)
    entry = queue_entry(submit, times["eligible"], left)
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
        "processors_req": numbers(facts, "processors_req"),
        "wallclock_req": numbers(facts, "wallclock_req"),
        "mem_req": numbers(facts, "mem_req"),
        "submit_time": utc(entry),
        "start_time": utc(start),
        "end_time": utc(end),
        "wait_s": start - entry,
        "run_s": np.where(is_open, np.nan, end - start),
        "status": statuses(final),
        "line": lines,
    })
    return jobs.loc[keep].reset_index(drop=True), bad
