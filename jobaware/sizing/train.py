"""Featurize, fit, calibrate and evaluate the sizing model against its baselines on one time-ordered split.

The trees of each resource (run time, memory) are fitted on the earlier training jobs; the later training jobs
(`calibration_fraction`) and then the test jobs, as each ends, calibrate the allocation: every test day is sized
with the knob calibrated on the `calibration_jobs` jobs that ended last before it began. The registered bundle
carries the trees, the calibration of the last day, and every entity's history after the last job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import JobawareError
from jobaware.model import Evaluation
from jobaware.sizing.bundle import SizingBundle
from jobaware.sizing.evaluate import baselines, rolling_bounds, scores
from jobaware.sizing.features import build_features, seconds
from jobaware.sizing.model import MEMORY, MIN_CALIBRATION, RESOURCES, TIME, Resource, SizingModel
from jobaware.sizing.params import check_params
from jobaware.sizing.schema import table_path

WHAT = {TIME.name: "a run time, a time asked", MEMORY.name: "a memory use, a memory asked"}
EVAL_COLUMNS = ("run_s", "time_req_s", "mem_used_mb", "mem_req_mb", "procs")


@dataclass(kw_only=True)
class SizingEvaluation(Evaluation):
    test_features: pd.DataFrame  # the gate's evaluation data: the test jobs' features and what they used and asked
    test_jobs: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class Split:
    train: np.ndarray  # masks over the jobs in submit order
    test: np.ndarray
    cut: float         # seconds since the epoch


def time_split(submit: np.ndarray, end: np.ndarray, test_fraction: float) -> Split:
    """Train on jobs submitted AND ended before the cut (what was known then), test on jobs submitted after."""
    cut = float(submit[min(int(len(submit) * (1 - test_fraction)), len(submit) - 1)])
    return Split((submit < cut) & (end < cut), submit >= cut, cut)


def prepare(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs.sort_values("submit_time", kind="stable").reset_index(drop=True)


def train_in_memory(jobs: pd.DataFrame, params: dict | None = None) -> tuple[SizingBundle, SizingEvaluation]:
    """Featurize every job from its own history, fit and calibrate each resource the jobs tell, evaluate on the
    test part against the baselines; the bundle and the evaluation."""
    p = check_params(params or {})
    jobs = prepare(jobs)
    if not len(jobs):
        raise JobawareError("no jobs to train on")
    features, states = build_features(jobs)
    submit, end = seconds(jobs["submit_time"]), seconds(jobs["end_time"])
    split = time_split(submit, end, p["test_fraction"])
    procs = jobs["procs"].to_numpy(float, na_value=np.nan)
    procs = np.where(np.isfinite(procs) & (procs > 0), procs, 1.0)
    models, metrics, test_rows = {}, {"model": {}}, split.test
    primary = primary_resource(jobs)
    for resource in RESOURCES:
        used = jobs[resource.used].to_numpy(float, na_value=np.nan)
        asked = jobs[resource.asked].to_numpy(float, na_value=np.nan)
        learnable = np.isfinite(used) & (used >= 0) & np.isfinite(asked) & (asked > 0)
        train = np.flatnonzero(split.train & learnable)
        if len(train) < 2 * MIN_CALIBRATION:
            if resource is primary:
                raise JobawareError(f"{len(train)} training jobs with a known {resource.used} and {resource.asked}; sizing "
                                    f"needs at least {2 * MIN_CALIBRATION} (jobs that state neither a time limit nor "
                                    "memory cannot be sized)")
            continue
        fitted, pool = _fit_part(train, p)
        model = SizingModel(resource, p["coverage"], p).fit(features.iloc[fitted], used[fitted], asked[fitted],
                                                            procs[fitted])
        pool_mask = np.zeros(len(jobs), bool)
        pool_mask[pool] = True
        pool_mask |= split.test
        tested = np.flatnonzero(split.test & learnable)
        bounds, fits, recent = rolling_bounds(model, features, used, asked, procs, submit, end, pool_mask, tested,
                                           p["calibration_jobs"])
        last = np.arange(max(0, len(recent.asked) - p["calibration_jobs"]), len(recent.asked))
        model.calibrate(recent.take(last))
        models[resource.name] = model
        prefix = "" if resource is TIME else "mem_"
        with_history = tested[model.has_history(features.iloc[tested])]
        figures = scores(used[tested], bounds[tested], asked[tested], procs[tested], p["coverage"], resource,
                         fits[tested])
        figures["no_history_share"] = 1 - len(with_history) / max(len(tested), 1)
        metrics["model"].update(_named(figures, prefix, resource is primary))
        for name, (scale, recommended) in baselines(jobs, features, resource, train, submit, end,
                                                    p["coverage"]).items():
            judged = np.where(np.isfinite(bounds), recommended, np.nan)  # the jobs the model recommended for
            figures = scores(used[tested], judged[tested], asked[tested], procs[tested], p["coverage"], resource)
            metrics.setdefault(name, {}).update(_named({**figures, "factor": scale}, prefix, resource is primary))
    bundle = SizingBundle(models=models, states=states, coverage=p["coverage"],
                          trained_on={"jobs": len(jobs), "clusters": sorted(jobs["cluster"].dropna().unique().tolist())})
    test_jobs = jobs.loc[test_rows, list(EVAL_COLUMNS)].reset_index(drop=True)
    evaluation = SizingEvaluation(metrics=metrics, test_features=features.loc[test_rows].reset_index(drop=True),
                                  test_jobs=test_jobs, run_params={"rows": len(jobs), "split_time": split.cut})
    return bundle, evaluation


def primary_resource(jobs: pd.DataFrame) -> Resource:
    """The resource the gate judges: run time, or memory where no job states a time limit and some state memory
    (HTCondor jobs)."""
    def stated(resource: Resource) -> bool:
        asked = jobs[resource.asked].to_numpy(float, na_value=np.nan)
        return bool((np.isfinite(asked) & (asked > 0)).any())

    return MEMORY if not stated(TIME) and stated(MEMORY) else TIME


def _named(figures: dict, prefix: str, primary: bool) -> dict:
    """A resource's figures under its prefix; the primary resource's quantile loss also as `quantile_loss` (the
    gate's metric)."""
    return {**{prefix + k: v for k, v in figures.items()},
            **({"quantile_loss": figures["quantile_loss"]} if primary else {})}


def _fit_part(train: np.ndarray, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """The training jobs the trees are fitted on (the earlier ones, at most max_train_rows of them, a seeded
    sample) and the later ones that calibrate (the latest `calibration_fraction`)."""
    calibrating = max(MIN_CALIBRATION, int(len(train) * p["calibration_fraction"]))
    fitted, pool = train[:-calibrating], train[-calibrating:]
    if len(fitted) > p["max_train_rows"]:
        fitted = np.sort(np.random.default_rng(p["seed"]).choice(fitted, p["max_train_rows"], replace=False))
    return fitted, pool


def train(dataset_dir: str | Path, params: dict | None, workdir: str | Path) -> tuple[SizingBundle, SizingEvaluation]:
    """Train on a dataset folder's `sizing_jobs` table; writes `workdir/eval/` (the gate's data)."""
    jobs = pd.read_parquet(table_path(dataset_dir))
    bundle, evaluation = train_in_memory(jobs, params)
    write_eval(evaluation, Path(workdir) / "eval")
    return bundle, evaluation


def gate_size(dataset_dir: str | Path, min_rows: int, data: str) -> str | None:
    """Before training: why the dataset's test split (`time_split` at the default parameters) would hold fewer than
    `min_rows` jobs the gate can score (a known use and request of the primary resource, and an earlier ended job
    of their user: the jobs `score` counts, or more), and about how many more jobs it needs at the dataset's share
    of such jobs; None when it holds enough. Every public trace with requested times does; a site's young job store
    or the public HTCondor logs do not."""
    p = check_params({})
    jobs = prepare(pd.read_parquet(table_path(dataset_dir)))
    if not len(jobs):
        return None
    resource = primary_resource(jobs)
    submit, end = seconds(jobs["submit_time"]), seconds(jobs["end_time"])
    ended = np.isfinite(end) & jobs["run_s"].notna().to_numpy()  # what enters history (`build_features`)
    first_end = (pd.Series(np.where(ended, np.maximum(end, submit), np.inf)).groupby(jobs["user"].to_numpy())
                 .transform("min").to_numpy())
    asked = jobs[resource.asked].to_numpy(float, na_value=np.nan)
    scorable = (jobs[resource.used].notna().to_numpy() & np.isfinite(asked) & (asked > 0)
                & jobs["user"].notna().to_numpy() & (first_end < submit))
    tested = int((time_split(submit, end, p["test_fraction"]).test & scorable).sum())
    if tested >= min_rows:
        return None
    what = (f"the gate needs {min_rows:,} test jobs with a known {WHAT[resource.name].removeprefix('a ')} and an "
            f"earlier job of their user: {data} has "
            f"{len(jobs):,} jobs, whose test split would hold {tested:,}")
    share = scorable.mean() * p["test_fraction"]
    if not share:
        return f"{what}; none of its jobs has {WHAT[resource.name]} and an earlier job of its user: nothing to size"
    return (f"{what}; about {max(int(np.ceil(min_rows / share)) - len(jobs), 1):,} more jobs are needed (the test "
            f"split is the last {p['test_fraction']:.0%}, by submit time)")


def write_eval(evaluation: SizingEvaluation, eval_dir: Path) -> None:
    """The gate's data, the test jobs' features and what they used and asked, into `eval_dir`."""
    eval_dir.mkdir(parents=True, exist_ok=True)
    evaluation.test_features.to_parquet(eval_dir / "features.parquet")
    evaluation.test_jobs.to_parquet(eval_dir / "jobs.parquet")
    evaluation.eval_dir = eval_dir


def score(bundle: SizingBundle, eval_dir: Path) -> tuple[float, int]:
    """The quantile loss of a bundle's recommendations on a stored evaluation folder (lower is better), of the
    folder's primary resource (run time, or memory where its jobs state no time limit), and the number of jobs it
    recommended for: NaN and 0 for a bundle that sizes no such resource."""
    features = pd.read_parquet(Path(eval_dir) / "features.parquet")
    jobs = pd.read_parquet(Path(eval_dir) / "jobs.parquet")
    model = bundle.models.get(primary_resource(jobs).name)
    if model is None:
        return float("nan"), 0
    resource = model.resource
    used = jobs[resource.used].to_numpy(float, na_value=np.nan)
    asked = jobs[resource.asked].to_numpy(float, na_value=np.nan)
    procs = jobs["procs"].to_numpy(float, na_value=np.nan)
    known = np.isfinite(used) & np.isfinite(asked) & (asked > 0) & model.has_history(features)
    if not known.any():
        return float("nan"), 0
    recommended, _ = model.recommend(model.jobs(features.loc[known], asked[known], procs[known]),
                                     np.ones(int(known.sum()), bool))
    figures = scores(used[known], recommended, asked[known], np.ones(int(known.sum())), bundle.coverage, resource)
    return figures["quantile_loss"], int(known.sum())
