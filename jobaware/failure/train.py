"""Train and evaluate the failure model against its baselines on one time-ordered split."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.inspection import permutation_importance
from sklearn.metrics import roc_auc_score

from jobaware.failure.bundle import FailureBundle
from jobaware.failure.evaluate import metrics, plots
from jobaware.failure.features import FEATURES, build_features, labels
from jobaware.failure.model import FailureModel, baselines, check_params, time_split
from jobaware.synth.failure import bayes_scores

IMPORTANCE_ROWS = 4000


@dataclass
class TrainResult:
    bundle: FailureBundle
    params: dict
    metrics: dict[str, dict]
    test_jobs: pd.DataFrame
    test_features: pd.DataFrame
    test_labels: pd.Series
    plots: list[Path] = field(default_factory=list)
    importance: pd.Series | None = None

    @property
    def primary(self) -> dict:
        return self.metrics["model"]


def _importance(model: FailureModel, features: pd.DataFrame, y: pd.Series, seed: int) -> pd.Series:
    failed = (y.astype(str) != "COMPLETED").astype(int)
    if failed.nunique() < 2:
        return pd.Series(dtype=float)
    take = np.random.default_rng(seed).permutation(len(features))[:IMPORTANCE_ROWS]
    x, target = features.iloc[take], failed.iloc[take]
    if target.nunique() < 2:
        return pd.Series(dtype=float)

    def auc(_, frame, target_):
        p_fail = model.predict_proba(pd.DataFrame(frame, columns=features.columns))["p_fail"]
        return roc_auc_score(target_, p_fail)

    scores = permutation_importance(model, x, target, scoring=auc, n_repeats=2, random_state=seed)
    return pd.Series(scores.importances_mean, index=features.columns)


def train(jobs: pd.DataFrame, params: dict | None = None, truth: pd.DataFrame | None = None,
          plot_dir: Path | None = None) -> TrainResult:
    """Features for all jobs, time-ordered split, fit the model and baselines, score them on the test part."""
    p = check_params(params or {})
    jobs = jobs.sort_values("submit_time", kind="stable").reset_index(drop=True)
    features = build_features(jobs)
    y = labels(jobs)
    split = time_split(jobs, p["test_fraction"])
    train_rows = split.train[y.iloc[split.train].notna().to_numpy()]
    test_rows = split.test[y.iloc[split.test].notna().to_numpy()]
    x_train, y_train = features.iloc[train_rows], y.iloc[train_rows]
    x_test, y_test = features.iloc[test_rows], y.iloc[test_rows]

    model = FailureModel(params=p).fit(x_train, y_train)
    bayes = None
    if truth is not None:
        scores = bayes_scores(truth).drop_duplicates("job_id").set_index("job_id")["p_fail"]
        bayes = scores.reindex(jobs["job_id"].iloc[test_rows].to_numpy()).to_numpy()
    results = {"model": metrics(y_test, model.predict_proba(x_test), bayes)}
    for name, baseline in baselines(p["seed"]).items():
        results[name] = metrics(y_test, baseline.fit(x_train, y_train).predict_proba(x_test))
    results["model"].update(
        train_rows=len(train_rows), test_rows=len(test_rows), calibrated=float(model.calibrated),
        split_time=str(split.cut),
    )
    importance = _importance(model, x_test, y_test, p["seed"])
    test_proba = model.predict_proba(x_test)
    made = plots(y_test, test_proba, plot_dir, importance) if plot_dir else []
    bundle = FailureBundle(model=model, history=FailureBundle.history_tail(jobs))
    test_jobs = jobs.iloc[test_rows].reset_index(drop=True)
    return TrainResult(bundle, p, results, test_jobs, x_test.reset_index(drop=True), y_test.reset_index(drop=True),
                       made, importance)


__all__ = ["FEATURES", "TrainResult", "train"]
