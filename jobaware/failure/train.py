"""Featurize, fit and evaluate the failure model against its baselines on one time-ordered split.

`train` is the pipeline's training step over a canonical dataset folder (the feature table written and read part
by part, in bounded memory); `train_in_memory` chains the same functions over a job table in memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sklearn.inspection import permutation_importance
from sklearn.metrics import roc_auc_score

from jobaware.errors import JobawareError
from jobaware.failure.bundle import FailureBundle
from jobaware.failure.evaluate import metrics, plots
from jobaware.failure.features import CATEGORICAL, FEATURES, NUMERIC, Featurizer, build_features, labels
from jobaware.failure.model import FailureModel, baselines, time_split
from jobaware.failure.params import check_params
from jobaware.failure.reader.common import to_canonical_dtypes
from jobaware.failure.schema import jobs_table
from jobaware.failure.synth import TRUTH_FOR_SCORES, bayes_scores, truth_path
from jobaware.model import Evaluation
from jobaware.progress import Progress, from_prints
from jobaware.steps import READ_REPORT

IMPORTANCE_ROWS = 2000


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


PART_ROWS = 100_000  # a part of a feature file: about 110 MB of features, whatever the row groups hold


class FeatureTable:
    """`featurize`'s output, in memory or in a Parquet file (`featurize_file`'s), read part by part in time order,
    so that fitting on a sample and evaluating every test job need memory for a part, not for the table."""

    def __init__(self, source: pd.DataFrame | str | Path, part_rows: int = PART_ROWS):
        self.source, self.part_rows = source, part_rows

    def side(self, side: str, keep: Callable[[int], np.ndarray] | None = None) -> Iterator[pd.DataFrame]:
        """The jobs on one side of the split ('train' or 'test'), part by part; `keep(n)`, when given, thins each
        part's n jobs (a mask). A file's rows are chosen in Arrow before any is turned into pandas."""
        if isinstance(self.source, pd.DataFrame):
            rows = self.source[self.source["split"] == side]
            yield rows[keep(len(rows))] if keep else rows
            return
        # no pre-buffering: it holds whole row groups' column chunks (at 11 M jobs, 2.6 GiB against 1.3 GiB)
        for batch in pq.ParquetFile(self.source, pre_buffer=False).iter_batches(batch_size=self.part_rows):
            rows = batch.filter(pc.equal(batch["split"], side))
            yield (rows.filter(pa.array(keep(rows.num_rows))) if keep else rows).to_pandas()
        pa.default_memory_pool().release_unused()  # what Arrow's allocator kept of the parts goes back now

    def count(self, side: str) -> int:
        """How many jobs are on one side of the split."""
        if isinstance(self.source, pd.DataFrame):
            return int((self.source["split"] == side).sum())
        return int(pc.sum(pc.equal(pq.read_table(self.source, columns=["split"])["split"], side)).as_py() or 0)


def training_sample(table: FeatureTable, max_rows: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    """The training jobs a model is fitted on: every one when there are at most `max_rows`; else each is kept with
    probability max_rows / (training jobs), by one uniform draw per training job in time order from a generator
    seeded with `seed` (the same jobs however the table is cut into parts)."""
    share = min(1.0, max_rows / max(table.count("train"), 1))
    draws = np.random.default_rng(seed)
    xs, ys = [], []
    for rows in table.side("train", (lambda n: draws.random(n) < share) if share < 1.0 else None):
        xs.append(rows[list(FEATURES)])
        ys.append(rows["label"])
    x, y = pd.concat(xs, ignore_index=True), pd.concat(ys, ignore_index=True)
    xs, ys, rows = None, None, None
    pa.default_memory_pool().release_unused()  # the parts were Arrow's memory: it goes back before fitting
    return x, y


def fit(table: pd.DataFrame | FeatureTable, history: pd.DataFrame, params: dict | None = None) -> FailureBundle:
    """Fit the calibrated model on the training sample; bundle it with the job history live features need
    (`FailureBundle.history_tail` of the jobs, or `history_tail_file` of their table)."""
    p = check_params(params or {})
    model = FailureModel(params=p).fit(*training_sample(_table(table), p["max_train_rows"], p["seed"]))
    return FailureBundle(model=model, history=history)


def _table(table: pd.DataFrame | FeatureTable) -> FeatureTable:
    return table if isinstance(table, FeatureTable) else FeatureTable(table)


@dataclass(kw_only=True)
class FailureEvaluation(Evaluation):
    test_features: pd.DataFrame  # the gate's evaluation data: every test job, or a seeded sample of GATE_ROWS
    test_labels: pd.Series


def _importance(model: FailureModel, x: pd.DataFrame, y: pd.Series, seed: int) -> pd.Series:
    target = (y.astype(str) != "COMPLETED").astype(int)
    if target.nunique() < 2:
        return pd.Series(dtype=float)

    def auc(_, frame, target_):
        return roc_auc_score(target_, model.predict_proba(pd.DataFrame(frame, columns=x.columns))["p_fail"])

    scores = permutation_importance(model, x, target, scoring=auc, n_repeats=2, random_state=seed)
    return pd.Series(scores.importances_mean, index=x.columns)


GATE_ROWS = 200_000


def evaluate(bundle: FailureBundle, table: pd.DataFrame | FeatureTable, params: dict | None = None,
             truth: pd.DataFrame | None = None, plot_dir: Path | None = None) -> FailureEvaluation:
    """Score the model and, in the same run, the baselines (fitted on the model's training sample) on every test
    job, part by part; the model (and the majority baseline) also at the model's operating threshold, beside the
    accuracy of always answering the training sample's more common outcome (`majority_accuracy`). The gate keeps
    every test job, or a seeded sample of GATE_ROWS of them; the feature importance is measured on a seeded
    sample of IMPORTANCE_ROWS."""
    p = check_params(params or {})
    table = _table(table)
    tests = table.count("test")
    if tests == 0:
        raise JobawareError("no labelled jobs after the split time; use more data or a larger test_fraction")
    x_train, y_train = training_sample(table, p["max_train_rows"], p["seed"])
    scorers = {"model": bundle.model, **{name: baseline.fit(x_train, y_train)
                                         for name, baseline in baselines(p["seed"]).items()}}
    del x_train
    order = np.random.default_rng(p["seed"]).permutation(tests)
    wanted = {"importance": order[:IMPORTANCE_ROWS], "gate": np.sort(order[:GATE_ROWS])}
    kept = {name: ([], [], []) for name in wanted}  # per part: positions, features, labels
    probabilities = {name: [] for name in scorers}
    labels, job_ids, seen = [], [], 0
    for rows in table.side("test"):
        x, y = rows[list(FEATURES)].reset_index(drop=True), rows["label"].reset_index(drop=True)
        if not len(y):
            continue
        for name, scorer in scorers.items():
            probabilities[name].append(scorer.predict_proba(x))
        for name, positions in wanted.items():
            mine = positions[(positions >= seen) & (positions < seen + len(y))]
            kept[name][0].append(mine)
            kept[name][1].append(x.iloc[mine - seen])
            kept[name][2].append(y.iloc[mine - seen])
        labels.append(y)
        job_ids.append(rows["job_id"].to_numpy())
        seen += len(y)
    y_test = pd.concat(labels, ignore_index=True)
    bayes = None
    if truth is not None:
        scores = bayes_scores(truth).drop_duplicates("job_id").set_index("job_id")["p_fail"]
        bayes = scores.reindex(np.concatenate(job_ids)).to_numpy()
    proba = {name: pd.concat(parts, ignore_index=True) for name, parts in probabilities.items()}
    threshold = bundle.threshold
    results = {"model": metrics(y_test, proba["model"], bayes, threshold)}
    # the majority baseline answers one class whatever the threshold: its figures at the model's are its own
    results.update({name: metrics(y_test, proba[name], threshold=threshold if name == "majority" else None)
                    for name in scorers if name != "model"})
    majority_fails = float(np.mean(y_train.astype(str) != "COMPLETED")) > 0.5
    results["model"].update(train_rows=table.count("train"), fit_rows=len(y_train), test_rows=len(y_test),
                            calibrated=float(bundle.model.calibrated),
                            majority_accuracy=float(np.mean((y_test.astype(str) != "COMPLETED") == majority_fails)))
    sample = {}
    for name, (positions, xs, ys) in kept.items():  # the rows in the order drawn
        at = pd.Index(np.concatenate(positions)).get_indexer(wanted[name])
        sample[name] = (pd.concat(xs).iloc[at].reset_index(drop=True), pd.concat(ys).iloc[at].reset_index(drop=True))
    importance = _importance(bundle.model, *sample["importance"], p["seed"])
    made = plots(y_test, proba["model"], plot_dir, importance) if plot_dir else []
    return FailureEvaluation(metrics=results, test_features=sample["gate"][0], test_labels=sample["gate"][1], plots=made,
                             documents={"feature_importance": importance.sort_values(ascending=False).to_dict()},
                             operating=bundle.model.operating or {})


def train(dataset_dir: str | Path, params: dict | None, workdir: str | Path,
          truth: str | Path | None = None) -> tuple[FailureBundle, FailureEvaluation]:
    """Featurize the dataset's job table into `workdir` window by window, fit on the training sample, evaluate
    model and baselines on the later jobs (against the generator's truth: `truth`, else the one beside a single
    generated source); writes `workdir/eval/` (the gate's data) and `workdir/plots/`."""
    p = check_params(params or {})
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    phases = Progress(3, "phases: features, the model, its evaluation")
    jobs = jobs_table(dataset_dir)
    features = FeatureTable(workdir / "features.parquet")
    featurize_file(jobs, features.source, p["test_fraction"])
    phases.advance()
    with from_prints(r"^\[(\d+)/(\d+)\]", "boosting iterations (at most: early stopping)"):
        bundle = fit(features, FailureBundle.history_tail_file(jobs), p)
    phases.advance()
    truth = truth or _truth_beside(Path(dataset_dir))
    truth_table = pd.read_parquet(truth, columns=TRUTH_FOR_SCORES) if truth and Path(truth).is_file() else None
    evaluation = evaluate(bundle, features, p, truth_table, workdir / "plots")
    phases.advance()
    evaluation.run_params = {"rows": pq.ParquetFile(jobs).metadata.num_rows}
    write_eval(evaluation, workdir / "eval")
    return bundle, evaluation


def _truth_beside(dataset_dir: Path) -> Path | None:
    """The generator's truth file beside the one source the dataset was read from, if there is one."""
    report = dataset_dir / READ_REPORT
    source = json.loads(report.read_text()).get("file", "") if report.is_file() else ""
    return truth_path(source) if source and Path(source).is_file() else None


def train_in_memory(jobs: pd.DataFrame, params: dict | None = None, truth: pd.DataFrame | None = None,
                    plot_dir: Path | None = None) -> tuple[FailureBundle, FailureEvaluation]:
    """featurize -> fit -> evaluate in one call, in memory (no evaluation folder: `log_trained` writes it)."""
    p = check_params(params or {})
    table = featurize(jobs, p["test_fraction"])
    bundle = fit(table, FailureBundle.history_tail(jobs), p)
    return bundle, evaluate(bundle, table, p, truth, plot_dir)


def score(bundle, eval_dir: Path) -> tuple[float, int]:
    """ROC-AUC of P(fail) of a bundle on a stored evaluation folder, and the number of labelled jobs in it."""
    features = pd.read_parquet(Path(eval_dir) / "features.parquet")
    labels = pd.read_parquet(Path(eval_dir) / "labels.parquet")["label"]
    keep = labels.notna().to_numpy()
    features, labels = features.loc[keep].reset_index(drop=True), labels.loc[keep].reset_index(drop=True)
    if len(labels) == 0:
        return float("nan"), 0
    return metrics(labels, bundle.model.predict_proba(features))["roc_auc"], len(labels)


def write_eval(evaluation: FailureEvaluation, eval_dir: Path) -> None:
    """The gate's data, the test side's features and labels, into `eval_dir`; it becomes `evaluation.eval_dir`."""
    eval_dir.mkdir(parents=True, exist_ok=True)
    evaluation.test_features.to_parquet(eval_dir / "features.parquet")
    evaluation.test_labels.to_frame("label").to_parquet(eval_dir / "labels.parquet")
    evaluation.eval_dir = eval_dir


def log_trained(bundle: FailureBundle, evaluation: FailureEvaluation, params: dict, workdir: Path) -> str:
    """Log an in-memory training result as the pipeline would (run, model, evaluation); the run id."""
    from jobaware import tracking

    write_eval(evaluation, Path(workdir) / "eval")
    return tracking.log_training("failure", params, bundle, evaluation, {"success": True})
