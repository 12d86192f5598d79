"""Decision-makers that read the pool's own evidence at decision time: how the log's earlier holds ended.

A pool is not ours: in the real logs bundled here most holds were removed by hand, in a pool with a periodic
release most end released. These decision-makers start from what real holds of other workflows say and move
towards what the log being decided says, as far as it says it.

P(release) of a hold is the mean of a Beta posterior. Its prior mean is the P(release) of the hold's code and
subcode fitted on real holds (jobaware.hold.outcomes, with its own shrinkage); its prior weighs `strength`
holds: how much pools agree, from the spread of the training workflows' shares of holds that ended released
(method of moments, m(1 - m) / variance - 1, within [STRENGTH_MIN, STRENGTH_MAX]; the spread of a few
workflows' shares overstates the pools' disagreement, so the prior comes out weak rather than strong, the side
that adapts to a pool unlike ours). The prior is updated level by level, broad to narrow, each level's
posterior mean the next level's prior mean, with the counts of jobaware.hold.features.EVIDENCE (other jobs'
holds whose end the log wrote before this hold: `release` when the job then ran to a normal end, else
`remove`; each ended hold counts once; a hold released whose end is not yet written counts as a release with
the chance that a released hold ends `release` and as a removal otherwise (releases end later than removals:
without them the first evidence in a log would lean towards removals); that chance is itself a posterior of the
same strength, its prior the fitted chance for the decided hold's code, (1 - reheld) x ends_normally, updated
with how the log's released holds ended):
  - `pool`: the log's ended holds of other codes, then those of the hold's code;
  - `siblings`: the ended holds of the cluster's other jobs;
  - `pool_site`: as `pool`, but a hold with no ended or released hold before it in the log is decided by the
    site's rule (jobaware.hold.baselines.PolicyRule) instead of the fitted prior.
Only events before the hold enter (jobaware.hold.features is causal), so the same numbers come from a log cut
right after the hold.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jobaware.hold.baselines import PolicyRule
from jobaware.hold.features import static_features
from jobaware.hold.outcomes import Outcomes

ADAPTIVE = ("pool", "siblings", "pool_site")
STRENGTH_MIN, STRENGTH_MAX = 1.0, 50.0


def strength(release_shares: np.ndarray) -> float:
    """The prior's weight in holds, from the workflows' shares of holds that ended released (see the module)."""
    shares = np.asarray(release_shares, float)
    if len(shares) < 2:
        return STRENGTH_MIN
    mean, variance = shares.mean(), shares.var()
    if variance <= 0:
        return STRENGTH_MAX
    return float(np.clip(mean * (1 - mean) / variance - 1, STRENGTH_MIN, STRENGTH_MAX))


def workflow_strength(y_release: np.ndarray, workflows: np.ndarray) -> float:
    """`strength` of ended holds (1 = ended released) and their workflows."""
    shares = pd.Series(np.asarray(y_release, float)).groupby(np.asarray(workflows)).mean()
    return strength(shares.to_numpy())


def levels(name: str, counts: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The (ended released, ended removed, released not yet ended) counts of each level of `name`, broad to
    narrow (see the module)."""
    def get(*columns):
        return tuple(counts[c].to_numpy(float) for c in columns)
    if name == "siblings":
        return [get("sib_ended_release", "sib_ended_remove", "sib_released_pending")]
    every = get("log_ended_release", "log_ended_remove", "log_released_pending")
    same = get("log_ended_release_same_code", "log_ended_remove_same_code", "log_released_pending_same_code")
    return [tuple(a - b for a, b in zip(every, same)), same]


def chances(name: str, counts: pd.DataFrame, fitted: Outcomes, prior_strength: float,
            rule: PolicyRule) -> np.ndarray:
    """P(release) of the holds whose count features (jobaware.hold.features.count_features) are `counts`."""
    if not len(counts):
        return np.zeros(0)
    codes, subcodes = counts["hold_code"].to_numpy(), counts["hold_subcode"].to_numpy()
    p = fitted.p_release(codes, subcodes)
    known = [fitted.lookup(c, s) for c, s in zip(codes, subcodes)]
    ends_well = np.array([(1 - k.reheld) * k.ends_normally for k in known])
    ended_well, ended_badly = counts["log_ended_release"].to_numpy(float), counts["log_released_ended_remove"].to_numpy(
        float)
    ends_well = (prior_strength * ends_well + ended_well) / (prior_strength + ended_well + ended_badly)
    for released, removed, pending in levels(name, counts):
        p = (prior_strength * p + released + ends_well * pending) / (prior_strength + released + removed + pending)
    if name == "pool_site":
        seen = counts["log_ended_release"] + counts["log_ended_remove"] + counts["log_released_pending"]
        p = np.where(seen.to_numpy() == 0, rule.predict_proba(static_features(counts)), p)
    return p


def evidence_words(row) -> str:
    """The evidence of one hold (a row of count features), in words."""
    return (f"this log's earlier holds of other jobs: {int(row['log_ended_release'])} ended released, "
            f"{int(row['log_ended_remove'])} removed, {int(row['log_released_pending'])} released not yet ended "
            f"(of this code {int(row['log_ended_release_same_code'])}, {int(row['log_ended_remove_same_code'])}, "
            f"{int(row['log_released_pending_same_code'])}; of its cluster {int(row['sib_ended_release'])}, "
            f"{int(row['sib_ended_remove'])}, {int(row['sib_released_pending'])})")
