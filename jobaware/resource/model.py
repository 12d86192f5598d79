"""The models compared for `resource`, with one surface: fit on script features, give class probabilities.

- `majority`: the class shares of the training data (always predicts the largest class).
- `seed_svm`: the seed project's model: an RBF SVM (C=1, gamma='scale') on its five counts, standardised.
- `rich`: logistic regression (multinomial, balanced class weights, L2 with `rich_c`) on every rich feature,
  each value v taken as sign(v)·log(1+|v|) and scaled by its largest absolute training value.
- `sequence`: the torch model over normalized AST tokens (`sequence.py`).

How `other` is handled (stated rule): the models learn the four binding classes cpu, mem, network, io only;
upstream's `other` ("unclassifiable") has one usable real example. A script is classed `other` by rule when
it does no work: no code (status empty or binary) or, for Python, no call, loop or comprehension, and for a
batch script no command beyond environment setup and no such Python. With `abstain_threshold` > 0 a script
whose top probability is below it is `other` as well (default 0: off). Scores are macro-F1 over the four
binding classes, so every script wrongly put in or out of `other` costs.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.dummy import DummyClassifier
from sklearn.feature_extraction import DictVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MaxAbsScaler, StandardScaler
from sklearn.svm import SVC

from jobaware.resource.features import SEED_FEATURES, ScriptFeatures
from jobaware.resource.schema import BINDING

SETUP_CATEGORIES = ("setup", "module")


def does_work(features: ScriptFeatures) -> bool:
    """False for scripts that do nothing that could bind a resource (the `other` rule)."""
    if features.status in ("empty", "binary"):
        return False
    rich = features.rich
    if rich.get("count:fcalls", 0) + rich.get("count:loops", 0) + rich.get("comprehensions", 0) > 0:
        return True
    return any(key.startswith("sh:cmd:") and key[7:] not in SETUP_CATEGORIES for key in rich)


def _signed_log(x):
    if sp.issparse(x):
        x = x.tocsr(copy=True)
        x.data = np.sign(x.data) * np.log1p(np.abs(x.data))
        return x
    return np.sign(x) * np.log1p(np.abs(x))


def _align(proba: np.ndarray, classes) -> np.ndarray:
    """Columns in BINDING order (0 for a class the estimator never saw)."""
    out = np.zeros((proba.shape[0], len(BINDING)))
    for i, c in enumerate(classes):
        if c in BINDING:
            out[:, BINDING.index(c)] = proba[:, i]
    total = out.sum(axis=1, keepdims=True)
    return np.divide(out, total, out=np.full_like(out, 1 / len(BINDING)), where=total > 0)


class MajorityModel:
    name = "majority"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, features: list[ScriptFeatures], y: np.ndarray, weights: np.ndarray | None = None):
        self.estimator = DummyClassifier(strategy="prior").fit(np.zeros((len(y), 1)), y, sample_weight=weights)
        return self

    def predict_proba(self, features: list[ScriptFeatures]) -> np.ndarray:
        return _align(self.estimator.predict_proba(np.zeros((len(features), 1))), self.estimator.classes_)

    def top_features(self, features: list[ScriptFeatures], k: int = 5) -> list[list[dict]]:
        return [[] for _ in features]


class SeedSVM:
    """The seed's SVM over loops, fdefs, fcalls, loads, asmts. An SVM gives a decision, not probabilities:
    its probability is 1 for the class it decides."""

    name = "seed_svm"

    def __init__(self, seed: int = 0, c: float = 1.0):
        self.seed, self.c = seed, c

    @staticmethod
    def matrix(features: list[ScriptFeatures]) -> np.ndarray:
        return np.array([[f.seed[k] for k in SEED_FEATURES] for f in features], dtype=float).reshape(-1, 5)

    def fit(self, features: list[ScriptFeatures], y: np.ndarray, weights: np.ndarray | None = None):
        svm = SVC(C=self.c, kernel="rbf", gamma="scale", random_state=self.seed)
        self.estimator = make_pipeline(StandardScaler(), svm)
        self.estimator.fit(self.matrix(features), y, svc__sample_weight=weights)
        return self

    def predict_proba(self, features: list[ScriptFeatures]) -> np.ndarray:
        decided = self.estimator.predict(self.matrix(features))
        return np.array([[float(d == c) for c in BINDING] for d in decided]).reshape(-1, len(BINDING))

    def top_features(self, features: list[ScriptFeatures], k: int = 5) -> list[list[dict]]:
        return [[{"feature": f"count:{name}", "value": float(f.seed[name]), "weight": None}
                 for name in SEED_FEATURES] for f in features]


class RichModel:
    """Logistic regression over the rich features."""

    name = "rich"

    def __init__(self, seed: int = 0, c: float = 0.1):
        self.seed, self.c = seed, c

    def fit(self, features: list[ScriptFeatures], y: np.ndarray, weights: np.ndarray | None = None):
        self.vectorizer = DictVectorizer(sparse=True)
        self.scale = make_pipeline(FunctionTransformer(_signed_log, accept_sparse=True), MaxAbsScaler())
        x = self.scale.fit_transform(self.vectorizer.fit_transform([f.rich for f in features]))
        self.mean_ = np.asarray(x.mean(axis=0)).ravel()
        self.estimator = LogisticRegression(C=self.c, class_weight="balanced", max_iter=5000,
                                            random_state=self.seed).fit(x, y, sample_weight=weights)
        return self

    def _x(self, features: list[ScriptFeatures]):
        return self.scale.transform(self.vectorizer.transform([f.rich for f in features]))

    def predict_proba(self, features: list[ScriptFeatures]) -> np.ndarray:
        return _align(self.estimator.predict_proba(self._x(features)), self.estimator.classes_)

    def top_features(self, features: list[ScriptFeatures], k: int = 5) -> list[list[dict]]:
        """Per script, its features pushing hardest toward its predicted class: the class's coefficient
        (relative to the mean over classes) times the scaled value's distance from the training mean."""
        x = self._x(features).tocsr()
        coef = self.estimator.coef_
        relative = coef - coef.mean(axis=0, keepdims=True) if coef.shape[0] > 1 else np.vstack([-coef, coef])
        classes = list(self.estimator.classes_)
        names = self.vectorizer.get_feature_names_out()
        predicted = self.estimator.predict(x)
        out = []
        for row, label in enumerate(predicted):
            start, end = x.indptr[row], x.indptr[row + 1]
            columns, values = x.indices[start:end], x.data[start:end]
            weights = relative[classes.index(label), columns] * (values - self.mean_[columns])
            order = np.argsort(-weights)[:k]
            rich = features[row].rich
            out.append([{"feature": str(names[columns[i]]), "value": float(rich.get(names[columns[i]], 0)),
                         "weight": round(float(weights[i]), 4)} for i in order if weights[i] > 0])
        return out
