"""The operating threshold on P(fail) a scheduler acts on, chosen on the validation period, and the figures at it.

A job is flagged (`likely_fail`) when its P(fail) is at or above the threshold. The threshold is one of the
validation period's own P(fail) values, chosen by a stated objective:
- `f1`: the best F1 of the failed class (ties: the highest such threshold, which flags the fewest jobs);
- `false_alarm`: the lowest threshold whose false-alarm rate (the share of completed jobs flagged) is at most
  `max_false_alarm_rate`, which catches the most failures within that budget; when even the highest P(fail)
  flags too many completed jobs, a threshold just above every validation P(fail), which flags none of them.
"""

from __future__ import annotations

import numpy as np

ECE_BINS = 10  # expected calibration error over ten equal-width bins of P(fail)


def expected_calibration_error(failed: np.ndarray, p_fail: np.ndarray, bins: int = ECE_BINS) -> float:
    """Sum over equal-width bins of P(fail) of (share of jobs in the bin) x |failure share - mean P(fail)|."""
    p_fail = np.clip(np.asarray(p_fail, dtype=float), 0.0, 1.0)
    if not len(p_fail):
        return float("nan")
    which = np.minimum((p_fail * bins).astype(np.int64), bins - 1)
    gaps = np.bincount(which, weights=np.asarray(failed, dtype=float), minlength=bins) - \
        np.bincount(which, weights=p_fail, minlength=bins)
    return float(np.abs(gaps).sum() / len(p_fail))


def at_threshold(failed: np.ndarray, p_fail: np.ndarray, threshold: float) -> dict[str, float]:
    """`at_flags` when jobs with P(fail) >= threshold are flagged."""
    return at_flags(failed, np.asarray(p_fail, dtype=float) >= threshold)


def at_flags(failed: np.ndarray, flagged: np.ndarray) -> dict[str, float]:
    """Accuracy of the flag (fail / complete), the failed class's precision, recall and F1, and the false-alarm
    rate. A ratio over nothing is NaN, except precision with no job flagged, which is 0 (as scikit-learn's
    zero_division=0)."""
    failed, flagged = np.asarray(failed, dtype=bool), np.asarray(flagged, dtype=bool)
    tp, fp = int(np.sum(flagged & failed)), int(np.sum(flagged & ~failed))
    fn, tn = int(np.sum(~flagged & failed)), int(np.sum(~flagged & ~failed))

    def ratio(a: int, b: int) -> float:
        return a / b if b else float("nan")

    return {
        "accuracy": ratio(tp + tn, len(failed)),
        "fail_precision": ratio(tp, tp + fp) if tp + fp else 0.0,
        "fail_recall": ratio(tp, tp + fn),
        "fail_f1": ratio(2 * tp, 2 * tp + fp + fn),
        "false_alarm_rate": ratio(fp, fp + tn),
    }


def choose_threshold(failed: np.ndarray, p_fail: np.ndarray, objective: str, max_false_alarm_rate: float) -> dict:
    """The operating threshold by `objective` on validation jobs, and the validation figures at it
    (`validation_*`); `threshold` is None, with the `reason`, when the validation jobs are not all of both kinds."""
    failed = np.asarray(failed, dtype=bool)
    p_fail = np.asarray(p_fail, dtype=float)
    chosen: dict = {"objective": objective, "validation_rows": len(failed)}
    if objective == "false_alarm":
        chosen["max_false_alarm_rate"] = max_false_alarm_rate
    positives = int(failed.sum())
    if not len(failed) or positives in (0, len(failed)):
        what = "no job" if not len(failed) else "no failed job" if positives == 0 else "no completed job"
        return {**chosen, "threshold": None, "reason": f"the validation period holds {what}"}
    order = np.argsort(-p_fail, kind="stable")
    ranked, hits = p_fail[order], failed[order]
    ends = np.append(np.flatnonzero(np.diff(ranked)), len(ranked) - 1)  # last job of each distinct P(fail)
    tp = np.cumsum(hits)[ends]
    fp = ends + 1 - tp
    if objective == "f1":
        threshold = float(ranked[ends][np.argmax(2 * tp / (ends + 1 + positives))])
    else:
        within = np.flatnonzero(fp / (len(failed) - positives) <= max_false_alarm_rate)
        threshold = float(ranked[ends][within[-1]]) if len(within) else float(np.nextafter(ranked[0], np.inf))
    figures = at_threshold(failed, p_fail, threshold)
    return {**chosen, "threshold": threshold, "validation_fail_share": positives / len(failed),
            **{f"validation_{name}": value for name, value in figures.items()}}
