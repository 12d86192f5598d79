"""Featurize, fit and evaluate the failure model against its baselines on one time-ordered split.

The three steps are separate functions (the pipeline runs each as its own component); `train` chains them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from sklearn.inspection import permutation_importance
from sklearn.metrics import roc_auc_score

from jobaware.errors import JobawareError
from jobaware.failure.bundle import FailureBundle
from jobaware.failure.evaluate import metrics, plots
from jobaware.failure.features import CATEGORICAL, FEATURES, NUMERIC, Featurizer, build_features, labels
from jobaware.failure.readers.common import to_canonical_dtypes
from jobaware.failure.model import FailureModel, baselines, time_split
from jobaware.failure.params import check_params
from jobaware.failure.synth import bayes_scores

IMPORTANCE_ROWS = 4000


def featurize(jobs: pd.DataFrame, test_fraction: float = 0.3) -> pd.DataFrame:
    """Features of every job plus its label and its side of the time split ('train', 'test' or '')."""
    jobs = jobs.sort_values("submit_time", kind="stable").reset_index(drop=True)
    split = time_split(jobs, test_fraction)
    table = _labelled(jobs, build_features(jobs), split.cut)
    table.attrs["split_time"] = str(split.cut)
    return table


def _labelled(jobs: pd.DataFrame, features: pd.DataFrame, cut: pd.Timestamp) -> pd.DataFrame:
    """`features` of `jobs` with job_id in front, then the label and the side of the split at `cut`."""
    label = labels(jobs).to_numpy()
    side = np.where((jobs["submit_time"] < cut) & (jobs["end_time"] < cut), "train",
                    np.where(jobs["submit_time"] >= cut, "test", ""))
    features.insert(0, "job_id", jobs["job_id"].to_numpy())
    features["label"] = label
    features["split"] = np.where(pd.isna(label), "", side)
    return features


WINDOW_JOBS = 500_000
_OUTPUT = pa.schema([("job_id", pa.int64()), *((f, pa.float64()) for f in NUMERIC),
                     *((f, pa.string()) for f in CATEGORICAL), ("label", pa.string()), ("split", pa.string())])


def featurize_file(jobs_table: Path, out: Path, test_fraction: float = 0.3, window: int = WINDOW_JOBS) -> int:
    """`featurize` of a canonical job table (Parquet) into `out` (Parquet), window by window in submit order: the
    same rows, in the same order, as `featurize` of the whole table, in memory that depends on the window and the
    number of entities. Returns the number of training rows."""
    submit = np.sort(pq.read_table(jobs_table, columns=["submit_time"])["submit_time"]
                     .cast(pa.timestamp("s")).to_numpy().astype(np.int64), kind="stable")
    if not len(submit):
        raise JobawareError(f"{jobs_table}: no jobs to featurize")
    cut = pd.Timestamp(submit[int(len(submit) * (1 - test_fraction))], unit="s")
    bounds = [*np.unique(submit[::window]).tolist(), int(submit[-1]) + 1]  # whole submit seconds per window
    featurizer, train_rows = Featurizer(), 0
    with pq.ParquetWriter(out, _OUTPUT) as writer:
        for low, high in zip(bounds, bounds[1:], strict=False):
            jobs = pd.read_parquet(jobs_table, filters=[("submit_time", ">=", pd.Timestamp(low, unit="s")),
                                                        ("submit_time", "<", pd.Timestamp(high, unit="s"))])
            jobs = to_canonical_dtypes(jobs).sort_values("submit_time", kind="stable").reset_index(drop=True)
            table = _labelled(jobs, featurizer.window(jobs), cut)
            train_rows += int((table["split"] == "train").sum())
            writer.write_table(pa.Table.from_pandas(table, schema=_OUTPUT, preserve_index=False))
    return train_rows


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
