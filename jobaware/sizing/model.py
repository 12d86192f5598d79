"""The sizing model: for one resource (run time or memory), a quantile of what a job will use relative to what it
asked, from gradient-boosted trees (scikit-learn's quantile loss), made a calibrated bound by a conformal
predictive system (crepes) fitted on the most recent jobs' residuals, and never below what similar jobs of the user
recently needed.

Why these libraries: scikit-learn's HistGradientBoostingRegressor is already the project's tree learner (failure),
fits a quantile directly, takes missing values (a job without some history) as they are, and fits a trace of
200,000 jobs in seconds; crepes' ConformalPredictiveSystem turns its residuals into a one-sided bound at a stated
probability with the finite-sample guarantee of split conformal prediction, refitted from residuals alone in
milliseconds (which is what lets the calibration follow the most recent jobs), where MAPIE's regressors calibrate
two-sided intervals around an estimator they refit, and quantile-forest would replace the tree learner without
calibrating it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from crepes import ConformalPredictiveSystem
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from jobaware.errors import JobawareError

MIN_CALIBRATION = 50  # residuals a bound needs at least
# The trees are fitted and asked on one OpenMP thread: a trace is at most a few hundred thousand jobs, and on a
# shared 2-core machine OpenMP's waiting threads cost KTH-SP2's training 32.3 s of CPU against 1.6 s on one thread.
THREADS = 1


@dataclass(frozen=True)
class Resource:
    """One thing a job asks for: the column of what it used and of what it asked, the features that hold the
    recent needs of similar jobs of the same user (the floor), the feature that is known only when the user has
    history of it, and the step recommendations are rounded up to (a second, a MB: rounding further up, to the
    minutes of Slurm's --time, is left to whoever shows the value, since it only adds to the stated probability)."""

    name: str
    used: str
    asked: str
    floor: tuple[str, ...]
    history: str
    step: float


TIME = Resource("time", "run_s", "time_req_s", ("shape_recent_max", "program_recent_max"), "user_last", 1.0)
MEMORY = Resource("mem", "mem_used_mb", "mem_req_mb", ("shape_mem_recent_max", "program_mem_recent_max"),
                  "user_mem_last", 1.0)
RESOURCES = (TIME, MEMORY)


def log_ratio(used: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """What the model predicts: log1p(used) - log1p(asked)."""
    with np.errstate(invalid="ignore"):
        return np.log1p(used) - np.log1p(asked)


def floors(resource: Resource, features: pd.DataFrame) -> np.ndarray:
    """What the most recent similar jobs of the user needed (the larger of its last two jobs of the same shape,
    and of the same name or executable); NaN where there is none."""
    values = np.column_stack([features[c].to_numpy(float) for c in resource.floor])
    with np.errstate(invalid="ignore"):
        return np.expm1(np.fmax.reduce(values, axis=1))


class SizingModel:
    """A bound on what a job will use, met with probability `coverage`, for one resource."""

    def __init__(self, resource: Resource, coverage: float, params: dict):
        self.resource, self.coverage, self.params = resource, coverage, params
        self.columns: list[str] = []
        self.trees: HistGradientBoostingRegressor | None = None
        self.calibration: ConformalPredictiveSystem | None = None
        self.calibrated_on = 0

    def fit(self, features: pd.DataFrame, used: np.ndarray, asked: np.ndarray) -> SizingModel:
        """Fit the trees on jobs with a known use and request and with history of the resource."""
        target = log_ratio(used, asked)
        keep = np.isfinite(target) & self.has_history(features)
        if keep.sum() < MIN_CALIBRATION:
            raise JobawareError(f"{self.resource.name}: {int(keep.sum())} jobs with history to learn from; "
                                f"need at least {MIN_CALIBRATION}")
        rows = features.loc[keep]
        self.columns = [c for c in features.columns if rows[c].notna().any() and rows[c].nunique() > 1]
        p = self.params
        self.trees = HistGradientBoostingRegressor(
            loss="quantile", quantile=self.coverage, learning_rate=p["learning_rate"], max_iter=p["max_iter"],
            max_leaf_nodes=p["max_leaf_nodes"], min_samples_leaf=p["min_samples_leaf"],
            l2_regularization=p["l2_regularization"], random_state=p["seed"])
        with threadpool_limits(THREADS, user_api="openmp"):
            self.trees.fit(rows[self.columns].to_numpy(float), target[keep])
        return self

    def has_history(self, features: pd.DataFrame) -> np.ndarray:
        return features[self.resource.history].notna().to_numpy()

    def quantile(self, features: pd.DataFrame) -> np.ndarray:
        """The trees' quantile of log1p(used) - log1p(asked)."""
        with threadpool_limits(THREADS, user_api="openmp"):
            return self.trees.predict(features[self.columns].to_numpy(float))

    def calibrate(self, residuals: np.ndarray) -> SizingModel:
        """Fit the conformal system on residuals (log ratio minus the trees' quantile) of recent jobs."""
        self.calibration = fit_calibration(residuals)
        self.calibrated_on = len(residuals)
        return self

    def bound(self, features: pd.DataFrame, asked: np.ndarray, calibration: ConformalPredictiveSystem | None = None,
              quantile: np.ndarray | None = None) -> np.ndarray:
        """The recommendation: the calibrated bound at `coverage`, never below the floor, rounded up to the
        resource's step; NaN where the job asked nothing or its user has no history of the resource."""
        calibration = calibration or self.calibration
        if calibration is None:
            raise JobawareError(f"{self.resource.name}: the model is not calibrated")
        quantile = self.quantile(features) if quantile is None else quantile
        log_bound = calibration.predict(quantile, higher_percentiles=[100 * self.coverage])
        with np.errstate(invalid="ignore", over="ignore"):
            value = np.expm1(np.asarray(log_bound, float).reshape(-1) + np.log1p(asked))
            value = np.fmax(value, floors(self.resource, features))
            value = np.ceil(value / self.resource.step) * self.resource.step
        known = np.isfinite(asked) & (asked > 0) & self.has_history(features)
        return np.where(known, np.maximum(value, self.resource.step), np.nan)


def fit_calibration(residuals: np.ndarray) -> ConformalPredictiveSystem:
    residuals = residuals[np.isfinite(residuals)]
    if len(residuals) < MIN_CALIBRATION:
        raise JobawareError(f"{len(residuals)} recent jobs to calibrate on; need at least {MIN_CALIBRATION}")
    return ConformalPredictiveSystem().fit(residuals)
