"""How recommendations are judged, and the baselines they are judged against, on one time split.

Under-estimation rate: the share of test jobs whose real use exceeds the recommendation. At that rate: the median
of recommended / asked, and the processor-hours (time) or the share of memory (memory) the recommendations would
have released: what was asked and not recommended, net of what was recommended beyond a request. Baselines,
each scaled by the factor that gives the target rate on the training jobs: the user's own request; Tsafrir, Etsion
and Feitelson's predictor (the mean of the user's last two); the user's P95 of every earlier job.
"""

from __future__ import annotations

import bisect

import numpy as np
import pandas as pd

from jobaware.sizing.model import Resource, SizingModel, fit_calibration, log_ratio

DAY = 86_400


def rolling_bounds(model: SizingModel, features: pd.DataFrame, used: np.ndarray, asked: np.ndarray,
                   submit: np.ndarray, end: np.ndarray, pool: np.ndarray, test: np.ndarray,
                   window: int) -> tuple[np.ndarray, np.ndarray]:
    """The recommendations of the `test` jobs (indices), day by day: each day's calibrated on the residuals of the
    `window` jobs of `pool` (a mask of jobs the trees were not fitted on) that ended last before the day began, so
    that no job is sized with anything that ended after its submit. Returns (bounds for every job, NaN outside
    `test`; the residuals of the pool's jobs in the order they ended, for the final calibration)."""
    quantile = np.full(len(features), np.nan)
    wanted = np.flatnonzero(pool | np.isin(np.arange(len(features)), test))
    quantile[wanted] = model.quantile(features.iloc[wanted])
    residual = log_ratio(used, asked) - quantile
    usable = pool & np.isfinite(residual) & model.has_history(features) & np.isfinite(end)
    order = np.flatnonzero(usable)[np.argsort(end[usable], kind="stable")]
    ended, residuals = end[order], residual[order]
    bounds = np.full(len(features), np.nan)
    days = np.floor(submit[test] / DAY)
    for day in np.unique(days):
        jobs = test[days == day]
        upto = int(np.searchsorted(ended, day * DAY, "left"))  # ended strictly before the day began
        calibration = fit_calibration(residuals[max(0, upto - window): upto])
        bounds[jobs] = model.bound(features.iloc[jobs], asked[jobs], calibration, quantile[jobs])
    return bounds, residuals


def factor(used: np.ndarray, base: np.ndarray, coverage: float) -> float:
    """The least factor f for which used <= f * base on a share `coverage` of the jobs (base known and positive)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = used / base
    ratio = ratio[np.isfinite(ratio)]
    return float(np.quantile(ratio, coverage, method="higher")) if len(ratio) else float("nan")


def user_p95(jobs: pd.DataFrame, used: np.ndarray, submit: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per job: the 95th percentile (the higher value) of what the user's jobs that ended before its submit used."""
    users = jobs["user"].to_numpy(dtype=object, na_value=None)
    ended = np.flatnonzero(np.isfinite(end) & np.isfinite(used))
    events = sorted([(submit[i], 0, i) for i in range(len(jobs))] + [(end[i], 1, i) for i in ended])
    seen: dict[str, list[float]] = {}
    out = np.full(len(jobs), np.nan)
    for _, is_end, i in events:
        user = users[i]
        if user is None:
            continue
        values = seen.setdefault(user, [])
        if is_end:
            bisect.insort(values, used[i])
        elif values:
            out[i] = values[min(len(values) - 1, int(np.ceil(0.95 * len(values))) - 1)]
    return out


def scores(used: np.ndarray, recommended: np.ndarray, asked: np.ndarray, procs: np.ndarray, coverage: float,
           resource: Resource) -> dict[str, float]:
    """The figures of recommendations against what the jobs used (jobs with a recommendation)."""
    known = np.isfinite(recommended) & np.isfinite(used) & np.isfinite(asked)
    used, recommended, asked, procs = used[known], recommended[known], asked[known], procs[known]
    if not len(used):
        return {"jobs": 0.0}
    released = (asked - recommended) * procs  # net: a recommendation above the request takes back
    with np.errstate(divide="ignore", invalid="ignore"):  # a baseline may recommend 0 (its base ran 0 s)
        fits = np.minimum(used / recommended, 1.0)[used <= recommended]
    figures = {"jobs": float(len(used)), "under_rate": float(np.mean(used > recommended)),
               "median_ratio": float(np.median(recommended / asked)),
               "released_share": float(released.sum() / (asked * procs).sum()),
               "quantile_loss": quantile_loss(used, recommended, coverage),
               # Fan et al.'s TRIP reports accuracy as the mean of used / predicted over the jobs that fit
               "accuracy": float(np.nanmean(fits)) if len(fits) else float("nan")}
    if resource.name == "time":
        figures["released_proc_hours"] = float(released.sum() / 3600)
    return figures


def quantile_loss(used: np.ndarray, recommended: np.ndarray, coverage: float) -> float:
    """The pinball loss at `coverage` of log1p(recommended) against log1p(used): low when bounds are both tight and
    met as often as stated (a proper score for a quantile)."""
    miss = np.log1p(used) - np.log1p(recommended)
    return float(np.mean(np.maximum(coverage * miss, (coverage - 1) * miss)))


def baselines(jobs: pd.DataFrame, features: pd.DataFrame, resource: Resource, train: np.ndarray,
              submit: np.ndarray, end: np.ndarray, coverage: float) -> dict[str, tuple[float, np.ndarray]]:
    """Each baseline's factor (fitted on the `train` jobs) and its recommendations for every job."""
    used = jobs[resource.used].to_numpy(float, na_value=np.nan)
    asked = jobs[resource.asked].to_numpy(float, na_value=np.nan)
    prefix = "" if resource.name == "time" else "mem_"
    bases = {"request": asked, "tsafrir": np.expm1(features[f"user_{prefix}tef"].to_numpy(float)),
             "user_p95": user_p95(jobs, used, submit, end)}
    out = {}
    for name, base in bases.items():
        scale = factor(used[train], base[train], coverage)
        out[name] = (scale, base * scale)
    return out
