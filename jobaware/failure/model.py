"""The failure model: calibrated gradient-boosted trees over submit-time features, and its baselines."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.impute import SimpleImputer
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

from jobaware import progress
from jobaware.errors import JobawareError
from jobaware.failure.features import CATEGORICAL, FEATURES, NUMERIC, PORTABLE
from jobaware.failure.operating import choose_threshold
from jobaware.failure.params import check_params
from jobaware.failure.schema import FAILURES, OUTCOMES
from jobaware.failure.trees import ArrayTrees

MIN_CALIBRATION_ROWS = 100
# a failure kind with fewer training jobs than this is learnt as FAILED: a few examples teach the trees nothing of
# their own, and a kind the validation period lacks would leave the whole model uncalibrated
MIN_KIND_ROWS = 20


def rare_kinds_as_failed(y: np.ndarray) -> np.ndarray:
    """The training labels with every failure kind of fewer than MIN_KIND_ROWS jobs counted as FAILED."""
    kinds, counts = np.unique(y, return_counts=True)
    rare = [k for k, n in zip(kinds, counts, strict=True) if k in FAILURES and k != "FAILED" and n < MIN_KIND_ROWS]
    return np.where(np.isin(y, rare), "FAILED", y) if rare else y


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


def _tree_preprocessor(numeric: list[str], categorical: list[str]) -> ColumnTransformer:
    encoder = OrdinalEncoder(
        handle_unknown="use_encoded_value", unknown_value=np.nan, encoded_missing_value=np.nan, max_categories=250
    )
    return ColumnTransformer(
        [("cat", encoder, categorical), ("num", "passthrough", numeric)], verbose_feature_names_out=False
    )


def _object_categoricals(features: pd.DataFrame) -> pd.DataFrame:
    return features.assign(**{c: features[c].astype("object").fillna("<none>") for c in CATEGORICAL})


def _proba_array(raw: np.ndarray, classes, normalize: bool = False) -> np.ndarray:
    """p_fail and one probability per outcome (0 for classes the estimator never saw), one row per job."""
    proba = np.zeros((len(raw), len(OUTCOMES)))
    for i, c in enumerate(classes):
        proba[:, OUTCOMES.index(c)] = raw[:, i]
    if normalize:
        total = proba.sum(axis=1, keepdims=True)
        proba = proba / np.where(total > 0, total, 1.0)
    return np.column_stack([1.0 - proba[:, OUTCOMES.index("COMPLETED")], proba])


PROBABILITIES = ["p_fail", *(f"p_{c}" for c in OUTCOMES)]


def _proba_table(raw: np.ndarray, classes, index, normalize: bool = False) -> pd.DataFrame:
    return pd.DataFrame(_proba_array(raw, classes, normalize), index=index, columns=PROBABILITIES)


class CalibratedArrays:
    """A fitted CalibratedClassifierCV's own steps (scikit-learn 1.9's `_CalibratedClassifier.predict_proba` for
    sigmoid and isotonic) over the walked trees, without its per-call checks and label encoding; the model
    tests hold it equal to the fitted estimator, bit for bit."""

    def __init__(self, calibrated: CalibratedClassifierCV, trees: ArrayTrees):
        self.parts = [(c.calibrators, np.searchsorted(c.classes, trees.classes_), len(c.classes))
                      for c in calibrated.calibrated_classifiers_]
        self.trees, self.n_classes = trees, len(calibrated.classes_)

    def predict_proba(self, matrix: np.ndarray) -> np.ndarray:
        decision = self.trees.decision_function(matrix).reshape(len(matrix), -1)
        mean = np.zeros((len(matrix), self.n_classes))
        for calibrators, positions, n_classes in self.parts:
            proba = np.zeros((len(matrix), n_classes))
            for position, column, calibrator in zip(positions, decision.T, calibrators, strict=False):
                proba[:, position + 1 if n_classes == 2 else position] = _calibrated(calibrator, column)
            if n_classes == 2:
                proba[:, 0] = 1.0 - proba[:, 1]
            else:
                total = np.sum(proba, axis=1)[:, np.newaxis]
                proba = np.divide(proba, total, out=np.full_like(proba, 1 / n_classes), where=total != 0)
            proba[(1.0 < proba) & (proba <= 1.0 + 1e-5)] = 1.0
            mean += proba
        return mean / len(self.parts)


def _calibrated(calibrator, scores: np.ndarray) -> np.ndarray:
    """`calibrator.predict(scores)` without its input checks: IsotonicRegression's clip and interpolation
    (out_of_bounds="clip", as CalibratedClassifierCV fits it) or _SigmoidCalibration's logistic."""
    if isinstance(calibrator, IsotonicRegression):
        return calibrator.f_(np.clip(scores, calibrator.X_min_, calibrator.X_max_)).astype(scores.dtype)
    return expit(-(calibrator.a_ * scores + calibrator.b_))


@dataclass
class FailureModel:
    """Multi-class outcome probabilities, P(fail) = 1 - P(COMPLETED), and the operating threshold on P(fail)
    chosen on the validation period (`operating`: objective, threshold and the validation figures at it).
    A `portable` model reads only the PORTABLE features (no site's names, no sizes in a site's units)."""

    params: dict = field(default_factory=lambda: check_params({}))
    portable: bool = False
    classes_: list[str] = field(default_factory=list)
    numeric_: list[str] = field(default_factory=list)
    categorical_: list[str] = field(default_factory=list)
    estimator: object = None
    calibrated: bool = False
    operating: dict | None = None

    def fit(self, features: pd.DataFrame, y: pd.Series, validation: np.ndarray | None = None) -> FailureModel:
        """Fit the trees on the training jobs but the validation period (`validation`, a mask; by default the last
        `calibration_fraction` of the rows), then the calibrator and the operating threshold on that period."""
        p = check_params(self.params)
        if validation is None:
            validation = np.arange(len(y)) >= int(len(y) * (1 - p["calibration_fraction"]))
        y = rare_kinds_as_failed(y.astype(str).to_numpy())
        self.classes_ = [c for c in OUTCOMES if c in set(y)]
        if len(self.classes_) < 2 or "COMPLETED" not in self.classes_:
            raise JobawareError(f"cannot train: training data needs COMPLETED and a failure state, found {self.classes_}")
        self.categorical_ = [] if self.portable else list(CATEGORICAL)
        X = features[[*(PORTABLE if self.portable else NUMERIC), *self.categorical_]]  # a copy, whose categorical
        del features  # columns are made plain objects in place (when the caller passed the only reference, the
        for column in self.categorical_:  # sample's memory goes now)
            X[column] = X[column].astype("object").fillna("<none>")
        # a feature the source never fills (no memory requests in a trace, say) carries nothing, nor one filled in
        # fewer of the rows the trees fit on than a leaf holds: a split puts the missing values on one side, so the
        # other would be filled rows alone. Such a column is left out (scikit-learn cannot bin a column whose rows
        # all fall in the early-stopping part or the calibration period).
        fitted_on = X[~validation]
        self.numeric_ = [c for c in (PORTABLE if self.portable else NUMERIC)
                         if fitted_on[c].notna().sum() >= p["min_samples_leaf"]]
        n_fit = int((~validation).sum())
        booster = HistGradientBoostingClassifier(
            learning_rate=p["learning_rate"],
            max_iter=p["max_iter"],
            max_leaf_nodes=p["max_leaf_nodes"],
            min_samples_leaf=p["min_samples_leaf"],
            l2_regularization=p["l2_regularization"],
            categorical_features=list(range(len(self.categorical_))) or None,
            early_stopping=n_fit > 10_000,
            random_state=p["seed"],
            verbose=2 * progress.listening(),  # its rounds become progress lines (jobaware.progress.from_prints)
        )
        model = Pipeline([("prep", _tree_preprocessor(self.numeric_, self.categorical_)), ("gbt", booster)])
        model.fit(X[~validation], y[~validation])
        held_x, held_y = X[validation], y[validation]
        self.calibrated = (
            p["calibration"] != "none"
            and len(held_y) >= MIN_CALIBRATION_ROWS
            and set(held_y) >= set(model.classes_)
        )
        if self.calibrated:
            model = CalibratedClassifierCV(FrozenEstimator(model), method=p["calibration"]).fit(held_x, held_y)
        self.estimator = model
        held_p_fail = self.predict_proba(held_x)["p_fail"].to_numpy() if len(held_y) else np.empty(0)
        self.operating = choose_threshold(held_y != "COMPLETED", held_p_fail, p["threshold_objective"],
                                          p["max_false_alarm_rate"])
        return self

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        """The fitted estimator's probabilities (PROBABILITIES columns), computed on arrays: the column
        transformer's work is done once here and the trees (and calibrators) see the matrix the fitted pipeline
        would give them."""
        return pd.DataFrame(self.probabilities(self.matrix(features)), index=features.index, columns=PROBABILITIES)

    def probabilities(self, matrix: np.ndarray) -> np.ndarray:
        """PROBABILITIES per row of a `matrix` (or `block_matrix`)."""
        return _proba_array(self._on_arrays().predict_proba(matrix), self.estimator.classes_, normalize=True)

    def _pipeline(self) -> Pipeline:
        if isinstance(self.estimator, CalibratedClassifierCV):
            return self.estimator.calibrated_classifiers_[0].estimator.estimator
        return self.estimator

    def matrix(self, features: pd.DataFrame) -> np.ndarray:
        """What the fitted column transformer makes of a feature table: encoded categories, then the numbers."""
        return self._stacked({c: features[c].to_numpy(dtype=object) for c in self.categorical_},
                             features[self.numeric_].to_numpy(dtype=float, na_value=np.nan))

    def block_matrix(self, block: np.ndarray, categories: dict[str, np.ndarray]) -> np.ndarray:
        """The same matrix from a feature block (NUMERIC rows x jobs) and the categorical columns."""
        if getattr(self, "_numeric_rows", None) is None:
            self._numeric_rows = np.array([NUMERIC.index(c) for c in self.numeric_], dtype=np.int64)
        return self._stacked(categories, block[self._numeric_rows].T)

    def _stacked(self, categories: dict[str, np.ndarray], numbers: np.ndarray) -> np.ndarray:
        if not self.categorical_:
            return numbers
        codes = self._category_codes()
        encoded = [[codes[i].get("<none>" if v is None or v is pd.NA or v != v else v, np.nan) for v in categories[c]]
                   for i, c in enumerate(self.categorical_)]  # (v != v: NaN, a missing text read from Parquet)
        return np.hstack([np.array(encoded, dtype=float).T.reshape(len(numbers), len(self.categorical_)), numbers])

    def _category_codes(self) -> list[dict]:
        """Per categorical column, the fitted encoder's own code for every category it knows (others: NaN)."""
        if getattr(self, "_codes", None) is None:
            encoder = self._pipeline().named_steps["prep"].named_transformers_["cat"]
            known = max(len(c) for c in encoder.categories_)
            table = pd.DataFrame({c: [cats[i % len(cats)] for i in range(known)]
                                  for c, cats in zip(self.categorical_, encoder.categories_, strict=True)})
            encoded = encoder.transform(table)
            self._codes = [dict(zip(table[c], encoded[:, i], strict=True)) for i, c in enumerate(self.categorical_)]
        return self._codes

    def _on_arrays(self):
        """The same fitted trees (walked all at once for a few rows) and calibrators, taking the matrix."""
        if getattr(self, "_array_estimator", None) is None:
            trees = ArrayTrees(self._pipeline().named_steps["gbt"])
            calibrated = isinstance(self.estimator, CalibratedClassifierCV)
            self._array_estimator = CalibratedArrays(self.estimator, trees) if calibrated else trees
        return self._array_estimator

    def __getstate__(self) -> dict:
        """What is saved: the fitted model, never the array view built from it."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_array_estimator", "_codes", "_numeric_rows")}


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
