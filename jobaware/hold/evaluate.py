"""The plots of a training run, over the evaluation holds' out-of-fold decisions (jobaware.hold.train).

`remove` is the positive class of the ROC and precision-recall curves (1 - P(release) its score); the
comparison shows each decision-maker's grouped accuracy with its bootstrap interval.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.calibration import calibration_curve  # noqa: E402
from sklearn.metrics import ConfusionMatrixDisplay, PrecisionRecallDisplay, RocCurveDisplay  # noqa: E402


def plots(y_release: np.ndarray, curves: dict[str, np.ndarray], served: np.ndarray | None, metrics: dict,
          served_name: str, history: list[dict], out_dir: Path, threshold: float = 0.5) -> list[Path]:
    """ROC and PR of remove and calibration (learned and adaptive decision-makers, out of fold), the served
    decisions' confusion matrix (release at P(release) >= `threshold`), the served network's training curve, and
    the comparison of every decision-maker."""
    out_dir.mkdir(parents=True, exist_ok=True)
    remove = 1 - np.asarray(y_release, int)
    paths: list[Path] = []

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=90)
        plt.close(fig)
        paths.append(out_dir / name)

    if len(np.unique(remove)) == 2 and curves:
        fig, ax = plt.subplots(figsize=(5, 4.5))
        for name, p in curves.items():
            RocCurveDisplay.from_predictions(remove, 1 - p, name=name, ax=ax)
        ax.set_title("ROC of remove (out of fold)")
        save(fig, "roc.png")
        fig, ax = plt.subplots(figsize=(5, 4.5))
        for name, p in curves.items():
            PrecisionRecallDisplay.from_predictions(remove, 1 - p, name=name, ax=ax)
        ax.set_title("Precision-recall of remove (out of fold)")
        save(fig, "pr.png")
        fig, ax = plt.subplots(figsize=(4.5, 4))
        for name, p in curves.items():
            observed, predicted = calibration_curve(1 - remove, np.clip(p, 0, 1), n_bins=5, strategy="quantile")
            ax.plot(predicted, observed, marker="o", label=name)
        ax.plot([0, 1], [0, 1], ls=":", c="grey")
        ax.set(xlabel="calibrated P(release)", ylabel="observed release share", title="Calibration")
        ax.legend()
        save(fig, "calibration.png")
    if served is not None:
        fig, ax = plt.subplots(figsize=(4.5, 4))
        decided = np.where(np.asarray(served) < threshold, "remove", "release")
        truth = np.where(remove == 1, "remove", "release")
        ConfusionMatrixDisplay.from_predictions(truth, decided, labels=["release", "remove"], ax=ax, colorbar=False)
        ax.set_title(f"Decisions of {served_name} (out of fold)")
        save(fig, "confusion_matrix.png")
    if history:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot([h["epoch"] for h in history], [h["train_loss"] for h in history])
        ax.set(xlabel="epoch", ylabel="weighted training loss", title="Training of the served network")
        save(fig, "training.png")
    names = [n for n in metrics if "grouped_accuracy" in metrics[n]]
    values = np.array([metrics[n]["grouped_accuracy"] for n in names])
    errors = np.array([[v - metrics[n]["low"], metrics[n]["high"] - v] for n, v in zip(names, values)]).T
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(names, values, yerr=errors, capsize=3)
    ax.set(ylabel="grouped accuracy", title="Right by workflow, out of fold (95 % bootstrap)", ylim=(0, 1.05))
    ax.tick_params(axis="x", rotation=20)
    save(fig, "comparison.png")
    return paths
