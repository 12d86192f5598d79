"""Group-aware, stratified, repeated cross-validation on the real labelled scripts, and its metrics and plots.

Protocol: the evaluation rows are the usable real scripts (every class, `other` included). Each repeat r
splits them with scikit-learn's `StratifiedGroupKFold(cv_folds, shuffle=True, random_state=seed + r)` on
their class, keeping each near-duplicate group on one side. A model trains on the training side's scripts
of the four binding classes plus the augmentation rows given (generated scripts, at their sample weight;
never scored) and predicts the held-out side. Per
repeat: macro-F1 over cpu, mem, network, io (primary), per-class F1, accuracy over all classes; reported as
mean and standard deviation over repeats. The confusion matrix sums the held-out predictions of all repeats.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.metrics import ConfusionMatrixDisplay, accuracy_score, confusion_matrix, f1_score  # noqa: E402
from sklearn.model_selection import StratifiedGroupKFold  # noqa: E402

from jobaware.progress import Progress  # noqa: E402
from jobaware.resource.model import does_work  # noqa: E402
from jobaware.resource.schema import BINDING, CLASSES  # noqa: E402

LABELS = (*CLASSES,)


@dataclass
class CVResult:
    name: str
    predictions: np.ndarray  # (repeats, rows) predicted classes
    probabilities: np.ndarray  # (repeats, rows, 4)
    metrics: dict[str, float]


def folds(classes: np.ndarray, groups: np.ndarray, n_splits: int, repeats: int, seed: int) -> pd.DataFrame:
    """Fold number per (repeat, row)."""
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a class with fewer members than folds (`other`)
        for repeat in range(repeats):
            splitter = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed + repeat)
            for fold, (_, test) in enumerate(splitter.split(np.zeros(len(classes)), classes, groups)):
                rows.extend({"repeat": repeat, "row": int(r), "fold": fold} for r in test)
    return pd.DataFrame(rows).sort_values(["repeat", "row"]).reset_index(drop=True)


def decide(probabilities: np.ndarray, features: list, abstain_threshold: float = 0.0) -> np.ndarray:
    """Classes from probabilities, with the `other` rule (see model.py)."""
    classes = np.array(BINDING, dtype=object)[probabilities.argmax(axis=1)] if len(features) else np.array([], object)
    for i, f in enumerate(features):
        if not does_work(f) or probabilities[i].max() < abstain_threshold:
            classes[i] = "other"
    return classes


def metrics(truth: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
    """Mean/std over repeats of macro-F1 (binding classes; the std undefined for one repeat), per-class F1 and
    accuracy."""
    macro = [f1_score(truth, p, labels=list(BINDING), average="macro", zero_division=0) for p in predictions]
    per_class = np.array([f1_score(truth, p, labels=list(BINDING), average=None, zero_division=0)
                          for p in predictions])
    spread = float(np.std(macro)) if len(macro) > 1 else float("nan")  # one repeat has no spread to tell
    out = {"macro_f1": float(np.mean(macro)), "macro_f1_std": spread,
           "macro_f1_min": float(np.min(macro)), "macro_f1_max": float(np.max(macro)),
           "accuracy": float(np.mean([accuracy_score(truth, p) for p in predictions]))}
    for i, c in enumerate(BINDING):
        out[f"f1_{c}"] = float(per_class[:, i].mean())
    out["n_eval"] = float(len(truth))
    out["n_repeats"] = float(len(predictions))
    return out


def training_set(features: list, classes: np.ndarray, rows: np.ndarray, extra_features: list | None,
                 extra_classes: np.ndarray | None, extra_weights: np.ndarray | None) -> tuple[list, np.ndarray, np.ndarray]:
    """The chosen real rows at weight 1, then the extra (generated) rows at their own weights."""
    fit_features = [features[i] for i in rows]
    fit_classes = classes[rows]
    weights = np.ones(len(rows))
    if extra_features:
        fit_features += extra_features
        fit_classes = np.concatenate([fit_classes, extra_classes])
        weights = np.concatenate([weights, extra_weights])
    return fit_features, fit_classes, weights


def cross_validate(make_model, features: list, classes: np.ndarray, fold_table: pd.DataFrame,
                   extra_features: list | None = None, extra_classes: np.ndarray | None = None,
                   extra_weights: np.ndarray | None = None, abstain_threshold: float = 0.0, name: str = "") -> CVResult:
    """Fit `make_model()` per fold on the training side (+ the extra rows at their weights), predict the
    held-out side."""
    repeats = int(fold_table["repeat"].max()) + 1
    n = len(classes)
    predictions = np.empty((repeats, n), dtype=object)
    probabilities = np.zeros((repeats, n, len(BINDING)))
    folds = fold_table.groupby(["repeat", "fold"])
    progress = Progress(folds.ngroups, f"cross-validation folds of {name or 'the model'}")
    for (repeat, _fold), held in folds:
        test = held["row"].to_numpy()
        in_test = np.zeros(n, bool)
        in_test[test] = True
        train = np.flatnonzero(~in_test & np.isin(classes, BINDING))
        model = make_model().fit(*training_set(features, classes, train, extra_features, extra_classes, extra_weights))
        test_features = [features[i] for i in test]
        proba = model.predict_proba(test_features)
        probabilities[repeat, test] = proba
        predictions[repeat, test] = decide(proba, test_features, abstain_threshold)
        progress.advance()
    return CVResult(name, predictions, probabilities, metrics(classes, predictions))


def confusion(truth: np.ndarray, predictions: np.ndarray) -> pd.DataFrame:
    """Counts over all repeats; rows true class, columns predicted class."""
    matrix = sum(confusion_matrix(truth, p, labels=list(LABELS)) for p in predictions)
    return pd.DataFrame(matrix, index=list(LABELS), columns=list(LABELS))


def plot_confusion(matrix: pd.DataFrame, title: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 4.8))
    ConfusionMatrixDisplay(matrix.to_numpy(), display_labels=list(matrix.columns)).plot(ax=ax, colorbar=False,
                                                                                        values_format="d")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_comparison(results: dict[str, dict[str, float]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(results)
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    spread = [float(np.nan_to_num(results[n]["macro_f1_std"])) for n in names]  # none drawn for one repeat
    ax.bar(names, [results[n]["macro_f1"] for n in names], yerr=spread,
           capsize=4, color=["#999999", "#bbbbbb", "#4c72b0", "#dd8452"][: len(names)])
    ax.set(ylabel="macro-F1 (cpu, mem, network, io)", ylim=(0, 1), title="Repeated group-aware CV, real scripts")
    for i, n in enumerate(names):
        top = results[n]["macro_f1"] + spread[i]
        ax.text(i, top + 0.02, f"{results[n]['macro_f1']:.3f}", ha="center", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
