"""What a registered `resource` model carries, and how it classifies scripts (training and serving alike).

The bundle holds the fitted model, the recipe it came from (model kind and parameters, so the promotion gate
can re-fit it on stored folds), the parse limits and `feature_version`. The same `analyse` (parse + features)
serves training, evaluation, the service and the CLI. Per script the answer is the class, the probabilities
of cpu / mem / network / io / other, the features that weighed most, the parse status and the not-a-job
verdict. Class rules: `not_a_job` when the script never ends by design (`jobness`), else `other` when it does
no work or is below `abstain_threshold` (`model`), else the most probable binding class. Probabilities are
the model's for every script (so a server flagged not_a_job still shows what it would bind); `p_other` is 1
for a script classed `other` by rule and 0 otherwise, and the binding probabilities are then 0.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field

import pandas as pd

from jobaware.errors import InputError
from jobaware.model import Bundle
from jobaware.resource.capability import FEATURE_VERSION
from jobaware.resource.features import ScriptFeatures, extract
from jobaware.resource.model import MajorityModel, RichModel, SeedSVM, does_work
from jobaware.resource.parsing import ParseLimits, parse_script
from jobaware.resource.schema import BINDING, CLASSES, NOT_A_JOB

PROBABILITY_COLUMNS = tuple(f"p_{c}" for c in CLASSES)
OUTPUT_COLUMNS = ("file", "class", *PROBABILITY_COLUMNS, "not_a_job", "parse_status", "top_features")


def make_model(kind: str, params: dict):
    """An unfitted model of this kind with these parameters (the recipe)."""
    seed = params.get("seed", 0)
    if kind == "majority":
        return MajorityModel(seed)
    if kind == "seed_svm":
        return SeedSVM(seed, params.get("svm_c", 1.0))
    if kind == "rich":
        return RichModel(seed, params.get("rich_c", 0.1))
    if kind == "sequence":
        from jobaware.resource.sequence import SequenceModel

        return SequenceModel(
            seed, architecture=params.get("sequence_architecture", "cnn"),
            embedding_dim=params.get("embedding_dim", 32), hidden_size=params.get("hidden_size", 64),
            kernel_size=params.get("kernel_size", 5), max_len=params.get("max_len", 1024),
            max_epochs=params.get("max_epochs", 8), batch_size=params.get("batch_size", 16),
            learning_rate=params.get("learning_rate", 3e-3), weight_decay=params.get("weight_decay", 1e-4),
            dropout=params.get("dropout", 0.3), min_token_count=params.get("min_token_count", 2),
            threads=params.get("torch_threads", 1))
    raise InputError(f"unknown model kind {kind!r}; expected majority, seed_svm, rich or sequence")


def limits_from(params: dict) -> ParseLimits:
    return ParseLimits(max_parse_bytes=params.get("max_parse_bytes", ParseLimits().max_parse_bytes),
                       seconds=params.get("parse_seconds", ParseLimits().seconds))


@dataclass
class ResourceBundle(Bundle):
    model: object
    kind: str
    params: dict
    cv_metrics: dict = field(default_factory=dict)
    feature_version: str = FEATURE_VERSION
    classes: tuple = CLASSES

    @property
    def limits(self) -> ParseLimits:
        return limits_from(self.params)

    def recipe(self):
        """A fresh, unfitted model made like this one."""
        return make_model(self.kind, self.params)

    def analyse(self, data: bytes | str, name: str = "", deadline: float | None = None) -> ScriptFeatures:
        """Parse and featurize one script (never executes it); reading stops at `deadline` (time.monotonic())
        if that comes before the script's own time limit, and the result is then marked incomplete."""
        limits = self.limits
        own = time.monotonic() + limits.seconds
        return extract(parse_script(data, name, limits, own if deadline is None else min(own, deadline)))

    def classify_features(self, features: list[ScriptFeatures], top: int = 5) -> list[dict]:
        """Answers for already-analysed scripts."""
        if not features:
            return []
        proba = self.model.predict_proba(features)
        weighed = self.model.top_features(features, top) if top else [[] for _ in features]
        threshold = self.params.get("abstain_threshold", 0.0)
        answers = []
        for i, f in enumerate(features):
            other = not does_work(f) or proba[i].max() < threshold
            probabilities = {c: (0.0 if other else round(float(proba[i, j]), 6)) for j, c in enumerate(BINDING)}
            probabilities["other"] = 1.0 if other else 0.0
            label = NOT_A_JOB if f.not_a_job else "other" if other else BINDING[int(proba[i].argmax())]
            answers.append({
                "class": label, "probabilities": probabilities, "top_features": weighed[i],
                "parse_status": f.status, "parse_detail": f.detail, "kind": f.kind, "complete": f.complete,
                "not_a_job": f.not_a_job, "not_a_job_reason": f.not_a_job_reason or None,
                "decode_errors": bool(f.rich.get("decode_errors")),
            })
        return answers

    def classify(self, scripts: list[bytes | str], names: list[str] | None = None, top: int = 5) -> list[dict]:
        names = names or [""] * len(scripts)
        return self.classify_features([self.analyse(s, n) for s, n in zip(scripts, names, strict=True)], top)

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Per row (`text`, or `base64` for bytes; optional `file`): file, class, p_<class>, not_a_job,
        parse_status, top_features (JSON)."""
        frame = pd.DataFrame(frame)
        if "text" not in frame.columns and "base64" not in frame.columns:
            raise InputError("input needs a 'text' or a 'base64' column")
        names = frame["file"].astype("string").fillna("").tolist() if "file" in frame.columns else [""] * len(frame)
        scripts = [_script(frame, i) for i in range(len(frame))]
        answers = self.classify(scripts, names)
        rows = []
        for name, answer in zip(names, answers, strict=True):
            rows.append({"file": name, "class": answer["class"],
                         **{f"p_{c}": answer["probabilities"][c] for c in CLASSES},
                         "not_a_job": bool(answer["not_a_job"]), "parse_status": answer["parse_status"],
                         "top_features": json.dumps(answer["top_features"])})
        return pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))


def _script(frame: pd.DataFrame, i: int) -> bytes | str:
    if "text" in frame.columns:
        text = frame["text"].iat[i]
        if isinstance(text, str):
            return text
        if isinstance(text, bytes | bytearray):
            return bytes(text)
    if "base64" in frame.columns:
        encoded = frame["base64"].iat[i]
        if isinstance(encoded, str):
            try:
                return base64.b64decode(encoded, validate=True)
            except ValueError:
                raise InputError(f"row {i}: base64: not valid base64") from None
    raise InputError(f"row {i}: expected a string in 'text' or 'base64'")


def input_example(bundle: ResourceBundle | None = None) -> pd.DataFrame:
    """A few rows as the pyfunc takes them (the same for every bundle)."""
    return pd.DataFrame({
        "file": ["solve.py", "fetch.py", "job.sbatch"],
        "text": [
            "import numpy as np\nfor i in range(100):\n    x = np.linalg.solve(np.eye(50), np.ones(50))\n",
            "import requests\nfor url in open('urls.txt'):\n    requests.get(url.strip())\n",
            "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --mem=64G\nsrun python simulate.py\n",
        ],
    })


def signature():
    """The MLflow signature: `text` (required) and `file` in; one row per script out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    inputs = Schema([ColSpec("string", "file", required=False), ColSpec("string", "text")])
    outputs = Schema([ColSpec("string", "file"), ColSpec("string", "class"),
                      *[ColSpec("double", c) for c in PROBABILITY_COLUMNS], ColSpec("boolean", "not_a_job"),
                      ColSpec("string", "parse_status"), ColSpec("string", "top_features")])
    return ModelSignature(inputs=inputs, outputs=outputs)
