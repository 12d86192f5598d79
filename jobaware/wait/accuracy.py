"""How `wait` does on live jobs: what its card part said of each job while it was pending (the cards an adapter kept
in the job store, each with the time it was `created`) against when the job really started.

A verdict's actual remaining wait is the job's start minus the verdict's `created` (never below 0). The first
verdict of a job is the one made when the adapter first saw it pending (at submission); the later ones are its
refreshes while it waited (`CardPart.refresh_s`; a refresh that changed nothing replaces the one before it, so the
store keeps one per change of words). Each is judged as the trace evaluation judges a wait
(`jobaware.wait.evaluate.metrics`: |log10 error| of max(x, 60 s), within x2 with both under a minute counting as
within, the 80 % range's and the 95 % bound's coverage). A job that never started (cancelled while it waited, as
`jobaware.store.export.never_started` tells it) has no actual wait: it is left out and counted.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
import pandas as pd

from jobaware.card import kept_cards
from jobaware.store import JobStore
from jobaware.store.export import never_started, row_run_time, seen_running, site_zone, to_utc

KEY = "wait"
FIGURES = {"log10_error": "mean_abs_log10_error", "within_x2": "within_x2", "coverage_80": "coverage_80",
           "coverage_95": "coverage_95"}  # the report's name -> evaluate.metrics' name


def starts(records: list[dict], zone) -> np.ndarray:
    """When each finished job started, UTC epoch seconds; NaN when it never did (the platform's rule,
    `jobaware.store.export.never_started`: cancelled while pending or held) or its start is unknown. The row keeps
    Slurm's times as the collector's wall clock: back to UTC by the platform's `to_utc` (by `zone`'s rules where
    they give the offset the job's submit shows, exact across a daylight saving change; else by that offset)."""
    rows = [record["row"] for record in records]
    facts = pd.DataFrame({"submit": [record["submit_time"] for record in records],
                          **{column: [row.get(f"{column}_time") for row in rows] for column in ("start", "end")},
                          "row_submit": [row.get("submit_time") for row in rows]}, dtype=float)
    times, _ = to_utc(facts, zone)
    never = never_started([(record["final"] or {}).get("state") for record in records], times["start"],
                          times["end"], [row_run_time(row) for row in rows], [seen_running(r) for r in records])
    return np.where(never, np.nan, times["start"])


def verdict_rows(store: JobStore, zone=None) -> list[dict]:
    """One row per wait verdict of a finished job: week of submission, model version, `first` (the job's first
    verdict) or `refreshed`, the answer (wait_s, wait_low_s, wait_high_s, wait_bound_s) and the actual remaining
    wait (None: the job never started). The rows' times go back to UTC by `zone` (None: this process's,
    `jobaware.store.export.site_zone`)."""
    judged = []
    for record in store.records(predictions=""):
        if not record["final"]:
            continue
        said = [(card.get("created") or 0.0, card["parts"][KEY]) for card in kept_cards(record["predictions"])
                if (card.get("parts") or {}).get(KEY, {}).get("status") == "ok"]
        if said:
            judged.append((record, said))
    begun = starts([record for record, _ in judged], site_zone() if zone is None else zone)
    rows = []
    for (record, said), start in zip(judged, begun, strict=True):
        week = time.strftime("%G-W%V", time.gmtime(record["submit_time"]))
        for order, (created, part) in enumerate(said):
            rows.append({"week": week, "model_version": str(part["model_version"]), "job": record["job_id"],
                         "verdict": "refreshed" if order else "first", "wait_s": part["wait_s"],
                         "wait_low_s": part["low_s"], "wait_high_s": part["high_s"], "wait_bound_s": part["bound_s"],
                         "actual_s": None if np.isnan(start) else max(float(start) - created, 0.0)})
    return rows


def accuracy_report(store: JobStore) -> list[dict]:
    """By week of submission, model version and verdict (`first`, then `refreshed`): the jobs judged, the verdicts,
    the jobs left out because they never started, and the verdicts' mean |log10 error|, within x2, 80 % range and
    95 % bound coverage."""
    from jobaware.wait.evaluate import metrics

    groups: dict[tuple[str, str, bool], list[dict]] = defaultdict(list)
    for row in verdict_rows(store):
        groups[(row["week"], row["model_version"], row["verdict"] == "refreshed")].append(row)
    report = []
    for (week, version, refreshed), verdicts in sorted(groups.items()):
        judged = [r for r in verdicts if r["actual_s"] is not None]
        answer = {field: np.array([r[field] for r in judged], float)
                  for field in ("wait_s", "wait_low_s", "wait_high_s", "wait_bound_s")}
        figures = metrics(answer, np.array([r["actual_s"] for r in judged], float)) if judged else {}
        report.append({"week": week, "model_version": version, "verdict": "refreshed" if refreshed else "first",
                       "jobs": len({r["job"] for r in judged}), "verdicts": len(judged),
                       "never_started": len({r["job"] for r in verdicts if r["actual_s"] is None}),
                       **{name: figures.get(field, float("nan")) for name, field in FIGURES.items()}})
    return report
