"""Metrics and plots for failure predictions."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.calibration import calibration_curve  # noqa: E402
from sklearn.metrics import (  # noqa: E402
    ConfusionMatrixDisplay,
    average_precision_score,
    brier_score_loss,
    f1_score,
    precision_recall_curve,
    recall_score,
    roc_auc_score,
    roc_curve,
)

from jobaware.failure.operating import at_threshold, expected_calibration_error
from jobaware.failure.schema import OUTCOMES


def auc_difference(failed: np.ndarray, first: np.ndarray, second: np.ndarray, level: float = 0.9) -> dict:
    """ROC-AUC of two scores of the same jobs (`failed`: 1 for a failed job), their difference (first - second) and
    its `level` two-sided confidence interval, by DeLong's variance for correlated ROC curves (DeLong, DeLong and
    Clarke-Pearson 1988; the midrank computation of Sun and Xu 2014): exact in one pass, where a bootstrap would
    rescore thousands of resamples. NaN where the jobs hold one class only."""
    from scipy.stats import norm, rankdata

    failed = np.asarray(failed).astype(bool)
    positives, negatives = int(failed.sum()), int((~failed).sum())
    if not positives or not negatives:
        nan = float("nan")
        return {"first": nan, "second": nan, "difference": nan, "low": nan, "high": nan, "level": level}
    scores = np.vstack([np.asarray(first, float), np.asarray(second, float)])
    ordered = np.hstack([scores[:, failed], scores[:, ~failed]])  # positives first
    whole = rankdata(ordered, axis=1)
    within_positive = rankdata(ordered[:, :positives], axis=1)
    within_negative = rankdata(ordered[:, positives:], axis=1)
    auc = (whole[:, :positives].sum(axis=1) - positives * (positives + 1) / 2) / (positives * negatives)
    v_positive = (whole[:, :positives] - within_positive) / negatives  # structural components
    v_negative = 1.0 - (whole[:, positives:] - within_negative) / positives
    covariance = (np.atleast_2d(np.cov(v_positive)) / positives if positives > 1 else 0.0) \
        + (np.atleast_2d(np.cov(v_negative)) / negatives if negatives > 1 else 0.0)
    spread = float(np.sqrt(max(covariance[0, 0] + covariance[1, 1] - 2 * covariance[0, 1], 0.0))) \
        if np.ndim(covariance) else 0.0
    difference, z = float(auc[0] - auc[1]), float(norm.ppf(0.5 + level / 2))
    return {"first": float(auc[0]), "second": float(auc[1]), "difference": difference,
            "low": difference - z * spread, "high": difference + z * spread, "level": level}


def _nan_if_one_class(fn, y, score):
    return float(fn(y, score)) if len(np.unique(y)) == 2 else float("nan")


def metrics(y: pd.Series, proba: pd.DataFrame, bayes_p_fail: np.ndarray | None = None,
            threshold: float | None = None) -> dict:
    """ROC-AUC and PR-AUC of P(fail), Brier, the expected calibration error of P(fail) (`ECE_BINS` equal-width
    bins), macro-F1 and per-class recall of the arg-max class; with an operating `threshold`, the threshold and
    the figures of the flag P(fail) >= threshold (`at_threshold`)."""
    y = y.astype(str).to_numpy()
    failed = (y != "COMPLETED").astype(int)
    classes = [c for c in OUTCOMES if c in set(y)]
    predicted = np.array(OUTCOMES)[proba[[f"p_{c}" for c in OUTCOMES]].to_numpy().argmax(axis=1)]
    out = {
        "n": int(len(y)),
        "fail_share": float(failed.mean()) if len(y) else float("nan"),
        "roc_auc": _nan_if_one_class(roc_auc_score, failed, proba["p_fail"]),
        "pr_auc": _nan_if_one_class(average_precision_score, failed, proba["p_fail"]),
        "brier": float(brier_score_loss(failed, proba["p_fail"].clip(0, 1))) if len(y) else float("nan"),
        "ece": expected_calibration_error(failed, proba["p_fail"].to_numpy()),
        "macro_f1": float(f1_score(y, predicted, labels=classes, average="macro", zero_division=0)),
    }
    for c, r in zip(classes, recall_score(y, predicted, labels=classes, average=None, zero_division=0), strict=True):
        out[f"recall_{c}"] = float(r)
    if threshold is not None:
        out["threshold"] = float(threshold)
        out.update(at_threshold(failed, proba["p_fail"].to_numpy(), threshold))
    if bayes_p_fail is not None:
        out["bayes_roc_auc"] = _nan_if_one_class(roc_auc_score, failed, bayes_p_fail)
        out["gap_to_bayes"] = out["bayes_roc_auc"] - out["roc_auc"]
    return out


def plots(y: pd.Series, proba: pd.DataFrame, out_dir: Path, importance: pd.Series | None = None) -> list[Path]:
    """ROC, PR, calibration, confusion matrix and feature importance as PNG files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    y = y.astype(str).to_numpy()
    failed = (y != "COMPLETED").astype(int)
    paths = []

    def save(fig, name):
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)

    if len(np.unique(failed)) == 2:
        fig, ax = plt.subplots(figsize=(4.5, 4))
        fpr, tpr, _ = roc_curve(failed, proba["p_fail"])
        ax.plot(fpr, tpr, label=f"AUC {roc_auc_score(failed, proba['p_fail']):.3f}")
        ax.plot([0, 1], [0, 1], ls=":", c="grey")
        ax.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC of P(fail)")
        ax.legend(loc="lower right")
        save(fig, "roc.png")
        fig, ax = plt.subplots(figsize=(4.5, 4))
        precision, recall, _ = precision_recall_curve(failed, proba["p_fail"])
        ax.plot(recall, precision, label=f"AP {average_precision_score(failed, proba['p_fail']):.3f}")
        ax.axhline(failed.mean(), ls=":", c="grey")
        ax.set(xlabel="recall", ylabel="precision", title="Precision-recall of P(fail)")
        ax.legend()
        save(fig, "pr.png")
        fig, ax = plt.subplots(figsize=(4.5, 4))
        true_frac, mean_pred = calibration_curve(failed, proba["p_fail"].clip(0, 1), n_bins=10, strategy="quantile")
        ax.plot(mean_pred, true_frac, marker="o")
        ax.plot([0, 1], [0, 1], ls=":", c="grey")
        ax.set(xlabel="predicted P(fail)", ylabel="observed failure share", title="Calibration")
        save(fig, "calibration.png")
    fig, ax = plt.subplots(figsize=(6, 5))
    predicted = np.array(OUTCOMES)[proba[[f"p_{c}" for c in OUTCOMES]].to_numpy().argmax(axis=1)]
    labels = [c for c in OUTCOMES if c in set(y) | set(predicted)]
    ConfusionMatrixDisplay.from_predictions(y, predicted, labels=labels, ax=ax, colorbar=False, xticks_rotation=30)
    ax.set_title("Confusion matrix (arg-max class)")
    save(fig, "confusion_matrix.png")
    if importance is not None and len(importance):
        fig, ax = plt.subplots(figsize=(6, 6))
        top = importance.sort_values().tail(20)
        ax.barh(top.index, top.to_numpy())
        ax.set(xlabel="drop in ROC-AUC when permuted", title="Feature importance")
        save(fig, "feature_importance.png")
    return paths
