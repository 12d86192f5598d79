"""The failure model: calibrated gradient-boosted trees over submit-time features, and its baselines."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

from jobaware.errors import JobawareError
from jobaware.failure.features import CATEGORICAL, FEATURES, NUMERIC
from jobaware.failure.params import check_params
from jobaware.failure.schema import OUTCOMES

MIN_CALIBRATION_ROWS = 100


@dataclass
class Split:
    train: np.ndarray
    test: np.ndarray
    cut: pd.Timestamp


def time_split(jobs: pd.DataFrame, test_fraction: float) -> Split:
    """Train on jobs submitted AND ended before the cut (what was known then), test on jobs submitted after."""
    order = jobs["submit_time"].sort_values(kind="stable")
    cut = order.iloc[int(len(order) * (1 - test_fraction))]
    train = (jobs["submit_time"] < cut) & (jobs["end_time"] < cut)
    test = jobs["submit_time"] >= cut
    return Split(np.flatnonzero(train.to_numpy()), np.flatnonzero(test.to_numpy()), cut)


def _tree_preprocessor(numeric: list[str]) -> ColumnTransformer:
    encoder = OrdinalEncoder(
        handle_unknown="use_encoded_value", unknown_value=np.nan, encoded_missing_value=np.nan, max_categories=250
    )
    return ColumnTransformer(
        [("cat", encoder, list(CATEGORICAL)), ("num", "passthrough", numeric)], verbose_feature_names_out=False
    )


def _object_categoricals(features: pd.DataFrame) -> pd.DataFrame:
    return features.assign(**{c: features[c].astype("object").fillna("<none>") for c in CATEGORICAL})


def _proba_table(raw: np.ndarray, classes, index, normalize: bool = False) -> pd.DataFrame:
    """p_fail and one probability column per outcome (0 for classes the estimator never saw)."""
    proba = pd.DataFrame(0.0, index=index, columns=[f"p_{c}" for c in OUTCOMES])
    for i, c in enumerate(classes):
        proba[f"p_{c}"] = raw[:, i]
    if normalize:
        proba = proba.div(proba.sum(axis=1).where(lambda s: s > 0, 1.0), axis=0)
    proba.insert(0, "p_fail", 1.0 - proba["p_COMPLETED"])
    return proba


@dataclass
class FailureModel:
    """Multi-class outcome probabilities, P(fail) = 1 - P(COMPLETED)."""

    params: dict = field(default_factory=lambda: check_params({}))
    classes_: list[str] = field(default_factory=list)
    numeric_: list[str] = field(default_factory=list)
    estimator: object = None
    calibrated: bool = False

    def fit(self, features: pd.DataFrame, y: pd.Series) -> FailureModel:
        p = check_params(self.params)
        y = y.astype(str).to_numpy()
        self.classes_ = [c for c in OUTCOMES if c in set(y)]
        if len(self.classes_) < 2 or "COMPLETED" not in self.classes_:
            raise JobawareError(f"cannot train: training data needs COMPLETED and a failure state, found {self.classes_}")
        X = _object_categoricals(features[list(FEATURES)])
        # a feature the source never fills (no memory requests in a trace, say) carries nothing
        self.numeric_ = [c for c in NUMERIC if X[c].notna().any()]
        n_fit = len(X) if p["calibration"] == "none" else int(len(X) * (1 - p["calibration_fraction"]))
        booster = HistGradientBoostingClassifier(
            learning_rate=p["learning_rate"],
            max_iter=p["max_iter"],
            max_leaf_nodes=p["max_leaf_nodes"],
            min_samples_leaf=p["min_samples_leaf"],
            l2_regularization=p["l2_regularization"],
            categorical_features=list(range(len(CATEGORICAL))),
            early_stopping=n_fit > 10_000,
            random_state=p["seed"],
        )
        model = Pipeline([("prep", _tree_preprocessor(self.numeric_)), ("gbt", booster)]).fit(X.iloc[:n_fit], y[:n_fit])
        held_x, held_y = X.iloc[n_fit:], y[n_fit:]
        self.calibrated = (
            p["calibration"] != "none"
            and len(held_y) >= MIN_CALIBRATION_ROWS
            and set(held_y) >= set(model.classes_)
        )
        if self.calibrated:
            model = CalibratedClassifierCV(FrozenEstimator(model), method=p["calibration"]).fit(held_x, held_y)
        self.estimator = model
        return self

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        raw = self.estimator.predict_proba(_object_categoricals(features[list(FEATURES)]))
        return _proba_table(raw, self.estimator.classes_, features.index, normalize=True)


class SklearnBaseline:
    """A baseline wrapped to give the same probability table as FailureModel."""

    def __init__(self, estimator, columns):
        self.estimator, self.columns = estimator, list(columns)

    def fit(self, features: pd.DataFrame, y: pd.Series):
        self.columns = [c for c in self.columns if c in CATEGORICAL or features[c].notna().any()]
        if isinstance(self.estimator, Pipeline) and "columntransformer" in self.estimator.named_steps:
            prep = self.estimator.named_steps["columntransformer"]
            prep.transformers = [(n, t, [c for c in cols if c in self.columns]) for n, t, cols in prep.transformers]
        self.estimator.fit(_object_categoricals(features)[self.columns], y.astype(str).to_numpy())
        return self

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        raw = self.estimator.predict_proba(_object_categoricals(features)[self.columns])
        return _proba_table(raw, self.estimator.classes_, features.index)


class UserRateBaseline:
    """P(fail) = the user's past failure rate (jobs that ended before submit); classes by training shares."""

    def fit(self, features: pd.DataFrame, y: pd.Series):
        shares = y.astype(str).value_counts(normalize=True)
        self.shares = {c: float(shares.get(c, 0.0)) for c in OUTCOMES}
        self.base_fail = 1.0 - self.shares["COMPLETED"]
        return self

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        p_fail = features["user_fail_rate"].astype(float).fillna(self.base_fail).to_numpy()
        proba = pd.DataFrame(index=features.index)
        proba["p_fail"] = p_fail
        fail_total = max(self.base_fail, 1e-12)
        for c in OUTCOMES:
            proba[f"p_{c}"] = 1 - p_fail if c == "COMPLETED" else p_fail * self.shares[c] / fail_total
        return proba


def baselines(seed: int) -> dict[str, object]:
    numeric = make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), StandardScaler())
    linear_prep = ColumnTransformer(
        [("num", numeric, list(NUMERIC)),
         ("cat", OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=20), list(CATEGORICAL))]
    )
    return {
        "majority": SklearnBaseline(DummyClassifier(strategy="most_frequent"), FEATURES),
        "logistic": SklearnBaseline(
            make_pipeline(linear_prep, LogisticRegression(max_iter=2000, C=0.5, random_state=seed)), FEATURES
        ),
        "user_rate": UserRateBaseline(),
        # the quick reference: boosted trees over the request and the user's past failure rate only
        "gbt_user_rate": SklearnBaseline(
            HistGradientBoostingClassifier(random_state=seed),
            ["log_wallclock_req", "nodes_req", "processors_req", "gpus_req", "mem_req", "user_fail_rate", "user_n"],
        ),
    }
