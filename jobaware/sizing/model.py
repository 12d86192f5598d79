"""The sizing model: for one resource (run time or memory), the fraction of its request each job is recommended,
chosen so that the share of all jobs that outgrow their recommendation is the one stated (1 - coverage), and no
recommendation is ever above the request or below what similar jobs of the user recently needed.

Three parts:
- A distribution per job: gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier, one class per
  step of LEVELS) give each job's probability of using more than each fraction of its request.
- An allocation of the miss budget: each job gets the fraction that minimises cost + knob x miss probability, where
  the cost says what a larger recommendation costs (`objective`): "median" (a job above the common fraction m
  costs 1; m is the smallest fraction at least half the recent jobs can be given), "jobs" (the fraction itself:
  each job counts the same) or "proc_hours" (the processor-hours recommended). One knob trades size against misses
  for every job at once: jobs whose distribution is tight get a small fraction, jobs the model is unsure of keep
  their request. The budget is spent where it buys the most, not 5 % on every job.
- A calibration of the knob: each recent job's score is the least knob at which it would have fitted its
  recommendation; crepes' ConformalPredictiveSystem over these scores gives the knob at the `coverage` percentile,
  which is the split-conformal choice (with its finite-sample guarantee on the share of misses) for a loss that is
  monotone in the knob (Angelopoulos et al.'s conformal risk control, for a miss indicator).

Why these libraries: HistGradientBoostingClassifier is already the project's tree learner (failure), takes missing
history as it is, and ranks jobs by how surely they fit a fraction as well on these traces as one binary classifier
per fraction with ten times the trees (bench/sizing_frontier.py); crepes calibrates from scores alone in
microseconds, which is what lets each day be calibrated on the jobs that ended last before it began. MAPIE's
risk controllers are written for classifiers' precision and recall, not for a knob of this kind.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from crepes import ConformalPredictiveSystem
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from jobaware.errors import JobawareError

MIN_CALIBRATION = 50  # recent jobs a calibration needs at least
# The trees are fitted and asked on one OpenMP thread: a trace is at most a few hundred thousand jobs, and on a
# shared 2-core machine OpenMP's waiting threads cost KTH-SP2's training 32.3 s of CPU against 1.6 s on one thread.
THREADS = 1
# the fractions of its request a job may be recommended (1: its request; nothing above it is ever recommended)
LEVELS = np.array([0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
# no level is certain, and each is a hair likelier to be missed than the next larger: at the largest knob every job
# keeps its request
LEAST_MISS = 1e-6
LARGEST_KNOB = 1e12
# a level the trees expect the job more likely than not to outgrow is never recommended: the budget would buy a
# smaller median with recommendations that mostly fail
MOST_MISS = 0.5
NEVER = 1e9  # the cost of such a level: more than any other level ever costs
HAIR = LEAST_MISS * np.arange(len(LEVELS), 0, -1)
HALF = 0.5  # the median objective's m: the smallest fraction at least this share of recent jobs can be given
OBJECTIVES = ("median", "jobs", "proc_hours")


@dataclass(frozen=True)
class Resource:
    """One thing a job asks for: the column of what it used and of what it asked, the features that hold the
    recent needs of similar jobs of the same user (the floor), the feature that is known only when the user has
    history of it, the step recommendations are rounded up to (a second, a MB), and whether use is counted up to
    the request only (run time: a job is stopped at its limit, and the seconds a trace shows past it are the
    scheduler's delay in stopping it, which any smaller limit would get as well)."""

    name: str
    used: str
    asked: str
    floor: tuple[str, ...]
    history: str
    step: float
    up_to_request: bool


TIME = Resource("time", "run_s", "time_req_s", ("shape_recent_max", "program_recent_max"), "user_last", 1.0, True)
MEMORY = Resource("mem", "mem_used_mb", "mem_req_mb", ("shape_mem_recent_max", "program_mem_recent_max"),
                  "user_mem_last", 1.0, False)
RESOURCES = (TIME, MEMORY)


def counted_use(resource: Resource, used: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """What a recommendation has to cover: the use, up to the request where the resource stops there."""
    return np.fmin(used, asked) if resource.up_to_request else used


def processors(procs: np.ndarray) -> np.ndarray:
    """Processors asked, 1 where unknown."""
    return np.where(np.isfinite(procs) & (procs > 0), procs, 1.0)


def floors(resource: Resource, features: pd.DataFrame) -> np.ndarray:
    """What the most recent similar jobs of the user needed (the larger of its last two jobs of the same shape,
    and of the same name or executable); NaN where there is none."""
    values = np.column_stack([features[c].to_numpy(float) for c in resource.floor])
    with np.errstate(invalid="ignore"):
        return np.expm1(np.fmax.reduce(values, axis=1))


@dataclass(frozen=True)
class Calibration:
    """The knob of one day (or of the last), the median objective's common fraction (NaN for the others), and how
    many recent jobs it was fitted on."""

    knob: float
    fraction: float
    jobs: int


@dataclass
class Jobs:
    """What the allocation needs of some jobs: each one's miss probability at every level, request, processors
    (for the processor-hours cost), floor and, for recent jobs, what it used."""

    miss: np.ndarray
    asked: np.ndarray
    procs: np.ndarray
    floor: np.ndarray
    used: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> Jobs:
        return Jobs(self.miss[rows], self.asked[rows], self.procs[rows], self.floor[rows],
                    None if self.used is None else self.used[rows])


class SizingModel:
    """Recommendations for one resource that all together are met with probability `coverage`."""

    def __init__(self, resource: Resource, coverage: float, params: dict):
        self.resource, self.coverage, self.params = resource, coverage, params
        self.objective = params["objective"]
        self.columns: list[str] = []
        self.trees: HistGradientBoostingClassifier | None = None
        self.work_scale = 1.0  # the median processor-seconds asked by the jobs fitted on (the proc_hours cost's unit)
        self.calibration: Calibration | None = None

    def fit(self, features: pd.DataFrame, used: np.ndarray, asked: np.ndarray, procs: np.ndarray) -> SizingModel:
        """Fit the trees on jobs with a known use and request and with history of the resource: the class of a
        job is the least level its use fits within (len(LEVELS): beyond its request)."""
        use = counted_use(self.resource, used, asked)
        keep = np.isfinite(use) & (use >= 0) & np.isfinite(asked) & (asked > 0) & self.has_history(features)
        if keep.sum() < MIN_CALIBRATION:
            raise JobawareError(f"{self.resource.name}: {int(keep.sum())} jobs with history to learn from; "
                                f"need at least {MIN_CALIBRATION}")
        rows = features.loc[keep]
        self.columns = [c for c in features.columns if rows[c].notna().any() and rows[c].nunique() > 1]
        classes = np.searchsorted(LEVELS, use[keep] / asked[keep], side="left")
        p = self.params
        self.trees = HistGradientBoostingClassifier(
            learning_rate=p["learning_rate"], max_iter=p["max_iter"], max_leaf_nodes=p["max_leaf_nodes"],
            min_samples_leaf=p["min_samples_leaf"], l2_regularization=p["l2_regularization"], random_state=p["seed"])
        with threadpool_limits(THREADS, user_api="openmp"):
            self.trees.fit(rows[self.columns].to_numpy(float), classes)
        self.work_scale = float(np.median(asked[keep] * processors(procs[keep])))
        return self

    def has_history(self, features: pd.DataFrame) -> np.ndarray:
        return features[self.resource.history].notna().to_numpy()

    def miss_probabilities(self, features: pd.DataFrame) -> np.ndarray:
        """Per job and level: the trees' probability that the job uses more than that fraction of its request."""
        with threadpool_limits(THREADS, user_api="openmp"):
            proba = self.trees.predict_proba(features[self.columns].to_numpy(float))
        by_class = np.zeros((len(features), len(LEVELS) + 1))
        if len(self.trees.classes_) == 1:  # the jobs fitted on all in one class (HPC2N's memory: each used all it
            proba = np.ones((len(features), 1))  # asked): scikit-learn's trees then answer with two columns
        by_class[:, self.trees.classes_] = proba
        return np.clip(1.0 - np.cumsum(by_class, axis=1)[:, : len(LEVELS)], 0.0, 1.0) + HAIR

    def jobs(self, features: pd.DataFrame, asked: np.ndarray, procs: np.ndarray,
             used: np.ndarray | None = None) -> Jobs:
        return Jobs(self.miss_probabilities(features), asked, procs, floors(self.resource, features),
                    None if used is None else counted_use(self.resource, used, asked))

    # ---- the allocation
    def costs(self, jobs: Jobs, fraction: float) -> np.ndarray:
        """What each level costs each job under the objective (`fraction`: the median objective's m); NEVER for a
        level below the request with a miss probability over MOST_MISS."""
        if self.objective == "median":  # above m costs 1 (ties go to the request); m or below, a hair less the smaller
            cost = np.broadcast_to(np.where(LEVELS > fraction, 1.0, 1e-3 * LEVELS), jobs.miss.shape)
        elif self.objective == "jobs":
            cost = np.broadcast_to(LEVELS, jobs.miss.shape)
        else:
            work = processors(jobs.procs) * jobs.asked / self.work_scale
            cost = work[:, None] * LEVELS
        unlikely = (jobs.miss > MOST_MISS) & (LEVELS < 1.0)
        return np.where(unlikely, NEVER, cost)

    def level_bounds(self, jobs: Jobs) -> np.ndarray:
        """The recommendation each level gives each job: never below the floor, never above the request, rounded
        up to the resource's step (nondecreasing in the level)."""
        asked = jobs.asked[:, None]
        with np.errstate(invalid="ignore"):
            value = np.fmax(LEVELS * asked, jobs.floor[:, None])
            return np.fmin(np.ceil(value / self.resource.step) * self.resource.step, asked)

    def scores(self, jobs: Jobs) -> dict[float, tuple[np.ndarray, np.ndarray]]:
        """Per candidate fraction m (NaN alone for the objectives without one), two knobs for each recent job: the
        least at which it would have fitted its recommendation (its conformal score), and the least at which its
        recommendation is above m times its request."""
        bounds = self.level_bounds(jobs)
        first_fit = np.sum(bounds < jobs.used[:, None], axis=1)  # the first level whose bound it fits
        fractions = LEVELS[:-1] if self.objective == "median" else np.array([np.nan])
        out = {}
        for fraction in fractions:
            cost = self.costs(jobs, fraction)
            above = (least_knob(cost, jobs.miss, np.sum(bounds <= fraction * jobs.asked[:, None], axis=1))
                     if self.objective == "median" else np.zeros(0))
            out[float(fraction)] = (least_knob(cost, jobs.miss, first_fit), above)
        return out

    def choose(self, scores: dict[float, tuple[np.ndarray, np.ndarray]], rows: slice | np.ndarray) -> Calibration:
        """The calibration from the scores of the recent jobs `rows`: the knob at the coverage percentile of their
        scores; for the median objective, the smallest m for which that knob gives at least HALF of them m or
        less (the largest m when none does)."""
        candidates = list(scores.items())
        for fraction, (fits, above) in candidates:
            knob = conformal_knob(fits[rows], self.coverage)
            if self.objective != "median" or np.mean(above[rows] > knob) >= HALF:
                return Calibration(knob, fraction, int(len(fits[rows])))
        return Calibration(knob, candidates[-1][0], int(len(fits[rows])))

    def calibrate(self, jobs: Jobs) -> SizingModel:
        """Calibrate on recent jobs (what they used known)."""
        self.calibration = self.choose(self.scores(jobs), slice(None))
        return self

    def recommend(self, jobs: Jobs, known: np.ndarray, calibration: Calibration | None = None,
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The recommendations at the calibration (the model's own when none is given), NaN where not `known`:
        each job's level of least cost + knob x miss probability (the larger on a tie); and each one's estimated
        probability of being met (the trees' at its level; 1 at the request where use stops at the request)."""
        calibration = calibration or self.calibration
        if calibration is None:
            raise JobawareError(f"{self.resource.name}: the model is not calibrated")
        cost = self.costs(jobs, calibration.fraction)
        level = len(LEVELS) - 1 - np.argmin((cost + calibration.knob * jobs.miss)[:, ::-1], axis=1)
        rows = np.arange(len(level))
        value, fit = self.level_bounds(jobs)[rows, level], 1.0 - jobs.miss[rows, level] + HAIR[level]
        if self.resource.up_to_request:
            fit = np.where(value >= jobs.asked, 1.0, fit)
        known = known & np.isfinite(jobs.asked) & (jobs.asked > 0)
        return np.where(known, value, np.nan), np.where(known, np.clip(fit, 0.0, 1.0), np.nan)


def least_knob(cost: np.ndarray, miss: np.ndarray, first: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """Per job, the least knob at which its chosen level (least cost + knob x miss, the larger on a tie) is
    `first` or larger (0: always; inf: never): the least, over levels j >= first, of the knob beyond which j costs no
    more than every level k < first, (cost_j - cost_k) / (miss_k - miss_j), exact (miss falls strictly with the
    level)."""
    n, levels = miss.shape
    out = np.empty(n)
    index = np.arange(levels)
    for start in range(0, n, chunk):
        c, m, f = cost[start: start + chunk], miss[start: start + chunk], first[start: start + chunk, None, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            crossing = np.maximum((c[:, :, None] - c[:, None, :]) / (m[:, None, :] - m[:, :, None]), 0.0)  # [i, j, k]
        beyond = np.where(index[None, None, :] < f, crossing, 0.0).max(axis=2)
        out[start: start + chunk] = np.where(index[None, :] >= f[:, :, 0], beyond, np.inf).min(axis=1)
    return out


def conformal_knob(scores: np.ndarray, coverage: float) -> float:
    """The knob at the `coverage` percentile of recent jobs' scores (crepes' higher percentile: the
    ceil((n + 1) x coverage)-th smallest), LARGEST_KNOB where that is beyond every score or every knob."""
    if len(scores) < MIN_CALIBRATION:
        raise JobawareError(f"{len(scores)} recent jobs to calibrate on; need at least {MIN_CALIBRATION}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # too few jobs for the percentile: inf, handled below
        value = ConformalPredictiveSystem().fit(scores).predict(np.zeros(1), higher_percentiles=[100 * coverage])
    return float(min(np.asarray(value, float).reshape(-1)[0], LARGEST_KNOB))
