"""How the `failure` model does on live jobs: what it said of each job (the cards an adapter kept in the job store,
read through `jobaware.card.said`) joined with how the job really ended, by week of submission and model version.

A verdict counts once per job and failure model version (the latest kept). Labels as in training: COMPLETED is
"completed", FAILED, TIMEOUT, OUT_OF_MEMORY and NODE_FAIL are "failed"; jobs ended otherwise (CANCELLED,
PREEMPTED, ...) are left out, as training leaves them out. The flag is the model's own (`likely_fail`, at the
operating threshold registered with it): a verdict of a model without a threshold has none and counts only in
ROC-AUC and calibration. `flagged` and `likely` count the jobs in the words their comments and advice used
(`failure.card.level`): flagged at all, and flagged as "likely".
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from jobaware.card import said
from jobaware.failure.card import level
from jobaware.failure.operating import at_flags, expected_calibration_error
from jobaware.failure.schema import FAILURES
from jobaware.store import JobStore


def accuracy_rows(store: JobStore) -> list[dict]:
    """One row per finished, labelled job and failure model version: week, version, failed, p_fail, the model's
    flag (None without a threshold) and the words it was said in."""
    rows = []
    for outcome in store.outcomes():
        state = outcome["final"]["state"]
        if state != "COMPLETED" and state not in FAILURES:
            continue
        latest = {str(part["model_version"]): part for part in said(outcome["predictions"], "failure")}
        week = time.strftime("%G-W%V", time.gmtime(outcome["key"].submit_time))
        for version, part in latest.items():
            rows.append({"week": week, "model_version": version, "failed": state != "COMPLETED",
                         "p_fail": float(part["p_fail"]), "flagged": part.get("likely_fail"), "level": level(part)})
    return rows


def accuracy_report(store: JobStore) -> list[dict]:
    """By week and model version: jobs, failed, flagged, said likely, ROC-AUC, the flag's failed-class F1 and
    accuracy, and the expected calibration error."""
    from sklearn.metrics import roc_auc_score

    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in accuracy_rows(store):
        groups[(row["week"], row["model_version"])].append(row)
    report = []
    for (week, version), rows in sorted(groups.items()):
        failed = np.array([r["failed"] for r in rows])
        p_fail = np.array([r["p_fail"] for r in rows])
        judged = [r for r in rows if r["flagged"] is not None]
        flags = at_flags(np.array([r["failed"] for r in judged], dtype=bool),
                         np.array([r["flagged"] for r in judged], dtype=bool))
        both = 0 < failed.sum() < len(failed)
        report.append({"week": week, "model_version": version, "jobs": len(rows), "failed": int(failed.sum()),
                       "flagged": sum(r["flagged"] is True for r in rows),
                       "likely": sum(r["level"] == "likely" for r in rows),
                       "roc_auc": float(roc_auc_score(failed, p_fail)) if both else float("nan"),
                       "fail_f1": flags["fail_f1"], "accuracy": flags["accuracy"],
                       "ece": expected_calibration_error(failed, p_fail)})
    return report
