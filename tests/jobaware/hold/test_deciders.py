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


def test_the_choice_goes_to_a_learned_model_only_when_it_is_strictly_better():
    groups = np.array(["a", "a", "b", "c"])
    right = {"release_all": np.array([0, 0, 1, 0], bool), "remove_all": np.array([1, 1, 0, 1], bool),
             "site_rule": np.array([1, 0, 0, 1], bool), "gbt": np.array([1, 1, 0, 1], bool)}
    assert D.choose(right, groups, tuple(right)) == ("remove_all", "remove_all")  # a tie: the policy
    right["gbt"] = np.array([1, 1, 1, 1], bool)
    assert D.choose(right, groups, tuple(right)) == ("gbt", "remove_all")
    folds = np.array([0, 0, 1, 2])
    served, chosen = D.nested(right, groups, folds, tuple(right))
    # fold 1 (workflow b) is decided by the choice on a and c, where gbt only ties with remove_all
    assert chosen == ["gbt", "remove_all", "gbt"] and served.tolist() == [True, True, False, True]


def test_the_bootstrap_draws_workflows_and_pairs_the_decision_makers():
    groups = np.array(["a"] * 40 + ["b", "c"])
    right = {"x": np.r_[np.ones(40), 0, 1].astype(bool), "y": np.r_[np.ones(40), 1, 1].astype(bool)}
    samples = D.bootstrap(right, groups, 500, seed=1)
    assert D.grouped_accuracy(right["x"], groups) == pytest.approx(2 / 3)  # a workflow of 40 counts once
    assert samples["x"].shape == (500,) and set(np.round(samples["x"] * 3)) <= {0, 1, 2, 3}
    assert (samples["y"] >= samples["x"]).all()  # the same draws for both
    low, high = D.interval(samples["x"])
    assert low < 2 / 3 < high
