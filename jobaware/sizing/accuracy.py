"""How `sizing` does on live jobs: what its card part recommended for each job (the first card an adapter kept in
the job store for it, made when the job was first seen pending: what its user read) against what the job then used
(the store's `usage`, from accounting: `jobaware.usage.measures`).

A job is judged once per sizing model version, on its first recommendation from that version. Time: it was
under-estimated when it ran longer than the recommended limit (a job stopped at its own limit ran as long as it
could, so a recommendation below what it asked counts as under-estimated; one that gave the request back cannot be).
Memory, where the part recommended a value and accounting measured the job's largest use: under-estimated when the
use per CPU (per node, times nodes, over CPUs) exceeds the recommendation. A job that never ran (no elapsed time) or
has no usage yet is left out. The rate to hold against is the part's `coverage` (0.95: 5 % may outgrow it).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from jobaware.card import kept_cards
from jobaware.store import JobStore

KEY = "sizing"


def _first_said(predictions: dict) -> dict[str, dict]:
    """The first answered sizing part of each model version among a job's kept cards."""
    first: dict[str, dict] = {}
    for card in kept_cards(predictions):
        part = (card.get("parts") or {}).get(KEY) or {}
        if part.get("status") == "ok" and part.get("time_s") is not None:
            first.setdefault(str(part["model_version"]), part)
    return first


def used_mem_per_cpu(usage: dict) -> float | None:
    """The job's largest memory use per CPU (MiB), from accounting's largest use per node."""
    used, nodes, cpus = usage.get("mem_used_mib"), usage.get("nodes") or 1, usage.get("cpus")
    return used * nodes / cpus if used is not None and cpus else None


def judged_rows(store: JobStore) -> list[dict]:
    """One row per finished job that ran and sizing model version that recommended for it: week of submission,
    version, the recommendation beside the request, and what the job used."""
    rows = []
    for record in store.records(predictions=""):
        usage = record.get("usage") or {}
        if not record["final"] or not usage.get("elapsed_s"):
            continue
        week = time.strftime("%G-W%V", time.gmtime(record["submit_time"]))
        for version, part in _first_said(record["predictions"]).items():
            rows.append({"week": week, "model_version": version, "job": record["job_id"],
                         "coverage": part.get("coverage"), "time_s": float(part["time_s"]),
                         "time_asked_s": part.get("time_asked_s"), "elapsed_s": float(usage["elapsed_s"]),
                         "mem_per_cpu_mb": part.get("mem_per_cpu_mb"), "mem_used_per_cpu_mb": used_mem_per_cpu(usage)})
    return rows


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def accuracy_report(store: JobStore) -> list[dict]:
    """By week of submission and model version: the jobs judged, the coverage the recommendations were calibrated
    for, the time under-estimation rate, the share recommended less time than asked, the median recommended /
    asked time; and for memory, the jobs with a recommendation and a measured use, their under-estimation rate and
    median recommended / asked."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in judged_rows(store):
        groups[(row["week"], row["model_version"])].append(row)
    report = []
    for (week, version), rows in sorted(groups.items()):
        asked = [r for r in rows if r["time_asked_s"]]
        memory = [r for r in rows if r["mem_per_cpu_mb"] is not None and r["mem_used_per_cpu_mb"] is not None]
        report.append({
            "week": week, "model_version": version, "jobs": len(rows),
            "coverage": _median([r["coverage"] for r in rows if r["coverage"] is not None]),
            "time_under_rate": _share([r["elapsed_s"] > r["time_s"] for r in rows]),
            "time_less_share": _share([r["time_s"] < r["time_asked_s"] for r in asked]),
            "time_median_ratio": _median([r["time_s"] / r["time_asked_s"] for r in asked]),
            "mem_jobs": len(memory),
            "mem_under_rate": _share([r["mem_used_per_cpu_mb"] > r["mem_per_cpu_mb"] for r in memory]),
        })
    return report
