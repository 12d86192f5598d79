"""Metrics of hold decisions over a whole evaluation set, the decision threshold, and the plots.

`remove` is the positive class: a decision removes when P(release) < threshold. The threshold is chosen
on the validation set (the one that maximises the primary metric there; 0.5 for a constant predictor) and
kept with the model. Threshold-free metrics (ROC-AUC, PR-AUC) score 1 - P(release) as the score of remove.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.calibration import calibration_curve  # noqa: E402
from sklearn.metrics import (  # noqa: E402
    ConfusionMatrixDisplay,
    PrecisionRecallDisplay,
    RocCurveDisplay,
    average_precision_score,
    balanced_accuracy_score,
    brier_score_loss,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

THRESHOLD_FREE = ("roc_auc", "pr_auc")


def metrics(y_release: np.ndarray, p_release: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    """Every metric of a set of decisions; `y_release` is 1 for `release`, 0 for `remove`."""
    y_release = np.asarray(y_release, int)
    p_release = np.asarray(p_release, float)
    remove = 1 - y_release
    predicted_remove = (p_release < threshold).astype(int)
    both = len(np.unique(remove)) == 2
    out = {
        "n": float(len(y_release)),
        "remove_share": float(remove.mean()) if len(remove) else float("nan"),
        "f1_remove": float(f1_score(remove, predicted_remove, zero_division=0)),
        "precision_remove": float(precision_score(remove, predicted_remove, zero_division=0)),
        "recall_remove": float(recall_score(remove, predicted_remove, zero_division=0)),
        "f1_release": float(f1_score(y_release, 1 - predicted_remove, zero_division=0)),
        "balanced_accuracy": float(balanced_accuracy_score(remove, predicted_remove)) if both else float("nan"),
        "accuracy": float((predicted_remove == remove).mean()) if len(remove) else float("nan"),
        "roc_auc": float(roc_auc_score(remove, 1 - p_release)) if both else float("nan"),
        "pr_auc": float(average_precision_score(remove, 1 - p_release)) if both else float("nan"),
        "brier": float(brier_score_loss(y_release, np.clip(p_release, 0, 1))) if len(y_release) else float("nan"),
        "threshold": float(threshold),
    }
    return out


def choose_threshold(y_release: np.ndarray, p_release: np.ndarray, metric: str) -> float:
    """The threshold that maximises `metric` on these decisions (F1 of remove for threshold-free metrics).

    Every distinct P(release) is tried at once from cumulative counts (sklearn's metrics, one call per
    threshold, would be hundreds of times slower); `metrics` reports the chosen one with sklearn."""
    target = "f1_remove" if metric in THRESHOLD_FREE else metric
    y_release = np.asarray(y_release, int)
    p_release = np.asarray(p_release, float)
    if len(y_release) == 0:
        return 0.5
    candidates = np.unique(np.r_[p_release, np.nextafter(p_release.max(), np.inf), 0.5])
    order = np.argsort(p_release, kind="stable")
    sorted_p, removed = p_release[order], 1 - y_release[order]
    below = np.searchsorted(sorted_p, candidates, side="left")  # decided remove: p < threshold
    cum_remove = np.r_[0, np.cumsum(removed)]
    tp = cum_remove[below]  # removes decided remove
    fp = below - tp  # releases decided remove
    positives, negatives = removed.sum(), len(removed) - removed.sum()
    fn, tn = positives - tp, negatives - fp
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = {
            "f1_remove": np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0),
            "f1_release": np.where(2 * tn + fn + fp > 0, 2 * tn / (2 * tn + fn + fp), 0.0),
            "balanced_accuracy": (tp / max(positives, 1) + tn / max(negatives, 1)) / 2,
        }[target]
    return float(candidates[int(np.argmax(scores))])


def plots(y_release: np.ndarray, curves: dict[str, np.ndarray], threshold: float, history: list[dict],
          table: dict[str, dict[str, float]], primary: str, out_dir: Path) -> list[Path]:
    """ROC and PR of remove (model and baselines), confusion matrix, calibration, training curve, comparison."""
    out_dir.mkdir(parents=True, exist_ok=True)
    remove = 1 - np.asarray(y_release, int)
    paths: list[Path] = []

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=90)
        plt.close(fig)
        paths.append(out_dir / name)

    if len(np.unique(remove)) == 2:
        fig, ax = plt.subplots(figsize=(5, 4.5))
        for name, p in curves.items():
            RocCurveDisplay.from_predictions(remove, 1 - p, name=name, ax=ax)
        ax.set_title("ROC of remove")
        save(fig, "roc.png")
        fig, ax = plt.subplots(figsize=(5, 4.5))
        for name, p in curves.items():
            PrecisionRecallDisplay.from_predictions(remove, 1 - p, name=name, ax=ax)
        ax.set_title("Precision-recall of remove")
        save(fig, "pr.png")
        fig, ax = plt.subplots(figsize=(4.5, 4))
        observed, predicted = calibration_curve(1 - remove, np.clip(curves["model"], 0, 1), n_bins=10, strategy="quantile")
        ax.plot(predicted, observed, marker="o")
        ax.plot([0, 1], [0, 1], ls=":", c="grey")
        ax.set(xlabel="predicted P(release)", ylabel="observed release share", title="Calibration")
        save(fig, "calibration.png")
    fig, ax = plt.subplots(figsize=(4.5, 4))
    decided = np.where(curves["model"] < threshold, "remove", "release")
    truth = np.where(remove == 1, "remove", "release")
    ConfusionMatrixDisplay.from_predictions(truth, decided, labels=["release", "remove"], ax=ax, colorbar=False)
    ax.set_title(f"Decisions (threshold {threshold:.2f})")
    save(fig, "confusion_matrix.png")
    if history:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        epochs = [h["epoch"] for h in history]
        ax.plot(epochs, [h["train_loss"] for h in history], label="training loss")
        ax.set_xlabel("epoch")
        twin = ax.twinx()
        twin.plot(epochs, [h["validation"] for h in history], color="tab:orange", label=f"validation {primary}")
        ax.legend(loc="upper left")
        twin.legend(loc="upper right")
        ax.set_title("Training")
        save(fig, "training.png")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = list(table)
    ax.bar(names, [table[n].get(primary, np.nan) for n in names])
    ax.set(ylabel=primary, title=f"{primary} on the test holds")
    ax.tick_params(axis="x", rotation=20)
    save(fig, "comparison.png")
    return paths
