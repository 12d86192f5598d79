"""The decision-makers a hold can be served by, how each is scored on real holds, and how one is chosen.

Decision-makers. Plain policies: `release_all`, `remove_all` and `site_rule` (the site's rule by code,
jobaware.hold.baselines.PolicyRule). Learned: `lstm`, `gbt`, and `blend`, a logistic regression over the logits
of both. Every learned model is calibrated: a logistic regression from its score (the blend: both scores) to
the real outcome, fitted on holds of other folds than the ones it decides (cross-fitting); it releases when the
calibrated P(release) is at least one half.

Scores. `grouped_accuracy`: the accuracy with every workflow (jobaware.hold.groups) weighing the same, each of
its holds 1 / (its holds); `accuracy`: every hold the same. Intervals: percentile bootstrap over workflows
(workflows drawn with replacement, `draws` times, seeded); a margin between two decision-makers is bootstrapped
paired (the same draws for both).

Choice. The best plain policy serves unless a learned model is strictly better (grouped accuracy), in which case
the best learned model serves; ties go to the plain policy, then to the first named. `nested` measures this
rule honestly: for each fold the choice is made on the other folds' decisions and applied to that fold.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

PLAIN = ("release_all", "remove_all", "site_rule")
LEARNED = ("lstm", "gbt", "blend")
DESCRIBED = {"release_all": "release every hold", "remove_all": "remove every hold",
             "site_rule": "the site's rule by hold code", "lstm": "the LSTM over the event log",
             "gbt": "gradient-boosted trees on the job's and the pool's counts", "blend": "a calibrated blend of the "
             "LSTM and the trees"}
EPS = 1e-4


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, float), EPS, 1 - EPS)
    return np.log(p / (1 - p))


def weights(groups: np.ndarray) -> np.ndarray:
    """1 / (the holds of the hold's workflow): every workflow weighs 1."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse]


class Calibrator:
    """P(release) from scores: a weighted logistic regression, or the weighted share when one class is seen."""

    def fit(self, scores: np.ndarray, y: np.ndarray, w: np.ndarray) -> Calibrator:
        y = np.asarray(y, int)
        self.constant = float(np.average(y, weights=w)) if len(y) else 0.5
        self.model = None
        if len(np.unique(y)) == 2:
            self.model = LogisticRegression(C=1.0).fit(logit(scores).reshape(len(y), -1), y, sample_weight=w)
        return self

    def predict(self, scores: np.ndarray) -> np.ndarray:
        if self.model is None:
            return np.full(len(scores), self.constant)
        return self.model.predict_proba(logit(scores).reshape(len(scores), -1))[:, 1]


def cross_fit(scores: np.ndarray, y: np.ndarray, w: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """Calibrated P(release) of every hold, each from a calibrator fitted on the other folds."""
    out = np.empty(len(y))
    for k in np.unique(folds):
        mine = folds == k
        out[mine] = Calibrator().fit(scores[~mine], y[~mine], w[~mine]).predict(scores[mine])
    return out


def grouped_accuracy(right: np.ndarray, groups: np.ndarray) -> float:
    right = np.asarray(right, float)
    return float(np.average(right, weights=weights(groups))) if len(right) else float("nan")


def choose(right: dict[str, np.ndarray], groups: np.ndarray, candidates: tuple[str, ...]) -> tuple[str, str]:
    """The decision-maker that serves (by the module's rule) among `candidates`, and the best plain policy."""
    score = {name: grouped_accuracy(right[name], groups) for name in candidates}
    plain = max((n for n in candidates if n in PLAIN), key=lambda n: score[n])
    learned = [n for n in candidates if n not in PLAIN]
    best = max(learned, key=lambda n: score[n]) if learned else None
    return (best if best is not None and score[best] > score[plain] else plain), plain


def nested(right: dict[str, np.ndarray], groups: np.ndarray, folds: np.ndarray, candidates: tuple[str, ...]) -> tuple[
        np.ndarray, list[str]]:
    """Whether the chosen decision-maker was right on each hold, the choice made without the hold's fold; and the
    choice made for each fold."""
    out = np.zeros(len(groups), bool)
    chosen = []
    for k in np.unique(folds):
        mine = folds == k
        name, _ = choose({n: r[~mine] for n, r in right.items()}, groups[~mine], candidates)
        out[mine] = right[name][mine]
        chosen.append(name)
    return out, chosen


def bootstrap(right: dict[str, np.ndarray], groups: np.ndarray, draws: int, seed: int) -> dict[str, np.ndarray]:
    """Grouped accuracy of each decision-maker on `draws` bootstrap samples of workflows (the same for all)."""
    names, inverse = np.unique(groups, return_inverse=True)
    size = np.bincount(inverse)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(names), size=(draws, len(names)))
    times = np.zeros((draws, len(names)))
    np.add.at(times, (np.repeat(np.arange(draws), len(names)), picks.ravel()), 1)
    out = {}
    for name, r in right.items():
        per_group = np.bincount(inverse, weights=np.asarray(r, float)) / size
        out[name] = times @ per_group / len(names)
    return out


def interval(samples: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    tail = (1 - level) / 2
    return float(np.quantile(samples, tail)), float(np.quantile(samples, 1 - tail))
