"""How recommendations are judged, and the baselines they are judged against, on one time split.

Under-estimation rate: the share of test jobs whose use exceeds the recommendation, run time counted up to the
job's own limit (the seconds past it are the scheduler's delay in stopping it, which a smaller limit would get as
well; `under_rate_raw` counts them too). At that rate: the median of recommended / asked, the share of jobs
recommended less than they asked and their median, the processor-hours (time) or the share of memory (memory) the
recommendations would have released (what was asked and not recommended), and the processor-hours of the jobs a
recommendation would have stopped short (`lost_share`, time). Baselines, each scaled by the factor that gives the
target rate on the training jobs and, like the model, never above the request: the user's own request; Tsafrir,
Etsion and Feitelson's predictor (the mean of the user's last two); the user's P95 of every earlier job.
"""

from __future__ import annotations

import bisect

import numpy as np
import pandas as pd

from jobaware.sizing.model import Jobs, Resource, SizingModel, counted_use

DAY = 86_400


def rolling_bounds(model: SizingModel, features: pd.DataFrame, used: np.ndarray, asked: np.ndarray,
                   procs: np.ndarray, submit: np.ndarray, end: np.ndarray, pool: np.ndarray, test: np.ndarray,
                   window: int) -> tuple[np.ndarray, np.ndarray, Jobs]:
    """The recommendations of the `test` jobs (indices), day by day: each day's calibrated on the `window` jobs
    of `pool` (a mask of jobs the trees were not fitted on) that ended last before the day began, so that no job
    is sized with anything that ended after its submit. Returns (recommendations and their estimated probability
    of being met for every job, NaN outside `test`; the pool's jobs in the order they ended, for the final
    calibration)."""
    usable = pool & np.isfinite(used) & model.has_history(features) & np.isfinite(end) & (asked > 0)
    order = np.flatnonzero(usable)[np.argsort(end[usable], kind="stable")]
    recent = model.jobs(features.iloc[order], asked[order], procs[order], used[order])
    scores, ended = model.scores(recent), end[order]
    sized = model.jobs(features.iloc[test], asked[test], procs[test])
    known = model.has_history(features.iloc[test])
    bounds, fits = np.full(len(features), np.nan), np.full(len(features), np.nan)
    days = np.floor(submit[test] / DAY)
    for day in np.unique(days):
        today = np.flatnonzero(days == day)
        upto = int(np.searchsorted(ended, day * DAY, "left"))  # ended strictly before the day began
        calibration = model.choose(scores, slice(max(0, upto - window), upto))
        bounds[test[today]], fits[test[today]] = model.recommend(sized.take(today), known[today], calibration)
    return bounds, fits, recent


def factor(used: np.ndarray, base: np.ndarray, asked: np.ndarray, coverage: float) -> float:
    """The least factor f for which a share `coverage` of the jobs (base known) use no more than f * base capped at
    their request (inf where even the requests miss more than 1 - coverage)."""
    known = np.isfinite(base) & np.isfinite(used) & np.isfinite(asked)
    used, base, asked = used[known], base[known], asked[known]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(used > 0, used / base, 0.0)  # a base of 0 s: fits only what used nothing
    always = used > asked  # missed at any factor
    allowed = int((1 - coverage) * len(used)) - int(always.sum())
    ratio = np.sort(ratio[~always])
    if not len(used) or allowed < 0:
        return float("inf")
    return float(ratio[len(ratio) - 1 - allowed]) if allowed < len(ratio) else 0.0


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
           resource: Resource, stated: np.ndarray | None = None) -> dict[str, float]:
    """The figures of recommendations against what the jobs used (jobs with a recommendation); with `stated`, each
    recommendation's stated probability of being met, their mean and the share met among the jobs recommended
    less than they asked."""
    known = np.isfinite(recommended) & np.isfinite(used) & np.isfinite(asked)
    raw, recommended, asked, procs = used[known], recommended[known], asked[known], procs[known]
    if not len(raw):
        return {"jobs": 0.0}
    used = counted_use(resource, raw, asked)
    released = (asked - recommended) * procs
    ratio, missed = recommended / asked, used > recommended
    with np.errstate(divide="ignore", invalid="ignore"):  # a baseline may recommend 0 (its base ran 0 s)
        fits = np.minimum(used / recommended, 1.0)[~missed]
    figures = {"jobs": float(len(used)), "under_rate": float(np.mean(missed)),
               "under_rate_raw": float(np.mean(raw > recommended)),
               "median_ratio": float(np.median(ratio)), "mean_ratio": float(np.mean(ratio)),
               "below_share": float(np.mean(ratio < 1)),
               "median_ratio_below": float(np.median(ratio[ratio < 1])) if (ratio < 1).any() else float("nan"),
               "released_share": float(released.sum() / (asked * procs).sum()),
               "quantile_loss": quantile_loss(used, recommended, coverage),
               # Fan et al.'s TRIP reports accuracy as the mean of used / predicted over the jobs that fit
               "accuracy": float(np.nanmean(fits)) if len(fits) else float("nan")}
    if stated is not None and (ratio < 1).any():
        figures["fit_stated_below"] = float(np.mean(stated[known][ratio < 1]))
        figures["fit_met_below"] = float(np.mean(~missed[ratio < 1]))
    if resource.name == "time":
        figures["released_proc_hours"] = float(released.sum() / 3600)
        figures["lost_share"] = float((recommended * procs)[missed].sum() / (asked * procs).sum())
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
        scale = factor(counted_use(resource, used[train], asked[train]), base[train], asked[train], coverage)
        with np.errstate(invalid="ignore"):
            out[name] = (scale, np.where(np.isfinite(base), np.fmin(base * scale, asked), np.nan))
    return out
