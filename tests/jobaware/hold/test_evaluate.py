"""Metrics over a whole set of decisions, and the threshold chosen on validation."""

from __future__ import annotations

import numpy as np
import pytest

from jobaware.hold.baselines import PolicyRule
from jobaware.hold.evaluate import choose_threshold, metrics
from jobaware.hold.features import static_features


def test_metrics_count_remove_as_the_positive_class():
    y_release = np.array([1, 1, 0, 0, 0, 1])
    p_release = np.array([0.9, 0.4, 0.2, 0.3, 0.8, 0.7])
    m = metrics(y_release, p_release, threshold=0.5)  # decided remove: rows 1, 2, 3
    assert (m["precision_remove"], m["recall_remove"]) == pytest.approx((2 / 3, 2 / 3))
    assert m["f1_remove"] == pytest.approx(2 / 3) and m["n"] == 6
    assert m["roc_auc"] == pytest.approx(7 / 9)  # 1 - p as the score of remove


@pytest.mark.parametrize("metric", ["f1_remove", "f1_release", "balanced_accuracy", "roc_auc"])
def test_the_chosen_threshold_is_the_best_one(metric):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 120)
    p = np.round(np.clip(0.35 * y + 0.65 * rng.random(120), 0, 1), 2)
    target = "f1_remove" if metric == "roc_auc" else metric
    chosen = metrics(y, p, choose_threshold(y, p, metric))[target]
    best = max(metrics(y, p, t)[target] for t in np.r_[np.unique(p), 1.01])
    assert chosen == pytest.approx(best)


def test_the_policy_rule_releases_transfer_and_policy_holds_a_few_times_never_a_users_own():
    import pandas as pd

    table = pd.DataFrame({"hold_code": [13, 13, 1, 26, 47, 21], "hold_subcode": [256, 256, 0, 103, 0, 0],
                          "hold_index": [0, 3, 0, 2, 0, 1]})
    p = PolicyRule((12, 13, 21, 26, 34), 3).predict_proba(static_features(table))
    assert p.tolist() == [1, 0, 0, 1, 0, 1]
