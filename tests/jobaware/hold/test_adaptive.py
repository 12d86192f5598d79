"""The adaptive decision-makers: a prior fitted on real holds, moved by how the log's earlier holds ended."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobaware.hold import adaptive
from jobaware.hold.baselines import PolicyRule
from jobaware.hold.features import EVIDENCE
from jobaware.hold.outcomes import CodeOutcomes, Outcomes

RULE = PolicyRule((12, 13, 21, 26, 34), 3)


def fitted(p_release_13: float) -> Outcomes:
    """Outcomes where code 13 ends released with about `p_release_13` and every other code never."""
    never = CodeOutcomes(released=0.0, removed=1.0, held=0.0, reheld=0.0, ends_normally=1.0)
    code = CodeOutcomes(released=p_release_13, removed=1 - p_release_13, held=0.0, reheld=0.0, ends_normally=1.0)
    return Outcomes({"all": never, "13": code}, {}, {})


def counts(code: int, **evidence) -> pd.DataFrame:
    row = {"hold_code": code, "hold_subcode": 2, "hold_index": 0, **{name: 0 for name in EVIDENCE}, **evidence}
    return pd.DataFrame([row])


def test_the_priors_strength_comes_from_how_much_workflows_agree():
    assert adaptive.strength(np.array([0.1, 0.1, 0.1])) == adaptive.STRENGTH_MAX  # they agree: a strong prior
    assert adaptive.strength(np.array([0.5])) == adaptive.STRENGTH_MIN  # one workflow says nothing of the spread
    shares = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.24, 0.17])
    assert adaptive.strength(shares) == pytest.approx(shares.mean() * (1 - shares.mean()) / shares.var() - 1)
    y = np.r_[np.zeros(10), np.ones(5), np.zeros(5)]
    assert adaptive.workflow_strength(y, np.repeat(["a", "b"], 10)) == pytest.approx(0.25 * 0.75 / 0.0625 - 1)


def test_without_evidence_the_fitted_prior_decides_and_the_logs_holds_move_it():
    prior = fitted(0.05)
    alone = adaptive.chances("pool", counts(13), prior, 5.0, RULE)
    assert alone == pytest.approx([0.05])
    # two earlier holds of the same code ended released: (5 x 0.05 + 2) / (5 + 2)
    same = counts(13, log_ended_release=2, log_ended_release_same_code=2)
    assert adaptive.chances("pool", same, prior, 5.0, RULE) == pytest.approx([2.25 / 7])
    # of other codes they move the code's prior first, then the code's own (none) leave it there
    other = counts(13, log_ended_release=2)
    assert adaptive.chances("pool", other, prior, 5.0, RULE) == pytest.approx([2.25 / 7])
    mixed = counts(13, log_ended_release=2, log_ended_remove=3, log_ended_remove_same_code=3)
    assert adaptive.chances("pool", mixed, prior, 5.0, RULE) == pytest.approx([(5 * 2.25 / 7) / 8])
    # siblings: only the cluster's other jobs count
    assert adaptive.chances("siblings", same, prior, 5.0, RULE) == pytest.approx([0.05])
    sibling = counts(13, sib_ended_release=1, sib_ended_remove=1)
    assert adaptive.chances("siblings", sibling, prior, 5.0, RULE) == pytest.approx([1.25 / 7])


def test_a_release_not_yet_ended_counts_as_released_holds_of_this_log_end():
    prior = fitted(0.05)  # released holds always end well here: (1 - reheld) x ends_normally = 1
    pending = counts(13, log_released_pending=2, log_released_pending_same_code=2)
    assert adaptive.chances("pool", pending, prior, 5.0, RULE) == pytest.approx([2.25 / 7])
    # five of the log's released holds were then removed: a pending release counts (5 x 1) / (5 + 5) = half
    badly = counts(13, log_released_pending=2, log_released_pending_same_code=2, log_released_ended_remove=5)
    assert adaptive.chances("pool", badly, prior, 5.0, RULE) == pytest.approx([(0.25 + 1) / 7])


def test_pool_site_lets_the_sites_rule_decide_until_a_hold_of_the_log_has_ended():
    prior = fitted(0.05)
    assert adaptive.chances("pool_site", counts(13), prior, 5.0, RULE) == pytest.approx([1.0])  # 13: released
    assert adaptive.chances("pool_site", counts(1), prior, 5.0, RULE) == pytest.approx([0.0])  # a user's own
    seen = counts(13, log_ended_remove=1)
    assert adaptive.chances("pool_site", seen, prior, 5.0, RULE) == pytest.approx(
        adaptive.chances("pool", seen, prior, 5.0, RULE))


@pytest.mark.parametrize("share", [0.1, 0.9])
def test_on_a_generated_pool_the_pool_decider_follows_the_share_released(tmp_path, share):
    """A check of the mechanism on generated pools (bench/hold_shift.py measures it): with the prior of pools
    where holds are removed, a pool that releases most holds is soon released, one that removes them removed."""
    from bench.hold_shift import shifted
    from jobaware.hold import deciders as D
    from jobaware.hold import features as F
    from jobaware.hold import synth
    from jobaware.hold.groups import log_holds
    from jobaware.hold.reader import read_events

    prior = fitted(0.05)
    log = tmp_path / "pool.log"
    synth.write(log, 1500, 2, outcomes=shifted(prior, share))
    events, _ = read_events([str(log)])
    table = log_holds(events, str(log))
    table = table[table["label"].notna()].reset_index(drop=True)
    counts_ = F.count_features(F.build_index(events), table)
    y = (table["label"] == "release").to_numpy()
    release = adaptive.chances("pool", counts_, prior, 5.0, RULE) >= D.threshold(3.0)
    late = (counts_["log_ended_release"] + counts_["log_ended_remove"]).to_numpy() >= 20
    assert late.sum() > 50
    if share > 0.5:
        assert y[late].mean() > 0.6 and release[late].mean() > 0.9  # the share released read from the log
        assert D.costs(release, y, 3.0).mean() < D.costs(np.zeros(len(y), bool), y, 3.0).mean() / 2
    else:
        assert y[late].mean() < 0.2 and release[late].mean() < 0.1
