"""The trees and the site's rule, measured beside the network (jobaware.hold.deciders).

`gbt`: gradient-boosted trees (scikit-learn) on the static and count features of
jobaware.hold.features (hold code and last event code as categories), with a weight per hold. The other
features enter on a log scale in steps of 1/STEPS (sign(x) log(1 + |x|), rounded): the trees see the same
order, and no feature has more distinct values than the trees have bins, so that binning them needs no
weighted percentiles (which took most of the trees' time).
`site_rule`: the rule a site already has, a typical SYSTEM_PERIODIC_RELEASE: release a hold whose code is a
transfer or policy code (`policy_codes`, default 12, 13, 21, 26, 34) while the job had fewer than
`policy_max_releases` holds before; never a user's own hold (code 1) or any other code. Its P(release) is
1 or 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier

from jobaware.hold.features import COUNT_FEATURES

CATEGORICAL = ("hold_code", "last_code")
STEPS = 8


@dataclass
class PolicyRule:
    codes: tuple[int, ...]
    max_releases: int

    def predict_proba(self, static: pd.DataFrame) -> np.ndarray:
        releases = static["hold_code"].isin(self.codes) & (static["hold_index"] < self.max_releases)
        return releases.to_numpy(dtype=float)


class TreeBaseline:
    """P(release) from boosted trees over the count features."""

    def __init__(self, max_iter: int, learning_rate: float, seed: int):
        self.columns = list(COUNT_FEATURES)
        self.model = HistGradientBoostingClassifier(
            max_iter=max_iter, learning_rate=learning_rate, random_state=seed,
            categorical_features=[self.columns.index(c) for c in CATEGORICAL], early_stopping=False)

    def _matrix(self, features: pd.DataFrame) -> np.ndarray:
        x = features[self.columns].to_numpy(dtype=float).copy()
        scaled = [i for i, c in enumerate(self.columns) if c not in CATEGORICAL]
        x[:, scaled] = np.round(np.sign(x[:, scaled]) * np.log1p(np.abs(x[:, scaled])) * STEPS) / STEPS
        for c in CATEGORICAL:  # categories must be non-negative and below 255 for the trees
            i = self.columns.index(c)
            x[:, i] = np.where((x[:, i] >= 0) & (x[:, i] < 254), x[:, i], 254)
        return x

    def fit(self, features: pd.DataFrame, y_release: np.ndarray, weight: np.ndarray | None = None) -> TreeBaseline:
        self.constant = None if len(np.unique(y_release)) == 2 else float(np.mean(y_release)) if len(y_release) else 0.5
        if self.constant is None:
            self.model.fit(self._matrix(features), y_release, sample_weight=weight)
        return self

    def predict_proba(self, features: pd.DataFrame) -> np.ndarray:
        if self.constant is not None:
            return np.full(len(features), self.constant)
        return self.model.predict_proba(self._matrix(features))[:, list(self.model.classes_).index(1)]
