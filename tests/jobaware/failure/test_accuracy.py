"""The live accuracy report: what the model said of each job (read through the card's kept verdicts), against how
the job ended; the flag is the model's own, and a verdict without one counts only where no flag is needed."""

import math

from jobaware.card import kept
from jobaware.failure.accuracy import accuracy_report
from jobaware.store import JobKey, open_store

WEEK = 1_767_225_600  # 2026-01-01, a Thursday: ISO week 2026-W01


def _judged(store, job: int, end: str, p_fail: float, threshold: float | None, version: str = "3") -> None:
    key = JobKey("c", job, WEEK + job)
    store.put_job(key, {"user": "ana"})
    store.put_final(key, end, "sacct", 0)
    failure = {"status": "ok", "p_fail": p_fail, "likely": "FAILED", "model_version": version}
    if threshold is not None:
        failure.update(threshold=threshold, likely_fail=p_fail >= threshold)
    store.put_prediction(key, f"adapter:failure={version}", kept({"parts": {"failure": failure}}, acts=[]))


def test_flags_words_and_scores_by_week_and_version(tmp_path):
    store = open_store(str(tmp_path / "store"))
    for job, (end, p) in enumerate([("FAILED", 0.7), ("FAILED", 0.3), ("COMPLETED", 0.26), ("COMPLETED", 0.1),
                                    ("CANCELLED", 0.9)]):
        _judged(store, job, end, p, threshold=0.25)
    _judged(store, 9, "FAILED", 0.8, threshold=None, version="1")  # a model without a threshold: no flag
    flagged, unflagged = accuracy_report(store)[::-1]
    assert (flagged["model_version"], flagged["jobs"], flagged["failed"]) == ("3", 4, 2)  # CANCELLED left out
    assert (flagged["flagged"], flagged["likely"]) == (3, 1)  # 0.7 is "likely"; 0.3 and 0.26 are raised risks
    assert flagged["accuracy"] == 0.75 and flagged["roc_auc"] == 1.0
    assert (unflagged["flagged"], unflagged["likely"]) == (0, 0) and math.isnan(unflagged["accuracy"])
