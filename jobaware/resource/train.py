"""Train and evaluate `resource`: cross-validate every model on the real scripts, keep the best, score for the gate.

Bundle choice (stated rule): among the `candidates` (default rich and sequence), the model with the highest
mean CV macro-F1 wins; a tie within 0.005 goes to the one listed first (rich: cheaper and explainable). It
is then fitted on every usable real script of the binding classes plus the augmentation: the generated scripts
of those classes at sample weight `synthetic_shell_weight` (batch scripts, default 1: the real set has none)
or `synthetic_python_weight` (default 0.05: at 0.05 the real-script CV score is unchanged within its noise
while generated, text-book Python scripts are classed right 0.92 of the time instead of 0.54; at 0.2 and
above the real score drops, the real labels disagreeing with text-book semantics). The majority and
seed-SVM baselines run in the same folds, for the table.

Real scripts: the dataset's usable real scripts and, with `bundled_real` (default), the real labelled sample
shipped in jobaware/data/real/scripts or where $JOBAWARE_RESOURCE_REAL points (joined by content: a script already in
the dataset is not added twice; groups recomputed over the union). So a run on generated data alone is
still trained and scored on real scripts, and a run that brings its own real scripts adds them to the sample.

The gate (`score`): a small real set cannot hold out enough scripts to judge a fitted model, and scoring a
bundle on the scripts it was fitted on would reward memorising. So the gate compares recipes: `score`
re-fits the bundle's recipe (its model kind and parameters, with today's feature code) on every training
side of the folds stored in the evaluation folder and returns the mean macro-F1 on the held-out sides;
champion and challenger are re-fitted on exactly the same folds with the same seeds, hence judged on the same
data. The folder must hold at least `MIN_EVAL_ROWS` usable real scripts with every binding class at least
`cv_folds` times; otherwise the score is undefined (NaN) and the gate promotes nothing.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.errors import InputError, JobawareError
from jobaware.model import Evaluation
from jobaware.packaged import bundled
from jobaware.resource.bundle import ResourceBundle, limits_from, make_model
from jobaware.resource.capability import FEATURE_VERSION, MIN_EVAL_ROWS, PRIMARY_METRIC
from jobaware.resource.evaluate import (
    CVResult,
    confusion,
    cross_validate,
    folds,
    plot_comparison,
    plot_confusion,
    training_set,
)
from jobaware.resource.features import extract
from jobaware.resource.model import does_work
from jobaware.resource.params import Params, check_params
from jobaware.resource.parsing import parse_script
from jobaware.resource.reader import load_table, near_duplicate_groups, read_scripts
from jobaware.resource.schema import BINDING

REAL_SAMPLE_ENV = "JOBAWARE_RESOURCE_REAL"


def real_sample_path() -> Path:
    """The labels.csv of the real sample: $JOBAWARE_RESOURCE_REAL (a labels.csv or its folder), else the
    repository's jobaware/data/real/scripts."""
    path = Path(os.environ.get(REAL_SAMPLE_ENV) or bundled("data", "real", "scripts"))
    return path / "labels.csv" if path.suffix != ".csv" else path
BASELINES = ("majority", "seed_svm")
TIE = 0.005
EVAL_COLUMNS = ["file", "class", "group", "origin", "content"]


@dataclass(kw_only=True)
class ResourceEvaluation(Evaluation):
    chosen: str
    confusion: pd.DataFrame
    table: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class EvalData:
    scripts: pd.DataFrame  # usable real scripts: scored
    augment: pd.DataFrame  # usable generated scripts: training only
    folds: pd.DataFrame
    meta: dict


def analyse_all(contents, names, params: Params) -> list:
    limits = limits_from(params.model_dump())
    return [extract(parse_script(bytes(c), str(n), limits)) for c, n in zip(contents, names, strict=True)]


def split_table(table: pd.DataFrame, bundled_real: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Usable real scripts (with the bundled sample when asked) and usable generated ones."""
    if bundled_real:
        sample_path = real_sample_path()
        if not sample_path.is_file():
            raise InputError(f"{sample_path}: the bundled real sample is missing; set {REAL_SAMPLE_ENV}, or "
                             "bundled_real=false and bring real labelled scripts in the dataset")
        sample, _, _ = read_scripts([str(sample_path)])
        sample = sample[~sample["sha256"].isin(table["sha256"])]
        table = pd.concat([table, sample], ignore_index=True)
        table["group"] = near_duplicate_groups(table)
    usable = table[table["usable"].astype(bool)]
    real = usable[usable["origin"] == "real"].reset_index(drop=True)
    generated = usable[usable["origin"] == "synthetic"].reset_index(drop=True)
    return real[EVAL_COLUMNS], generated[EVAL_COLUMNS]


def _check_eval(scripts: pd.DataFrame, n_splits: int, where: str) -> None:
    if len(scripts) < MIN_EVAL_ROWS:
        raise InputError(f"{where}: {len(scripts)} usable real scripts; the evaluation needs at least {MIN_EVAL_ROWS}")
    counts = scripts["class"].value_counts()
    short = [f"{c} ({int(counts.get(c, 0))})" for c in BINDING if counts.get(c, 0) < n_splits]
    if short:
        raise InputError(f"{where}: every binding class needs at least {n_splits} real scripts (cv_folds); "
                         f"too few: {', '.join(short)}")


def write_eval(eval_dir: Path, data: EvalData) -> None:
    eval_dir.mkdir(parents=True, exist_ok=True)
    data.scripts.to_parquet(eval_dir / "scripts.parquet", index=False)
    data.augment.to_parquet(eval_dir / "augment.parquet", index=False)
    data.folds.to_parquet(eval_dir / "folds.parquet", index=False)
    (eval_dir / "meta.json").write_text(json.dumps(data.meta, indent=2))


def read_eval(eval_dir: Path | str) -> EvalData:
    eval_dir = Path(eval_dir)
    needed = ["scripts.parquet", "augment.parquet", "folds.parquet", "meta.json"]
    missing = [n for n in needed if not (eval_dir / n).is_file()]
    if missing:
        raise InputError(f"{eval_dir}: not an evaluation folder of resource (missing {', '.join(missing)})")
    return EvalData(pd.read_parquet(eval_dir / "scripts.parquet"), pd.read_parquet(eval_dir / "augment.parquet"),
                    pd.read_parquet(eval_dir / "folds.parquet"), json.loads((eval_dir / "meta.json").read_text()))


def augmentation(generated: pd.DataFrame, params: Params) -> tuple[pd.DataFrame, list, np.ndarray, np.ndarray]:
    """The generated scripts that train (never score), their features, classes and sample weights: those of a
    binding class whose kind has a weight above 0."""
    generated = generated[generated["class"].isin(BINDING)].reset_index(drop=True)
    if generated.empty or params.synthetic_shell_weight == params.synthetic_python_weight == 0:
        return generated.iloc[:0], [], np.array([], dtype=object), np.array([])
    features = analyse_all(generated["content"], generated["file"], params)
    weight = {"shell": params.synthetic_shell_weight, "python": params.synthetic_python_weight}
    keep = [i for i, f in enumerate(features) if weight[f.kind] > 0]
    return (generated.iloc[keep].reset_index(drop=True), [features[i] for i in keep],
            generated["class"].to_numpy(dtype=object)[keep], np.array([weight[features[i].kind] for i in keep]))


def _cross_validate(kind: str, params: Params, features, classes, fold_table, extra_features, extra_classes,
                    extra_weights) -> CVResult:
    settings = params.model_dump()
    return cross_validate(lambda: make_model(kind, settings), features, classes, fold_table, extra_features,
                          extra_classes, extra_weights, params.abstain_threshold, kind)


def choose(results: dict[str, CVResult], candidates: list[str]) -> str:
    """Highest mean macro-F1; within TIE of the best, the first listed."""
    best = max(results[c].metrics["macro_f1"] for c in candidates)
    return next(c for c in candidates if results[c].metrics["macro_f1"] >= best - TIE)


def train(dataset_dir: Path | str, params: dict | Params | None = None, workdir: Path | str = "resource-train",
          progress=None) -> tuple[ResourceBundle, ResourceEvaluation]:
    """Cross-validate baselines and candidates on the real scripts, fit the chosen model on all of them.

    Writes `workdir/eval/` (the gate's evaluation folder, with the CV predictions and metrics) and
    `workdir/plots/` (confusion matrix of the chosen model, comparison of all four)."""
    p = check_params(params)
    started = time.monotonic()
    workdir = Path(workdir)
    real, generated = split_table(load_table(dataset_dir), p.bundled_real)
    _check_eval(real, p.cv_folds, str(dataset_dir))
    classes = real["class"].to_numpy(dtype=object)
    features = analyse_all(real["content"], real["file"], p)
    _, extra_features, extra_classes, extra_weights = augmentation(generated, p)
    fold_table = folds(classes, real["group"].to_numpy(), p.cv_folds, p.cv_repeats, p.seed)
    results: dict[str, CVResult] = {}
    for kind in (*BASELINES, *p.candidates):
        results[kind] = _cross_validate(kind, p, features, classes, fold_table, extra_features, extra_classes,
                                        extra_weights)
        if progress:
            progress(kind, results[kind].metrics)
    chosen = choose(results, list(p.candidates))
    train_rows = np.flatnonzero(np.isin(classes, BINDING))
    fit_features, fit_classes, weights = training_set(features, classes, train_rows, extra_features, extra_classes,
                                                      extra_weights)
    model = make_model(chosen, p.model_dump()).fit(fit_features, fit_classes, weights)
    metrics = {name: dict(result.metrics) for name, result in results.items()}
    model_metrics = dict(results[chosen].metrics)
    model_metrics.update(
        gain_over_seed_svm=model_metrics["macro_f1"] - metrics["seed_svm"]["macro_f1"],
        gain_over_majority=model_metrics["macro_f1"] - metrics["majority"]["macro_f1"],
        chosen_sequence=float(chosen == "sequence"),
        not_a_job_real=float(sum(f.not_a_job for f in features)),
        other_by_rule_real=float(sum(1 for f in features if not does_work(f))),
        train_rows=float(len(fit_classes)), synthetic_rows=float(len(fit_classes) - len(train_rows)),
        seconds=time.monotonic() - started,
    )
    metrics = {"model": model_metrics, **metrics}
    bundle = ResourceBundle(model=model, kind=chosen, params=p.model_dump(), cv_metrics=model_metrics)
    eval_dir = workdir / "eval"
    # every generated script of a binding class: each recipe scored at the gate takes the ones its weights use
    write_eval(eval_dir, EvalData(real, generated[generated["class"].isin(BINDING)], fold_table, {
        "cv_folds": p.cv_folds, "cv_repeats": p.cv_repeats, "seed": p.seed, "feature_version": FEATURE_VERSION,
        "chosen": chosen, "primary_metric": PRIMARY_METRIC[0]}))
    (eval_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    matrix = confusion(classes, results[chosen].predictions)
    matrix.to_csv(eval_dir / "confusion.csv")
    predictions = pd.DataFrame({"file": real["file"].to_numpy(), "class": classes})
    for kind, result in results.items():
        for repeat in range(p.cv_repeats):
            predictions[f"{kind}_r{repeat}"] = result.predictions[repeat]
    predictions.to_parquet(eval_dir / "cv_predictions.parquet", index=False)
    plots = [
        plot_confusion(matrix, f"{chosen} model, {p.cv_repeats}x{p.cv_folds}-fold group CV, summed over repeats\n"
                       f"(macro-F1 {model_metrics['macro_f1']:.3f})", workdir / "plots" / "confusion_matrix.png"),
        plot_comparison({k: metrics[k] for k in results}, workdir / "plots" / "model_comparison.png"),
    ]
    return bundle, ResourceEvaluation(metrics=metrics, plots=plots, eval_dir=eval_dir, chosen=chosen, confusion=matrix,
                                    table=evaluation_table(metrics))


def evaluation_table(metrics: dict[str, dict[str, float]]) -> pd.DataFrame:
    """One row per model (majority, seed SVM, rich, sequence): macro-F1 mean/std, per-class F1, accuracy."""
    columns = ["macro_f1", "macro_f1_std", *[f"f1_{c}" for c in BINDING], "accuracy"]
    rows = {name: {c: values.get(c) for c in columns} for name, values in metrics.items() if name != "model"}
    return pd.DataFrame.from_dict(rows, orient="index")[columns]


def score(bundle: ResourceBundle, eval_dir: Path | str) -> tuple[float, int]:
    """The gate's score and the number of real scripts it rests on: mean macro-F1 of the bundle's recipe
    re-fitted on the stored folds (see the module docstring). NaN when the folder is too small to decide."""
    data = read_eval(eval_dir)
    rows = len(data.scripts)
    if not isinstance(bundle, ResourceBundle):
        raise JobawareError(f"cannot score a {type(bundle).__name__}: not a resource bundle")
    try:
        _check_eval(data.scripts, int(data.meta.get("cv_folds", 5)), str(eval_dir))
    except InputError:
        return float("nan"), rows
    p = check_params({**bundle.params})
    features = analyse_all(data.scripts["content"], data.scripts["file"], p)
    classes = data.scripts["class"].to_numpy(dtype=object)
    _, extra, extra_classes, extra_weights = augmentation(data.augment, p)
    result = cross_validate(bundle.recipe, features, classes, data.folds, extra, extra_classes, extra_weights,
                            p.abstain_threshold, bundle.kind)
    return result.metrics[PRIMARY_METRIC[0]], rows
