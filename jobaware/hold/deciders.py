"""The decision-makers a hold can be served by, how each is scored on real holds, and how one is chosen.

Decision-makers. Plain policies: `release_all`, `remove_all` and `site_rule` (the site's rule by code,
jobaware.hold.baselines.PolicyRule). Adaptive (jobaware.hold.adaptive): `pool`, `siblings`, `pool_site`, which
read how the log's earlier holds ended. Learned: `lstm`, `gbt`, and `blend`, a logistic regression over the
logits of both. Every learned model is calibrated: a logistic regression from its score (the blend: both
scores) to the real outcome, fitted on holds of other folds than the ones it decides (cross-fitting).

Costs. A removal cannot be undone: the job, its progress and its place in the queue are lost, and a person has
to notice and submit it again. A wrong release costs one more hold cycle (a start that is held again), and the
schedd's own max-holds policy removes a job that keeps coming back. The site's rule already pays up to
`policy_max_releases` (3) such cycles before it gives up on a job, so a wrong removal weighs
`wrong_remove_cost` = 3 wrong releases by default. Every decision-maker releases when its P(release) is at least
1 / (1 + wrong_remove_cost) (the expected cost of releasing, 1 - P, at most that of removing, P x the cost).
`cost`: the mean cost per hold in wrong releases (0 when right).

Scores. Per workflow (jobaware.hold.groups): accuracy and mean cost. `grouped_accuracy` and `cost`: their
means with every workflow weighing the same; `accuracy`: every hold the same; `worst_accuracy` and
`worst_cost`: the worst workflow among those with at least `min_workflow_holds` evaluation holds (all of them
when none has so many). Intervals: percentile bootstrap over workflows (drawn with replacement, `draws` times,
seeded); a margin between two decision-makers is bootstrapped paired (the same draws for both).

Choice (`choose`), robust across workflows, each a pool with its own share of holds that end released:
  1. admissible: right at least as often as release-all on every workflow with `min_workflow_holds` holds
     (release-all itself always is);
  2. among those, the lowest `cost` (every workflow weighing the same), then the lowest `worst_cost`;
  3. ties go first to a decision-maker that reads the pool's evidence (where the pool is like ours it does
     what the best plain policy does, and where it is not it follows the pool), then to the plain policy,
     then to a learned model; within each, the first named.
So a learned or adaptive decision-maker serves only when it is never worse than the best plain policy by this
rule. The worst case is the second term, not the first: chosen first, it followed the one workflow where holds
end released most often, and, measured by `nested` on the bundled real holds, it then served the site's rule
to a workflow it lost whole (the README's results). `nested` measures the rule honestly: for each fold the
choice is made on the other folds' decisions and applied to that fold. The promotion gate compares `cost`
(jobaware.hold.capability.PRIMARY_METRIC).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from jobaware.hold.adaptive import ADAPTIVE

PLAIN = ("release_all", "remove_all", "site_rule")
LEARNED = ("lstm", "gbt", "blend")
PREFERENCE = (*ADAPTIVE, *PLAIN, *LEARNED)  # the order ties are broken in
DESCRIBED = {"release_all": "release every hold", "remove_all": "remove every hold",
             "site_rule": "the site's rule by hold code", "pool": "how this log's earlier holds ended, by code, "
             "from the outcomes fitted on real holds", "siblings": "how the cluster's other jobs' holds ended, from "
             "the outcomes fitted on real holds", "pool_site": "how this log's earlier holds ended, by code; the "
             "site's rule before any has ended", "lstm": "the LSTM over the event log",
             "gbt": "gradient-boosted trees on the job's and the pool's counts", "blend": "a calibrated blend of the "
             "LSTM and the trees"}
TIE = 1e-9
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


def grouped_mean(values: np.ndarray, groups: np.ndarray) -> float:
    """The mean with every workflow weighing the same."""
    values = np.asarray(values, float)
    return float(np.average(values, weights=weights(groups))) if len(values) else float("nan")


def grouped_accuracy(right: np.ndarray, groups: np.ndarray) -> float:
    return grouped_mean(right, groups)


def threshold(wrong_remove_cost: float) -> float:
    """Release when P(release) is at least this: where releasing costs no more than removing, in expectation."""
    return 1.0 / (1.0 + wrong_remove_cost)


def costs(release: np.ndarray, y_release: np.ndarray, wrong_remove_cost: float) -> np.ndarray:
    """The cost of each decision in wrong releases: 0 when right, 1 a wrong release, `wrong_remove_cost` a
    wrong removal."""
    release, y = np.asarray(release, bool), np.asarray(y_release) == 1
    return np.where(release == y, 0.0, np.where(y, wrong_remove_cost, 1.0))


@dataclass
class Standing:
    """How one decision-maker fares by workflow (the choice's terms; see the module)."""

    admissible: bool
    worst_cost: float
    cost: float
    worst_accuracy: float


def judged(groups: np.ndarray, min_workflow_holds: int) -> np.ndarray:
    """The workflows the worst case is taken over: those with `min_workflow_holds` holds, else all."""
    names, counts = np.unique(groups, return_counts=True)
    big = names[counts >= min_workflow_holds]
    return big if len(big) else names


def standing(release: np.ndarray, y_release: np.ndarray, groups: np.ndarray, wrong_remove_cost: float,
             min_workflow_holds: int) -> Standing:
    y = np.asarray(y_release) == 1
    frame = pd.DataFrame({"right": np.asarray(release, bool) == y, "cost": costs(release, y, wrong_remove_cost),
                          "released": y}).groupby(np.asarray(groups)).mean()
    big = frame.loc[judged(groups, min_workflow_holds)]
    return Standing(admissible=bool((big["right"] >= big["released"] - TIE).all()),
                    worst_cost=float(big["cost"].max()), cost=float(frame["cost"].mean()),
                    worst_accuracy=float(big["right"].min()))


def choose(release: dict[str, np.ndarray], y_release: np.ndarray, groups: np.ndarray, candidates: tuple[str, ...],
           wrong_remove_cost: float, min_workflow_holds: int) -> tuple[str, str]:
    """The decision-maker that serves (by the module's rule) among `candidates`, given each one's decisions
    (True: release), and the best plain policy by the same rule."""
    stand = {n: standing(release[n], y_release, groups, wrong_remove_cost, min_workflow_holds) for n in candidates}

    def key(name):
        s = stand[name]
        return (not s.admissible, round(s.cost / TIE), round(s.worst_cost / TIE), PREFERENCE.index(name))

    plain = min((n for n in candidates if n in PLAIN), key=key)
    return min(candidates, key=key), plain


def nested(release: dict[str, np.ndarray], y_release: np.ndarray, groups: np.ndarray, folds: np.ndarray,
           candidates: tuple[str, ...], wrong_remove_cost: float, min_workflow_holds: int) -> tuple[
        np.ndarray, list[str]]:
    """The release decisions of the chosen decision-maker on each hold, the choice made without the hold's fold;
    and the choice made for each fold."""
    out = np.zeros(len(groups), bool)
    chosen = []
    for k in np.unique(folds):
        mine = folds == k
        name, _ = choose({n: r[~mine] for n, r in release.items()}, y_release[~mine], groups[~mine], candidates,
                         wrong_remove_cost, min_workflow_holds)
        out[mine] = release[name][mine]
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
