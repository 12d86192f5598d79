"""The decision-makers: the site's rule, calibration out of fold, the choice, and the bootstrap over workflows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobaware.hold import deciders as D
from jobaware.hold.baselines import PolicyRule
from jobaware.hold.features import static_features


def test_the_site_rule_releases_transfer_and_policy_holds_a_few_times_never_a_users_own():
    table = pd.DataFrame({"hold_code": [13, 13, 1, 26, 47, 21], "hold_subcode": [256, 256, 0, 103, 0, 0],
                          "hold_index": [0, 3, 0, 2, 0, 1]})
    p = PolicyRule((12, 13, 21, 26, 34), 3).predict_proba(static_features(table))
    assert p.tolist() == [1, 0, 0, 1, 0, 1]


def test_calibration_is_fitted_on_the_other_folds_and_weighs_workflows():
    rng = np.random.default_rng(0)
    scores = rng.random(200)
    y = (rng.random(200) < scores).astype(int)
    folds = np.repeat(np.arange(4), 50)
    w = D.weights(np.repeat(np.arange(20), 10))
    out = D.cross_fit(scores, y, w, folds)
    again = D.Calibrator().fit(scores[folds != 0], y[folds != 0], w[folds != 0]).predict(scores[folds == 0])
    assert np.allclose(out[folds == 0], again) and np.corrcoef(out, scores)[0, 1] > 0.9
    one_class = D.Calibrator().fit(scores[:10], np.zeros(10, int), np.ones(10))
    assert one_class.predict(scores[:3]).tolist() == [0.0, 0.0, 0.0]  # only removals seen: never releases
    blend = D.Calibrator().fit(np.column_stack([scores, 1 - scores]), y, w)
    assert blend.predict(np.column_stack([scores, 1 - scores])[:5]).shape == (5,)


def test_a_wrong_removal_weighs_wrong_remove_cost_and_moves_the_threshold():
    assert D.costs([True, False, True, False], [1, 1, 0, 0], 3.0).tolist() == [0, 3, 1, 0]
    assert D.threshold(3.0) == 0.25 and D.threshold(1.0) == 0.5  # release when 1 - P <= 3 P


# workflow a: 10 holds, 8 ended released; b: 10 holds, all removed; c: one removed hold (too few for the worst case)
GROUPS = np.array(["a"] * 10 + ["b"] * 10 + ["c"])
Y = np.r_[[1] * 8, [0] * 2, [0] * 10, 0]


def decided(a, b, c):
    return np.r_[a, b, c].astype(bool)


def test_the_choice_keeps_to_deciders_never_worse_than_release_all_and_then_takes_the_lowest_cost():
    release = {"release_all": decided([1] * 10, [1] * 10, 1), "remove_all": decided([0] * 10, [0] * 10, 0),
               "site_rule": decided([1] * 10, [1] * 5 + [0] * 5, 1),
               "gbt": decided([1] * 5 + [0] * 5, [0] * 10, 0)}
    stand = {n: D.standing(r, Y, GROUPS, 3.0, 10) for n, r in release.items()}
    assert not stand["remove_all"].admissible  # right on 2 of a's 10 where release-all is right on 8
    assert stand["remove_all"].worst_accuracy == pytest.approx(0.2)
    assert not stand["gbt"].admissible and stand["gbt"].cost == pytest.approx(0.3)  # a: three wrong removals
    assert stand["site_rule"].cost == pytest.approx((0.2 + 0.5 + 1.0) / 3) and stand["site_rule"].admissible
    assert stand["site_rule"].worst_cost == pytest.approx(0.5)  # c, with one hold, is left out of the worst case
    assert D.choose(release, Y, GROUPS, tuple(release), 3.0, 10) == ("site_rule", "site_rule")


def test_ties_go_to_the_pools_evidence_then_the_plain_policy_and_a_learned_model_must_be_strictly_better():
    site = decided([1] * 10, [0] * 10, 0)
    release = {"release_all": decided([1] * 10, [1] * 10, 1), "site_rule": site, "gbt": site.copy()}
    assert D.choose(release, Y, GROUPS, tuple(release), 3.0, 10) == ("site_rule", "site_rule")
    release["pool"] = site.copy()
    assert D.choose(release, Y, GROUPS, tuple(release), 3.0, 10) == ("pool", "site_rule")
    release["lstm"] = decided([1] * 8 + [0] * 2, [0] * 10, 0)  # right on every hold
    assert D.choose(release, Y, GROUPS, tuple(release), 3.0, 10) == ("lstm", "site_rule")
    folds = np.r_[[0] * 10, [1] * 10, 2]
    served, chosen = D.nested(release, Y, GROUPS, folds, tuple(release), 3.0, 10)
    # without a, nothing tells lstm from the others: the tie goes to pool, which releases a's two removed holds
    assert chosen == ["pool", "lstm", "lstm"] and served.tolist() == site.tolist()


def test_the_bootstrap_draws_workflows_and_pairs_the_decision_makers():
    groups = np.array(["a"] * 40 + ["b", "c"])
    right = {"x": np.r_[np.ones(40), 0, 1].astype(bool), "y": np.r_[np.ones(40), 1, 1].astype(bool)}
    samples = D.bootstrap(right, groups, 500, seed=1)
    assert D.grouped_accuracy(right["x"], groups) == pytest.approx(2 / 3)  # a workflow of 40 counts once
    assert samples["x"].shape == (500,) and set(np.round(samples["x"] * 3)) <= {0, 1, 2, 3}
    assert (samples["y"] >= samples["x"]).all()  # the same draws for both
    low, high = D.interval(samples["x"])
    assert low < 2 / 3 < high
