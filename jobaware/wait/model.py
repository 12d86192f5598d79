"""The wait model: a predictive distribution of each job's wait, its point, and its range and bound calibrated.

Gradient-boosted trees (scikit-learn) classify the wait into doubling classes: under a minute, 1-2 minutes, 2-4,
... up to `CLASSES` classes (the last open-ended). Within a class the wait is spread evenly in log time (under a
minute: evenly in time), which makes the class probabilities a whole distribution: its 10th, 50th, 90th and 95th
percentiles, and the chance that any given point lies within a factor of two of the wait.

- `wait_s`, the point: by default the wait most likely to be within a factor of two of the actual one (with the 60 s
  rule: any point under a minute is right for a wait under a minute) — the point the issue's judge rewards, and the
  one a person reads as "about" — or, of the points nearly as likely (`point_tolerance`), the one with the least
  expected absolute error; `point="median"` answers the distribution's median instead. It is kept inside the 80 %
  range.
- `wait_low_s`..`wait_high_s`, the 80 % range, and `wait_bound_s`, the 95 % bound: the distribution's 10th, 90th and
  95th percentiles, each shifted by the conformal quantile of its own residuals (log waits) on the latest `window`
  jobs whose waits are known, one side at a time (conformalised quantile regression, Romano et al. 2019). The
  model keeps the latest `window` of its calibration period (which follows the trees' period in time); over a
  trace (`predict_in_time`), each job is calibrated on the latest `window` jobs that had started before its
  submit, so the range and the bound follow a queue whose regime changes (OSC-Clust's test period starts 71 % of
  its jobs at once against 38 % in its calibration period: 80 % coverage 0.71 with the calibration period's
  residuals, 0.79 with the rolling window), and the levels themselves adapt to the misses seen so far (adaptive
  conformal inference, `adapt_rate`): a window lags a drifting queue. The calibration is Mondrian: jobs that could
  start at once by backfilling and the others are calibrated each on their own.

crepes (`ConformalPredictiveSystem`) does the calibration: it is made for this (percentiles of conformal predictive
distributions, Mondrian categories, the finite-sample rank rule). MAPIE's conformalised quantile regressor
calibrates a two-sided interval, and the 95 % bound is one-sided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from jobaware.wait.features import FEATURES, from_log_wait, log_wait
from jobaware.wait.schema import CENTURY

MINUTE = 60.0
CLASSES = 16  # under a minute, then doubling classes from a minute up to 2**14 minutes (11 days) and beyond
# class k >= 1 holds waits in [EDGES[k], EDGES[k + 1]); the last class is taken to end at twice its start
EDGES = np.concatenate([[0.0], MINUTE * 2.0 ** np.arange(CLASSES)])
PERCENTILES = {"low": 10, "median": 50, "high": 90, "bound": 95}
CALIBRATION = {"low": ("lower", 10), "high": ("higher", 90), "bound": ("higher", 95)}
ANSWERS = {"low": "wait_low_s", "high": "wait_high_s", "bound": "wait_bound_s"}  # each calibrated percentile's field
MISS_LIMITS = (0.001, 0.5)  # the miss rates adaptive calibration may aim at
# candidate points: some under a minute, then a quarter of a doubling apart
POINTS = np.concatenate([[0.0, 1, 2, 3, 5, 8, 12, 20, 30, 45, MINUTE - 1], MINUTE * 2.0 ** np.arange(0, CLASSES - 1, 0.25)])
LOW, HIGH = float(log_wait(0.0)), float(log_wait(CENTURY))  # the log waits a calibrated percentile may take
MONDRIAN = "backfills_now"
MIN_BIN_ROWS = 200  # calibration jobs a Mondrian category needs; with fewer, one calibration serves all jobs
MIN_WINDOW = 500  # residuals a rolling calibration needs; with fewer, the model's own calibration serves


MIN_CLASS_ROWS = 100  # training jobs the longest class needs: the longer waits beyond it join it


def wait_class(waits: np.ndarray, top: int = CLASSES - 1) -> np.ndarray:
    """Each wait's class: 0 under a minute, k for [60 x 2**(k-1), 60 x 2**k), `top` for any longer wait."""
    doubling = np.floor(np.log2(np.maximum(waits, MINUTE) / MINUTE)).astype(np.int64) + 1
    return np.where(waits < MINUTE, 0, np.minimum(doubling, top))


def top_class(waits: np.ndarray) -> int:
    """The longest class with MIN_CLASS_ROWS training jobs at or beyond it. A class of a few jobs makes the trees'
    probabilities unstable far from the training data (8 jobs of 33,440 in the last class of SDSC-SP2 tripled the
    share of the next-to-shortest class on the test period)."""
    beyond = np.cumsum(np.bincount(wait_class(waits), minlength=CLASSES)[::-1])[::-1]
    return int(max(np.flatnonzero(beyond >= MIN_CLASS_ROWS).max(initial=1), 1))


SHARES = np.linspace(0.0, 1.0, 21)  # the sub-minute waits' shape: their quantiles at these shares
UNIFORM = SHARES * MINUTE


def _share_below(values: np.ndarray, under: np.ndarray) -> np.ndarray:
    """For each class (rows) and value (columns): the share of the class's waits below the value; under a minute
    as the training's sub-minute waits were spread (`under`: their quantiles at SHARES), above it evenly in log
    time."""
    values = np.asarray(values, float)[None, :]
    low, high = np.maximum(EDGES[:-1, None], 1e-9), EDGES[1:, None]  # the first row is set below
    out = np.clip((np.log(np.clip(values, low, high)) - np.log(low)) / (np.log(high) - np.log(low)), 0.0, 1.0)
    out[0] = np.where(values[0] >= MINUTE, 1.0, np.interp(values[0], under, SHARES, left=0.0, right=1.0))
    return out


def cdf(probabilities: np.ndarray, values: np.ndarray, under: np.ndarray = UNIFORM) -> np.ndarray:
    """P(wait <= value) per job (rows) and value (columns)."""
    return probabilities @ _share_below(values, under)


def percentile(probabilities: np.ndarray, q: float, under: np.ndarray = UNIFORM) -> np.ndarray:
    """The q-th percentile of each job's wait."""
    cumulative = np.cumsum(probabilities, axis=1)
    k = np.minimum((cumulative >= q / 100.0 - 1e-12).argmax(axis=1), CLASSES - 1)
    inside = probabilities[np.arange(len(k)), k]
    before = cumulative[np.arange(len(k)), k] - inside
    share = np.clip((q / 100.0 - before) / np.maximum(inside, 1e-12), 0.0, 1.0)
    low, high = np.maximum(EDGES[k], 1e-9), EDGES[k + 1]
    return np.where(k == 0, np.interp(share, SHARES, under), np.exp(np.log(low) + share * np.log(high / low)))


def point(probabilities: np.ndarray, under: np.ndarray = UNIFORM, tolerance: float = 0.0) -> np.ndarray:
    """The point most likely to be within a factor of two of each job's wait (any point under a minute is within
    for a wait under a minute, so 59 s also takes the waits of one to two minutes); of the points whose chance is
    within `tolerance` of the best, the one with the least expected absolute error."""
    upper = cdf(probabilities, np.maximum(2 * POINTS, MINUTE), under)
    chance = np.where((POINTS < MINUTE)[None, :], upper, upper - cdf(probabilities, POINTS / 2, under))
    # E|wait - p| = E[wait] - p + 2 x the integral of the CDF from 0 to p (trapezoids over the candidates)
    below = cdf(probabilities, POINTS, under)
    integral = np.concatenate([np.zeros((len(below), 1)),
                               np.cumsum((below[:, 1:] + below[:, :-1]) / 2 * np.diff(POINTS), axis=1)], axis=1)
    near = chance >= chance.max(axis=1, keepdims=True) - tolerance
    return POINTS[np.where(near, 2 * integral - POINTS, np.inf).argmin(axis=1)]


@dataclass
class Residuals:
    """Jobs whose waits are known, in start order: when each became known (its start, epoch seconds), its key
    (`features.job_keys`), its log wait, the distribution's raw percentiles at its submit and its Mondrian category."""

    start: np.ndarray
    key: np.ndarray
    z: np.ndarray
    raw: dict[str, np.ndarray]
    bins: np.ndarray

    def __len__(self) -> int:
        return len(self.start)

    def take(self, rows) -> Residuals:
        return Residuals(self.start[rows], self.key[rows], self.z[rows], {k: v[rows] for k, v in self.raw.items()},
                         self.bins[rows])

    @staticmethod
    def join(parts: list[Residuals]) -> Residuals:
        """The parts as one, in start order."""
        start = np.concatenate([p.start for p in parts])
        joined = Residuals(start, np.concatenate([p.key for p in parts]), np.concatenate([p.z for p in parts]),
                           {k: np.concatenate([p.raw[k] for p in parts]) for k in CALIBRATION},
                           np.concatenate([p.bins for p in parts]))
        return joined.take(np.argsort(start, kind="stable"))


@dataclass
class Calibration:
    """One conformal predictive system per calibrated percentile, fitted on residuals (Mondrian where both
    categories have MIN_BIN_ROWS jobs)."""

    systems: dict
    mondrian: bool

    @staticmethod
    def fit(residuals: Residuals) -> Calibration:
        from crepes import ConformalPredictiveSystem

        mondrian = bool(np.bincount(residuals.bins, minlength=2).min() >= MIN_BIN_ROWS)
        bins = residuals.bins if mondrian else None
        return Calibration({name: ConformalPredictiveSystem().fit(residuals.z - residuals.raw[name], bins=bins)
                            for name in CALIBRATION}, mondrian)

    def apply(self, raw: dict[str, np.ndarray], bins: np.ndarray,
              misses: dict[str, float] | None = None) -> dict[str, np.ndarray]:
        """The calibrated percentiles in seconds; `misses`: the share of jobs each may miss (default its nominal
        level's: 0.10 below the range, 0.10 above it, 0.05 above the bound)."""
        import warnings

        out = {}
        for name, (side, level) in CALIBRATION.items():
            if misses is not None:
                level = 100 * misses[name] if side == "lower" else 100 * (1 - misses[name])
            with warnings.catch_warnings():  # too few residuals for a level: the percentile is open (y_min, y_max)
                warnings.filterwarnings("ignore", "the no. of calibration examples is too small")
                shifted = self.systems[name].predict(raw[name], bins=bins if self.mondrian else None, y_min=LOW,
                                                     y_max=HIGH, **{f"{side}_percentiles": level})
            out[name] = from_log_wait(np.asarray(shifted, float).reshape(-1))
        return out


@dataclass
class WaitModel:
    params: dict
    columns: list[str] = field(default_factory=list)
    trees: object = None
    calibration: Calibration | None = None
    recent: Residuals | None = None  # the latest `window` residuals of the calibration period
    trained_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))  # every training job's key
    top: int = CLASSES - 1
    under: np.ndarray = field(default_factory=lambda: UNIFORM)

    @property
    def window(self) -> int:
        return int(self.params["calibration_window"])

    def fit(self, x: pd.DataFrame, waits: np.ndarray, keys: np.ndarray, x_cal: pd.DataFrame, waits_cal: np.ndarray,
            started_cal: np.ndarray, keys_cal: np.ndarray) -> WaitModel:
        """Trees on (x, waits in seconds); conformal calibration on the latest `window` jobs of (x_cal, waits_cal),
        a later period, by their starts (`started_cal`, epoch seconds); then, with `refit`, the trees again on both
        periods, calibrated by the first trees' residuals until jobs after the training data have started.
        `keys`, `keys_cal`: the jobs' `job_keys`, so that no job the trees learnt from ever calibrates them."""
        self._fit_trees(x, waits)
        known = self.residuals(x_cal, waits_cal, started_cal, keys_cal)
        self.recent = known.take(slice(max(len(known) - self.window, 0), None))
        self.calibration = Calibration.fit(self.recent)
        if self.params["refit"]:
            self._fit_trees(pd.concat([x, x_cal], ignore_index=True), np.concatenate([waits, waits_cal]))
        self.trained_keys = np.unique(np.concatenate([keys, keys_cal]))
        return self

    def _fit_trees(self, x: pd.DataFrame, waits: np.ndarray) -> None:
        from sklearn.ensemble import HistGradientBoostingClassifier
        from threadpoolctl import threadpool_limits

        p = self.params
        # a feature no training job has (a trace without groups) is left out: the trees cannot bin it
        self.columns = [c for c in FEATURES if x[c].notna().any()]
        self.top = top_class(waits)
        if (waits < MINUTE).sum() >= len(SHARES):
            self.under = np.quantile(waits[waits < MINUTE], SHARES)
        leaf = max(p["min_samples_leaf"], int(p["min_leaf_fraction"] * len(waits)))
        self.trees = HistGradientBoostingClassifier(
            learning_rate=p["learning_rate"], max_iter=p["max_iter"], max_leaf_nodes=p["max_leaf_nodes"],
            min_samples_leaf=leaf, early_stopping=False, random_state=p["seed"])
        with threadpool_limits(p["threads"], user_api="openmp"):
            self.trees.fit(x[self.columns], wait_class(waits, self.top))

    def residuals(self, x: pd.DataFrame, waits: np.ndarray, started: np.ndarray, keys: np.ndarray,
                  probabilities: np.ndarray | None = None) -> Residuals:
        """The jobs of `x` with a known wait and start, as residuals in start order."""
        known = np.isfinite(waits) & np.isfinite(started)
        probabilities = self.probabilities(x) if probabilities is None else probabilities
        raw = self.raw(probabilities[known])
        residuals = Residuals(started[known], keys[known], log_wait(waits[known]),
                              {name: raw[name] for name in CALIBRATION}, _bins(x)[known])
        return residuals.take(np.argsort(residuals.start, kind="stable"))

    def probabilities(self, x: pd.DataFrame) -> np.ndarray:
        """Each job's probability of each wait class."""
        from threadpoolctl import threadpool_limits

        out = np.zeros((len(x), CLASSES))
        with threadpool_limits(self.params.get("threads", 1), user_api="openmp"):
            out[:, self.trees.classes_] = self.trees.predict_proba(x.reindex(columns=self.columns))
        return out

    def raw(self, probabilities: np.ndarray) -> dict[str, np.ndarray]:
        """The distribution's percentiles, uncalibrated, in log waits (under a minute spread evenly: the calibration
        shifts them in log waits, where a few seconds more or less under a minute hardly count)."""
        return {name: log_wait(percentile(probabilities, q)) for name, q in PERCENTILES.items()}

    def predict(self, x: pd.DataFrame, calibration: Calibration | None = None,
                probabilities: np.ndarray | None = None, misses: dict[str, float] | None = None
                ) -> dict[str, np.ndarray]:
        """Seconds: `wait_s` (the point), `wait_low_s` and `wait_high_s` (the 80 % range), `wait_bound_s` (95 %),
        calibrated by `calibration` (default: the model's own, its calibration period's latest `window` jobs) at the
        nominal levels or at the miss rates `misses` (`Calibration.apply`)."""
        probabilities = self.probabilities(x) if probabilities is None else probabilities
        raw = self.raw(probabilities)
        calibrated = (calibration or self.calibration).apply(raw, _bins(x), misses)
        low, high = calibrated["low"], np.maximum(calibrated["high"], calibrated["low"])
        answer = np.clip(self.point(probabilities), low, high)
        return {"wait_s": answer, "wait_low_s": low, "wait_high_s": high,
                "wait_bound_s": np.maximum(calibrated["bound"], high)}

    def point(self, probabilities: np.ndarray, kind: str | None = None) -> np.ndarray:
        """`wait_s`: the point the parameters ask for (or `kind`: "within_x2" or "median")."""
        if (kind or self.params.get("point")) == "median":
            return percentile(probabilities, PERCENTILES["median"], self.under)
        return point(probabilities, self.under, self.params.get("point_tolerance", 0.0))

    def predict_in_time(self, x: pd.DataFrame, submitted: np.ndarray, waits: np.ndarray, started: np.ndarray,
                        keys: np.ndarray) -> dict[str, np.ndarray]:
        """`predict` for the jobs of a trace (`submitted`, `started`: epoch seconds; `waits` where known; `keys`:
        their `job_keys`), each calibrated on the latest `window` jobs that had started before its submit: the
        model's own calibration jobs, then the trace's jobs as they start, those the model was trained on left out.
        The window moves on by a tenth of itself at a time; a job's own wait, and any wait known only at or after
        its submit, never calibrates it.

        The levels adapt too (adaptive conformal inference, Gibbs and Candès 2021): each calibrated percentile aims
        at its nominal miss rate plus `adapt_rate` x (nominal misses - actual misses) summed over the earlier
        answers whose outcome was known before the submit (a hit or a miss is known at submit + the lesser of the
        wait and the answer), those of jobs the model learnt from left out. A queue whose regime changes makes a
        window of past residuals lag (HPC2N's 80 % coverage ran 0.54 to 0.86 over tenths of its test period); the
        adaptive levels hold the long-run coverage near the nominal one through the drift."""
        probabilities = self.probabilities(x)
        own = self.residuals(x, waits, started, keys, probabilities)
        unseen = ~np.isin(keys, self.trained_keys)
        own = own.take(~np.isin(own.key, self.trained_keys))
        pool = Residuals.join([self.recent, own])
        known = np.searchsorted(pool.start, submitted, side="left")
        step = max(self.window // 10, 1)
        upto = known // step * step
        answer = {name: np.full(len(x), np.nan) for name in ("wait_s", "wait_low_s", "wait_high_s", "wait_bound_s")}
        rate = float(self.params.get("adapt_rate", 0.0))
        for end in np.unique(upto):  # in submit order
            rows = np.flatnonzero(upto == end)
            window = pool.take(slice(max(end - self.window, 0), end))
            calibration = Calibration.fit(window) if len(window) >= MIN_WINDOW else self.calibration
            misses = _adapted(answer, submitted, waits, unseen, float(submitted[rows].min()), rate) if rate else None
            part = self.predict(x.iloc[rows], calibration, probabilities[rows], misses)
            for name, values in part.items():
                answer[name][rows] = values
        return answer


def _adapted(answer: dict[str, np.ndarray], submitted: np.ndarray, waits: np.ndarray, unseen: np.ndarray,
             now: float, rate: float) -> dict[str, float]:
    """Each calibrated percentile's miss rate to aim at `now`: its nominal one plus `rate` x (nominal - actual)
    misses summed over the answers given so far (NaN where none yet) whose outcome was known before `now`."""
    out = {}
    for name, (side, level) in CALIBRATION.items():
        nominal = level / 100 if side == "lower" else 1 - level / 100
        given = answer[ANSWERS[name]]
        with np.errstate(invalid="ignore"):
            known = unseen & (submitted + np.minimum(waits, given) < now)  # NaN (no answer, no wait) is never known
            missed = waits[known] < given[known] if side == "lower" else waits[known] > given[known]
        out[name] = float(np.clip(nominal + rate * (known.sum() * nominal - missed.sum()), *MISS_LIMITS))
    return out


def _bins(x: pd.DataFrame) -> np.ndarray:
    return x[MONDRIAN].fillna(0).to_numpy().astype(np.int64)
