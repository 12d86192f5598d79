"""Featurize, fit and evaluate the wait model against its baselines on one time-ordered split.

The first `1 - test_fraction` of the jobs by submit time train (the trees on the earlier part of them, the
conformal calibration on the last `calibration_fraction`), the rest test. Every job's features come from one sweep
over the whole table, so a test job sees the queue and the histories as they were at its submit time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import JobawareError
from jobaware.model import Evaluation
from jobaware.wait.bundle import WaitBundle
from jobaware.wait.evaluate import baselines, metrics
from jobaware.wait.features import FEATURES, job_keys, order, seconds, sweep
from jobaware.wait.model import WaitModel
from jobaware.wait.params import check_params
from jobaware.wait.schema import complete, table_path

GATE_ROWS = 200_000
POINT_FIGURES = ("within_x2", "within_10min", "median_abs_error_s", "mean_abs_log10_error")


@dataclass(kw_only=True)
class WaitEvaluation(Evaluation):
    test_features: pd.DataFrame  # the gate's evaluation data: the test jobs' features and their waits
    test_waits: np.ndarray


def split(jobs: pd.DataFrame, params: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks over `order(jobs)`: the trees' jobs, the calibration jobs, the test jobs (each with a known wait)."""
    n = len(jobs)
    submit = jobs["submit_time"].to_numpy()
    rank = np.argsort(np.argsort(submit, kind="stable"), kind="stable")  # place in time across clusters
    known = jobs["wait_s"].notna().to_numpy()
    cut = int(n * (1 - params["test_fraction"]))
    calibration_from = int(cut * (1 - params["calibration_fraction"]))
    trees = (rank < calibration_from) & known
    if trees.sum() > params["max_train_rows"]:  # the latest ones before the calibration period
        trees &= rank >= calibration_from - params["max_train_rows"]
    return trees, (rank >= calibration_from) & (rank < cut) & known, (rank >= cut) & known


def fit_and_evaluate(jobs: pd.DataFrame, params: dict | None = None,
                     plot_dir: Path | None = None) -> tuple[WaitBundle, WaitEvaluation]:
    """Sweep, split, fit, calibrate and evaluate, with the baselines on the same test jobs."""
    p = check_params(params or {})
    jobs = order(complete(jobs))
    features, history = sweep(jobs)
    trees, calibration, test = split(jobs, p)
    if trees.sum() < 100 or calibration.sum() < 100:
        raise JobawareError(f"{int(trees.sum())} training and {int(calibration.sum())} calibration jobs with a known "
                            "wait; the model needs at least 100 of each (use a longer trace)")
    if not test.any():
        raise JobawareError("no job with a known wait after the split; use more data or a larger test_fraction")
    waits = jobs["wait_s"].to_numpy(float)
    started, keys = seconds(jobs["start_time"]), job_keys(jobs)
    model = WaitModel(params=p).fit(features[trees], waits[trees], keys[trees], features[calibration],
                                    waits[calibration], started[calibration], keys[calibration])
    # a cluster's processors: its stated size (a trace's MaxProcs), else the most any job asked (a floor only)
    clusters = {str(name): {"capacity": float(rows["cluster_procs"].max()) if rows["cluster_procs"].notna().any()
                            else float(rows["processors_req"].max()), "timezone": str(rows["timezone"].iloc[0]),
                            "capacity_stated": bool(rows["cluster_procs"].notna().any())}
                for name, rows in jobs.groupby("cluster", sort=False)}
    bundle = WaitBundle(model=model, history=history, clusters=clusters)
    bundle.trained_on = {"clusters": sorted(clusters), "jobs": len(jobs)}
    actual = waits[test]
    answer = model.predict_in_time(features[test], seconds(jobs["submit_time"])[test], actual, started[test],
                                   keys[test])
    results = {"model": metrics(answer, actual)}
    probabilities = model.probabilities(features[test])
    for kind in ("within_x2", "median"):  # both points, whichever `wait_s` is
        figures = metrics({"wait_s": model.point(probabilities, kind)}, actual)
        results["model"].update({f"{kind}_point_{name}": figures[name] for name in POINT_FIGURES})
    training_waits = jobs["wait_s"].to_numpy(float)[trees | calibration]
    for name, baseline in baselines(jobs, np.flatnonzero(test), training_waits).items():
        results[name] = metrics(baseline, actual)
    results["model"].update(train_rows=float(trees.sum()), calibration_rows=float(calibration.sum()),
                            test_rows=float(test.sum()), mondrian=float(model.calibration.mondrian))
    sample = np.sort(np.random.default_rng(p["seed"]).permutation(int(test.sum()))[:GATE_ROWS])
    made = plots(answer, actual, plot_dir) if plot_dir else []
    evaluation = WaitEvaluation(metrics=results, plots=made,
                                test_features=features[test].iloc[sample][list(FEATURES)].reset_index(drop=True),
                                test_waits=actual[sample],
                                run_params={"rows": len(jobs), "clusters": ",".join(sorted(clusters))})
    return bundle, evaluation


def train(dataset_dir: str | Path, params: dict | None, workdir: str | Path,
          truth: str | Path | None = None) -> tuple[WaitBundle, WaitEvaluation]:
    """The pipeline's train step: the dataset's queue_jobs table -> bundle and evaluation; writes `workdir/eval/`
    (the gate's data) and `workdir/plots/`."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    jobs = pd.read_parquet(table_path(dataset_dir))
    bundle, evaluation = fit_and_evaluate(jobs, params, workdir / "plots")
    write_eval(evaluation, workdir / "eval")
    return bundle, evaluation


def gate_size(dataset_dir: str | Path, min_rows: int, data: str) -> str | None:
    """Before training: why the dataset's test split (`split` at the default parameters) would hold fewer than
    `min_rows` jobs with a known wait, and about how many more jobs it needs at the dataset's share of such jobs;
    None when it holds enough. Every public trace does; a site's young job store may not."""
    p = check_params({})
    jobs = order(complete(pd.read_parquet(table_path(dataset_dir))))
    tested = int(split(jobs, p)[2].sum())
    if tested >= min_rows:
        return None
    share = jobs["wait_s"].notna().mean() * p["test_fraction"] if len(jobs) else 0.0
    more = f"about {max(int(np.ceil(min_rows / share)) - len(jobs), 1):,} more" if share else "more"
    return (f"the gate needs {min_rows:,} test jobs with a known wait: {data} has {len(jobs):,} jobs, whose test split "
            f"would hold {tested:,}; {more} jobs are needed (the test split is the last {p['test_fraction']:.0%}, by "
            "submit time; a job's wait is known once it starts)")


def write_eval(evaluation: WaitEvaluation, eval_dir: Path) -> None:
    """The gate's data (the test jobs' features and waits) into `eval_dir`; it becomes `evaluation.eval_dir`."""
    eval_dir.mkdir(parents=True, exist_ok=True)
    evaluation.test_features.assign(actual_wait_s=evaluation.test_waits).to_parquet(eval_dir / "test.parquet")
    evaluation.eval_dir = eval_dir


def score(bundle, eval_dir: Path) -> tuple[float, int]:
    """Within x2 of a bundle's point estimates on a stored evaluation folder, and its number of jobs."""
    table = pd.read_parquet(Path(eval_dir) / "test.parquet")
    if table.empty:
        return float("nan"), 0
    answer = bundle.model.predict(table.drop(columns="actual_wait_s"))
    return metrics(answer, table["actual_wait_s"].to_numpy(float))["within_x2"], len(table)


def plots(answer: dict[str, np.ndarray], actual: np.ndarray, plot_dir: Path) -> list[Path]:
    """Predicted against actual waits (log-log), with the 80 % range of a sample of jobs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    pick = rng.permutation(len(actual))[:3000]
    floor = 1.0
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.errorbar(actual[pick] + floor, answer["wait_s"][pick] + floor,
                yerr=[answer["wait_s"][pick] - answer["wait_low_s"][pick],
                      answer["wait_high_s"][pick] - answer["wait_s"][pick]],
                fmt=".", ms=2, alpha=0.3, elinewidth=0.3)
    ax.set(xscale="log", yscale="log", xlabel="actual wait + 1 (s)", ylabel="predicted wait + 1 (s), 80 % range",
           title="wait: test jobs")
    lims = [floor, max(float(actual.max()) + floor, 10.0)]
    ax.plot(lims, lims, "k--", lw=0.8)
    path = plot_dir / "predicted_vs_actual.png"
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]

