"""How a wait estimate is judged (issue 37), and the baselines it is judged against, on the same jobs.

- within x2: actual and predicted both under a minute, or actual/2 <= predicted <= 2 x actual;
- within 10 minutes; the median absolute error; mean |log10 error| (both floored at a minute);
- the 80 % range's coverage, the 95 % bound's coverage and its tightness: the median of
  max(bound, 60 s) / max(actual, 60 s).

Baselines, each causal (a past job's wait counts once that job has started, strictly before the submit asked
about): predict 0; the median wait of the user's earlier started jobs; the median of the processor bucket's; the
training median; and for the bound, the processor bucket's 95th percentile of started waits (QBETS-like).
A baseline with no earlier job to go by answers the training median (the bucket P95: the training P95).
"""

from __future__ import annotations

from bisect import insort

import numpy as np
import pandas as pd

from jobaware.wait.features import bucket, entity, seconds

MINUTE = 60.0


def within_x2(predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    return ((actual < MINUTE) & (predicted < MINUTE)) | ((predicted >= actual / 2) & (predicted <= 2 * actual))


def metrics(answer: dict[str, np.ndarray], actual: np.ndarray) -> dict[str, float]:
    """The figures of one scorer on jobs with known waits (`answer`: wait_s and, where it has them, the range
    and the bound)."""
    point = np.asarray(answer["wait_s"], float)
    if not len(actual):
        return {"within_x2": float("nan"), "jobs": 0.0}
    floor = np.maximum(actual, MINUTE)
    out = {
        "within_x2": float(np.mean(within_x2(point, actual))),
        "within_10min": float(np.mean(np.abs(point - actual) <= 600)),
        "median_abs_error_s": float(np.median(np.abs(point - actual))),
        "mean_abs_log10_error": float(np.mean(np.abs(np.log10(np.maximum(point, MINUTE) / floor)))),
        "jobs": float(len(actual)),
    }
    if "wait_low_s" in answer:
        out["coverage_80"] = float(np.mean((answer["wait_low_s"] <= actual) & (actual <= answer["wait_high_s"])))
    if "wait_bound_s" in answer:
        bound = np.asarray(answer["wait_bound_s"], float)
        out["coverage_95"] = float(np.mean(actual <= bound))
        out["bound_tightness"] = float(np.median(np.maximum(bound, MINUTE) / floor))
    return out


def baselines(jobs: pd.DataFrame, asked: np.ndarray, training_waits: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Each baseline's answer for the jobs at positions `asked` of `jobs` (in the sweep's order)."""
    median = float(np.median(training_waits)) if len(training_waits) else 0.0
    p95 = float(np.percentile(training_waits, 95)) if len(training_waits) else 0.0
    user = entity(jobs, "user").to_numpy(dtype=object, na_value=None)
    buckets = (jobs["cluster"].astype(str) + "/" + pd.Series(bucket(jobs["processors_req"].to_numpy(float)),
                                                             index=jobs.index).astype(str)).to_numpy(dtype=object)
    submit = seconds(jobs["submit_time"])
    start = seconds(jobs["start_time"])
    wanted = np.zeros(len(jobs), bool)
    wanted[asked] = True
    started = np.flatnonzero(np.isfinite(start))
    times = np.concatenate([submit, start[started]])
    kinds = np.concatenate([np.zeros(len(jobs)), np.ones(len(started))])  # a submit sees no start of its second
    jobs_of = np.concatenate([np.arange(len(jobs)), started])
    by_user: dict = {}
    by_bucket: dict = {}
    user_median = np.full(len(jobs), median)
    bucket_median = np.full(len(jobs), median)
    bucket_p95 = np.full(len(jobs), p95)
    for e in np.lexsort((jobs_of, kinds, times)):
        j = jobs_of[e]
        if kinds[e] == 0:
            if not wanted[j]:
                continue
            waits = by_user.get(user[j])
            if waits:
                user_median[j] = _median(waits)
            waits = by_bucket.get(buckets[j])
            if waits:
                bucket_median[j] = _median(waits)
                bucket_p95[j] = waits[min(int(np.ceil(0.95 * len(waits))) - 1, len(waits) - 1)]
        else:
            wait = max(start[j] - submit[j], 0.0)
            if user[j] is not None:
                insort(by_user.setdefault(user[j], []), wait)
            insort(by_bucket.setdefault(buckets[j], []), wait)
    zero = np.zeros(len(asked))
    return {
        "zero": {"wait_s": zero},
        "user_median": {"wait_s": user_median[asked]},
        "bucket_median": {"wait_s": bucket_median[asked], "wait_bound_s": bucket_p95[asked]},
        "training_median": {"wait_s": np.full(len(asked), median)},
    }


def _median(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
