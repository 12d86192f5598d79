"""A site's own jobs for `sizing`: the finished jobs of a job store (`jobaware.store`, filled by the Slurm collector),
with what accounting said of their use, as `sizing_jobs` rows, so that `jobaware pipeline run sizing --input STORE`
trains on them.

The store's records come as the platform's export (`jobaware.store.export`: `from_store` writes it, the pipeline's
ingest step reads it with `read_export` here: one code path). A row per job that ended, with its use (the record's
`usage`, `jobaware.usage.measures`: `sacct` or `htcondor`), and that started:
  cluster, job_id   the store's key;  user  the row's user;  group  its account;  name  its job name (squeue's `name`,
                    as SWF's executable names the program);  queue  its partition
  procs             CPUs asked (the row's), else accounting's CPUs
  time_req_s        accounting's time limit, else the row's; none (0, unlimited) is unknown
  mem_req_mb        accounting's memory asked per node, per CPU: times its nodes (1 for an HTCondor slot), over its
                    CPUs (accounting's, else those asked); else the row's memory over its CPUs for a one-node job (a
                    row cannot tell memory per node from memory per CPU beyond that); none is unknown
  submit_time       the key's (UTC);  end_time  the row's, back to UTC (`jobaware.store.export.to_utc`)
  run_s             accounting's elapsed time;  mem_used_mb  accounting's largest use per node, per CPU as above
                    (SWF's average memory per processor)
  status            COMPLETED, CANCELLED, or FAILED for any other end (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ...)
  line              the record's place in the store's order (1 for the first job)

Left out, as no row at all: a job still open (pending or running: nothing used yet), a job that ended without
accounting's word on its use (collected without `sacct`, or its accounting not read yet: its row says nothing of its
memory), and a job that ended without starting (cancelled while pending, as `jobaware.store.export.never_started`
tells it): it used nothing, and a use of zero is not what it would have needed. None of these is a bad record; the
store keeps them. A store none of whose jobs is a row is a one-line error that says so.

A record that cannot be read (a field of the wrong type or out of bounds, memory beyond MAX_MEM_MB per processor, a
start before its submit or an end before its start) is quarantined with its store, job and reason. A job id Slurm
reused on the same cluster is another job (its own submit time): both are rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.reading import Problem
from jobaware.sizing.schema import CENTURY, COLUMNS, MAX_MEM_MB, MAX_PROCS
from jobaware.store.export import (
    BadRecord,
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

FACTS = ("cluster", "job_id", "submit", "row_submit", "final", "run_time", "seen_running", "start", "end", "user",
         "group", "name", "queue", "procs", "time_req_s", "mem_req_mb", "run_s", "mem_used_mb", "used")
_LIMIT = "a time limit in seconds"
_MIB = "a memory size in MiB"


def _per_cpu(mib: float | None, nodes: int, cpus: int | None, field: str) -> float | None:
    """Memory per node as memory per CPU (MB per processor, as the traces give it); None for unknown or none."""
    if not mib or not cpus:
        return None
    per_cpu = mib * nodes / cpus
    if per_cpu > MAX_MEM_MB:
        raise BadRecord(field, f"more than {MAX_MEM_MB:,} MB per processor", mib)
    return per_cpu


def _fields(record) -> dict:
    """One store record's facts, checked (times as stored: the key's UTC submit, the row's wall-clock times)."""
    facts = key_facts(record)
    row, usage = record["row"], record.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise BadRecord("usage", "expected what accounting said of the job's use (an object)", usage)
    used = usage or {}
    procs = integer(row.get("processors_req"), "processors_req", 1, MAX_PROCS, "at least 1 processor")
    cpus = integer(used.get("cpus"), "usage.cpus", 1, MAX_PROCS, "at least 1 CPU") or procs
    nodes = integer(used.get("nodes"), "usage.nodes", 1, MAX_PROCS, "a number of nodes") or 1  # HTCondor: a slot
    limit = number(used.get("time_limit_s"), "usage.time_limit_s", CENTURY, _LIMIT)
    if limit is None:
        limit = number(row.get("wallclock_req"), "wallclock_req", CENTURY, _LIMIT)
    mem_req = _per_cpu(number(used.get("mem_req_mib"), "usage.mem_req_mib", 1e12, _MIB), nodes, cpus,
                       "usage.mem_req_mib")
    if mem_req is None and used.get("mem_req_mib") is None \
            and integer(row.get("nodes_req"), "nodes_req", 0, MAX_PROCS, "a number of nodes") == 1:
        mem_req = _per_cpu(number(row.get("mem_req"), "mem_req", 1e12, "a memory size in MB"), 1, procs, "mem_req")
    return {
        **facts,
        "start": row_time(row, "start_time"),
        "end": row_time(row, "end_time"),
        "user": text(row.get("user"), "user"),
        "group": text(row.get("account"), "account"),
        "name": text(row.get("name"), "name"),
        "queue": text(row.get("partition"), "partition"),
        "procs": procs or cpus,
        "time_req_s": limit or None,  # 0: none asked
        "mem_req_mb": mem_req,
        "run_s": number(used.get("elapsed_s"), "usage.elapsed_s", CENTURY, "a run time in seconds"),
        "mem_used_mb": _per_cpu(number(used.get("mem_used_mib"), "usage.mem_used_mib", 1e12, _MIB), nodes, cpus,
                                "usage.mem_used_mib"),
        "used": usage is not None,
    }


def read_export(path: str | Path) -> tuple[pd.DataFrame, list[Problem], list[dict]]:
    """A store's export as `sizing_jobs` rows (in the store's order), its problems and quarantined records."""
    from jobaware.store.export import read_export as read_records

    read = read_records(path, _fields)
    facts = pd.DataFrame(read.facts, columns=list(FACTS))
    jobs, bad = sizing_jobs(facts, read.lines, site_zone())
    for k, (field, reason) in sorted(bad.items()):
        read.reject(read.records[k], read.lines[k], field, reason, read.records[k]["row"].get(field))
    if jobs.empty and len(facts) > len(bad):
        raise InputError(f"{read.uri}: none of its {len(facts) - len(bad):,} jobs ended with accounting's word on its "
                         "use (sacct's, kept by the collector): sizing learns from what jobs used")
    return jobs, read.problems, read.quarantined


def sizing_jobs(facts: pd.DataFrame, lines: list[int], zone) -> tuple[pd.DataFrame, dict[int, tuple[str, str]]]:
    """Checked facts (`FACTS`, in the store's order) as `sizing_jobs` rows, and the positions of the ones that cannot
    be read with the field and why (the module's docstring says which jobs are rows and what each holds)."""
    if facts.empty:
        return pd.DataFrame(columns=list(COLUMNS)), {}
    times, _ = to_utc(facts, zone)
    submit, start, end = numbers(facts, "submit"), times["start"], times["end"]
    bad: dict[int, tuple[str, str]] = {}
    for k in np.flatnonzero(start < submit):
        bad[int(k)] = ("start_time", "before its submit")
    for k in np.flatnonzero(end < np.where(np.isnan(start), submit, start)):
        bad.setdefault(int(k), ("end_time", "before its start" if np.isfinite(start[k]) else "before its submit"))
    final = facts["final"]
    rows = final.notna().to_numpy() & facts["used"].to_numpy(bool) & ~never_started(
        final, start, end, numbers(facts, "run_time"), facts["seen_running"])
    rows[list(bad)] = False
    utc = lambda seconds: pd.to_datetime(seconds, unit="s", utc=True)  # noqa: E731
    jobs = pd.DataFrame({
        "cluster": facts["cluster"],
        "job_id": facts["job_id"],
        "user": facts["user"],
        "group": facts["group"],
        "name": facts["name"],
        "queue": facts["queue"],
        "procs": numbers(facts, "procs"),
        "time_req_s": numbers(facts, "time_req_s"),
        "mem_req_mb": numbers(facts, "mem_req_mb"),
        "submit_time": utc(submit),
        "end_time": utc(end),
        "run_s": numbers(facts, "run_s"),
        "mem_used_mb": numbers(facts, "mem_used_mb"),
        "status": statuses(final),
        "line": lines,
    })
    return jobs.loc[rows].reset_index(drop=True), bad
