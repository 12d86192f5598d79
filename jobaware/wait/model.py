"""The wait model: quantile gradient-boosted trees over log waits (10th, 50th, 90th and 95th percentile), each
quantile then calibrated by a conformal predictive system (crepes) on a later, held-out period.

Why this recipe: a wait is skewed over six orders of magnitude and its spread depends on the queue (a job that fits
now waits seconds or days), so quantiles are learnt per job rather than one spread for all (conformalised quantile
regression, Romano et al. 2019). Each quantile model is then shifted by the conformal quantile of its own residuals on
the calibration period, one side at a time (the 10th percentile from below, the 90th and 95th from above), so the
80 % range and the 95 % bound hold their coverage on data like the calibration period whatever the trees learnt.
The calibration is Mondrian by whether the job could start at once by backfilling, so the two very different kinds
of jobs are calibrated each on their own. crepes (`ConformalPredictiveSystem`) does the calibration: it is made for
exactly this (percentiles of conformal predictive distributions, Mondrian categories) and keeps the finite-sample
rank rule; MAPIE's CQR calibrates a two-sided interval only, and the 95 % bound is one-sided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from jobaware.wait.features import FEATURES, from_log_wait, log_wait
from jobaware.wait.schema import CENTURY

QUANTILES = {"low": 0.10, "median": 0.50, "high": 0.90, "bound": 0.95}
# which side of its residuals each quantile is calibrated on, and the percentile
CALIBRATION = {"low": ("lower", 10), "high": ("higher", 90), "bound": ("higher", 95)}
MONDRIAN = "backfills_now"
LOW, HIGH = float(log_wait(0.0)), float(log_wait(CENTURY))  # the waits a calibrated quantile may take
MIN_BIN_ROWS = 200  # calibration jobs a Mondrian category needs; with fewer, one calibration serves all jobs


@dataclass
class WaitModel:
    params: dict
    columns: list[str] = field(default_factory=list)
    trees: dict = field(default_factory=dict)
    calibrators: dict = field(default_factory=dict)
    calibration_rows: int = 0
    mondrian: bool = False

    def fit(self, x: pd.DataFrame, z: np.ndarray, x_cal: pd.DataFrame, z_cal: np.ndarray) -> WaitModel:
        """Trees on (x, z), log waits; conformal calibration on (x_cal, z_cal), a later period."""
        from crepes import ConformalPredictiveSystem
        from sklearn.ensemble import HistGradientBoostingRegressor

        p = self.params
        # a feature no training job has (a trace without groups) is left out: the trees cannot bin it
        self.columns = [c for c in FEATURES if x[c].notna().any()]
        for name, q in QUANTILES.items():
            self.trees[name] = HistGradientBoostingRegressor(
                loss="quantile", quantile=q, learning_rate=p["learning_rate"], max_iter=p["max_iter"],
                max_leaf_nodes=p["max_leaf_nodes"], min_samples_leaf=p["min_samples_leaf"],
                random_state=p["seed"]).fit(x[self.columns], z)
        raw = self.raw(x_cal)
        counts = np.bincount(_bins(x_cal), minlength=2)
        self.mondrian = bool(counts.min() >= MIN_BIN_ROWS)
        bins = _bins(x_cal) if self.mondrian else None
        for name in CALIBRATION:
            self.calibrators[name] = ConformalPredictiveSystem().fit(z_cal - raw[name], bins=bins)
        self.calibration_rows = len(z_cal)
        return self

    def raw(self, x: pd.DataFrame) -> dict[str, np.ndarray]:
        """Each quantile model's log wait, uncalibrated."""
        frame = x.reindex(columns=self.columns)
        return {name: tree.predict(frame) for name, tree in self.trees.items()}

    def log_quantiles(self, x: pd.DataFrame) -> dict[str, np.ndarray]:
        """The median and the calibrated low, high and bound, in log waits; low <= median <= high <= bound."""
        raw = self.raw(x)
        bins = _bins(x) if self.mondrian else None
        out = {"median": raw["median"]}
        for name, (side, percentile) in CALIBRATION.items():
            kwargs = {f"{side}_percentiles": percentile}
            calibrated = self.calibrators[name].predict(raw[name], bins=bins, y_min=LOW, y_max=HIGH, **kwargs)
            out[name] = np.asarray(calibrated, float).reshape(-1)
        out["low"] = np.minimum(out["low"], out["median"])
        out["high"] = np.maximum(out["high"], out["median"])
        out["bound"] = np.maximum(out["bound"], out["high"])
        return out

    def predict(self, x: pd.DataFrame) -> dict[str, np.ndarray]:
        """Seconds: `wait_s` (the median), `wait_low_s` and `wait_high_s` (the 80 % range), `wait_bound_s` (95 %)."""
        q = self.log_quantiles(x)
        return {"wait_s": from_log_wait(q["median"]), "wait_low_s": from_log_wait(q["low"]),
                "wait_high_s": from_log_wait(q["high"]), "wait_bound_s": from_log_wait(q["bound"])}


def _bins(x: pd.DataFrame) -> np.ndarray:
    return x[MONDRIAN].fillna(0).to_numpy().astype(np.int64)
