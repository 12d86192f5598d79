"""Featurize, fit and evaluate the failure model against its baselines on one time-ordered split.

The three steps are separate functions (the pipeline runs each as its own component); `train` chains them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.inspection import permutation_importance
from sklearn.metrics import roc_auc_score

from jobaware.errors import JobawareError
from jobaware.failure.bundle import FailureBundle
from jobaware.failure.evaluate import metrics, plots
from jobaware.failure.features import FEATURES, build_features, labels
from jobaware.failure.model import FailureModel, baselines, time_split
from jobaware.failure.params import check_params
from jobaware.failure.synth import bayes_scores

IMPORTANCE_ROWS = 4000


def featurize(jobs: pd.DataFrame, test_fraction: float = 0.3) -> pd.DataFrame:
    """Features of every job plus its label and its side of the time split ('train', 'test' or '')."""
    jobs = jobs.sort_values("submit_time", kind="stable").reset_index(drop=True)
    table = build_features(jobs)
    split = time_split(jobs, test_fraction)
    side = np.full(len(jobs), "", dtype=object)
    side[split.train], side[split.test] = "train", "test"
    table.insert(0, "job_id", jobs["job_id"].to_numpy())
    table["label"] = labels(jobs).to_numpy()
    table["split"] = np.where(table["label"].isna(), "", side)
    table.attrs["split_time"] = str(split.cut)
    return table


def _part(table: pd.DataFrame, side: str) -> tuple[pd.DataFrame, pd.Series]:
    rows = table[table["split"] == side]
    return rows[list(FEATURES)].reset_index(drop=True), rows["label"].reset_index(drop=True)


def fit(table: pd.DataFrame, jobs: pd.DataFrame, params: dict | None = None) -> FailureBundle:
    """Fit the calibrated model on the train side; bundle it with the job history live features need."""
    x, y = _part(table, "train")
    model = FailureModel(params=check_params(params or {})).fit(x, y)
    return FailureBundle(model=model, history=FailureBundle.history_tail(jobs))


@dataclass
class Evaluation:
    metrics: dict[str, dict]
    test_features: pd.DataFrame
    test_labels: pd.Series
    plots: list[Path] = field(default_factory=list)
    importance: pd.Series | None = None

    @property
    def primary(self) -> dict:
        return self.metrics["model"]


def _importance(model: FailureModel, features: pd.DataFrame, y: pd.Series, seed: int) -> pd.Series:
    take = np.random.default_rng(seed).permutation(len(features))[:IMPORTANCE_ROWS]
    x, target = features.iloc[take], (y.iloc[take].astype(str) != "COMPLETED").astype(int)
    if target.nunique() < 2:
        return pd.Series(dtype=float)

    def auc(_, frame, target_):
        return roc_auc_score(target_, model.predict_proba(pd.DataFrame(frame, columns=features.columns))["p_fail"])

    scores = permutation_importance(model, x, target, scoring=auc, n_repeats=2, random_state=seed)
    return pd.Series(scores.importances_mean, index=features.columns)


def evaluate(bundle: FailureBundle, table: pd.DataFrame, params: dict | None = None,
             truth: pd.DataFrame | None = None, plot_dir: Path | None = None) -> Evaluation:
    """Score the model and, in the same run, the baselines (fitted on the same train side) on the test side."""
    p = check_params(params or {})
    x_train, y_train = _part(table, "train")
    x_test, y_test = _part(table, "test")
    if len(y_test) == 0:
        raise JobawareError("no labelled jobs after the split time; use more data or a larger test_fraction")
    bayes = None
    if truth is not None:
        scores = bayes_scores(truth).drop_duplicates("job_id").set_index("job_id")["p_fail"]
        bayes = scores.reindex(table.loc[table["split"] == "test", "job_id"].to_numpy()).to_numpy()
    proba = bundle.model.predict_proba(x_test)
    results = {"model": metrics(y_test, proba, bayes)}
    for name, baseline in baselines(p["seed"]).items():
        results[name] = metrics(y_test, baseline.fit(x_train, y_train).predict_proba(x_test))
    results["model"].update(
        train_rows=len(y_train), test_rows=len(y_test), calibrated=float(bundle.model.calibrated),
    )
    importance = _importance(bundle.model, x_test, y_test, p["seed"])
    made = plots(y_test, proba, plot_dir, importance) if plot_dir else []
    return Evaluation(results, x_test, y_test, made, importance)


def train(jobs: pd.DataFrame, params: dict | None = None, truth: pd.DataFrame | None = None,
          plot_dir: Path | None = None) -> tuple[FailureBundle, Evaluation]:
    """featurize -> fit -> evaluate in one call."""
    p = check_params(params or {})
    table = featurize(jobs, p["test_fraction"])
    bundle = fit(table, jobs, p)
    return bundle, evaluate(bundle, table, p, truth, plot_dir)
