"""How the `failure` model does on live jobs: the verdicts an adapter kept in the job store, joined with how the
jobs really ended, by week of submission and model version.

A verdict counts once per job and failure model version (the latest kept). Labels as in training: COMPLETED is
"completed", FAILED, TIMEOUT, OUT_OF_MEMORY and NODE_FAIL are "failed"; jobs ended otherwise (CANCELLED,
PREEMPTED, ...) are left out, as training leaves them out. The flag is P(fail) at or above the model's registered
operating threshold (0.5 for a model without one).
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from jobaware.failure.operating import at_threshold, expected_calibration_error
from jobaware.failure.schema import FAILURES
from jobaware.store import JobStore

DEFAULT_THRESHOLD = 0.5


def live_rows(store: JobStore) -> list[dict]:
    """One row per finished, labelled job and failure model version: week, version, failed, p_fail, threshold."""
    rows = []
    for outcome in store.outcomes():
        state = outcome["final"]["state"]
        if state != "COMPLETED" and state not in FAILURES:
            continue
        latest: dict[str, dict] = {}
        for answer in outcome["predictions"].values():
            failure = (answer.get("card") or {}).get("parts", {}).get("failure") or {}
            if failure.get("status") == "ok":
                latest[failure["model_version"]] = failure  # versions are kept in the order they were judged
        week = time.strftime("%G-W%V", time.gmtime(outcome["key"].submit_time))
        for version, failure in latest.items():
            threshold = failure.get("threshold")
            rows.append({"week": week, "model_version": version, "failed": state != "COMPLETED",
                         "p_fail": float(failure["p_fail"]),
                         "threshold": DEFAULT_THRESHOLD if threshold is None else float(threshold)})
    return rows


def live_report(store: JobStore) -> list[dict]:
    """ROC-AUC, failed-class F1, accuracy and calibration error by week and model version."""
    from sklearn.metrics import roc_auc_score

    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in live_rows(store):
        groups[(row["week"], row["model_version"])].append(row)
    report = []
    for (week, version), rows in sorted(groups.items()):
        failed = np.array([r["failed"] for r in rows])
        p_fail = np.array([r["p_fail"] for r in rows])
        flags = at_threshold(failed, p_fail, np.array([r["threshold"] for r in rows]))
        both = 0 < failed.sum() < len(failed)
        report.append({"week": week, "model_version": version, "jobs": len(rows), "failed": int(failed.sum()),
                       "roc_auc": float(roc_auc_score(failed, p_fail)) if both else float("nan"),
                       "fail_f1": flags["fail_f1"], "accuracy": flags["accuracy"],
                       "ece": expected_calibration_error(failed, p_fail)})
    return report
