"""MLflow conventions: experiment and registered model `jobaware-<key>`, aliases challenger and champion.

Promotion re-scores champion and challenger on the challenger's evaluation data and moves `champion` only
when the challenger is at least as good on the primary metric. Every promotion and rollback is logged as
an MLflow run of its own, and the registered model keeps the list of earlier champions for rollback.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import joblib
import mlflow.pyfunc
from mlflow.types.type_hints import TypeFromExample
import pandas as pd

from jobaware import config
from jobaware.errors import JobawareError

PRIMARY = {"failure": "roc_auc"}
HISTORY_TAG = "jobaware.champion_history"
MODEL_URI_TAG = "jobaware.model_uri"
EVAL_FEATURES = "eval/features.parquet"
EVAL_LABELS = "eval/labels.parquet"

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
logging.getLogger("mlflow").setLevel(logging.ERROR)


def mlflow_client():
    import mlflow

    uri = config.tracking_uri()
    saved = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    # MLflow exports the URI into the environment; keep ours as it was, so JOBAWARE_HOME stays in charge
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    return mlflow, mlflow.MlflowClient(uri, uri)


def experiment_id(key: str) -> str:
    mlflow, client = mlflow_client()
    name = config.experiment_name(key)
    found = client.get_experiment_by_name(name)
    if found:
        return found.experiment_id
    local = config.tracking_uri().startswith("sqlite:")
    return client.create_experiment(name, artifact_location=f"{config.artifact_root()}/{name}" if local else None)


def input_schema():
    """The pyfunc input: submit-time fields; only job_id and submit_time are required."""
    from mlflow.types import ColSpec, Schema

    from jobaware.failure.schema import INTEGER, NUMERIC, SUBMIT_FIELDS, TIME_COLUMNS

    def kind(field: str) -> str:
        if field == "job_id":
            return "long"
        if field in TIME_COLUMNS:
            return "datetime"
        return "double" if field in NUMERIC or field in INTEGER else "string"

    return Schema([ColSpec(kind(f), f, required=f in ("job_id", "submit_time")) for f in SUBMIT_FIELDS])


def output_schema():
    """The pyfunc output: per job its id, P(fail), the outcome probabilities and the most likely failure."""
    from mlflow.types import ColSpec, Schema

    from jobaware.failure.schema import OUTCOMES

    probabilities = [ColSpec("double", f"p_{c}") for c in ("fail", *OUTCOMES)]
    return Schema([ColSpec("long", "job_id"), *probabilities, ColSpec("string", "most_likely_failure")])


def signature_frame(jobs: pd.DataFrame) -> pd.DataFrame:
    """Canonical jobs as the plain NumPy types of the pyfunc signature."""
    from jobaware.failure.schema import INTEGER, NUMERIC, SUBMIT_FIELDS

    frame = jobs[list(SUBMIT_FIELDS)].copy()
    for column in frame.columns:
        if column == "job_id":
            frame[column] = frame[column].astype("int64")
        elif column in NUMERIC or column in INTEGER:
            frame[column] = frame[column].astype("float64")
        elif pd.api.types.is_string_dtype(frame[column]):
            frame[column] = frame[column].astype(object)
    return frame.reset_index(drop=True)


class BundleModel(mlflow.pyfunc.PythonModel):
    """MLflow pyfunc over a bundle stored with joblib (the explicit serialization format)."""

    def load_context(self, context):
        self.bundle = joblib.load(context.artifacts["bundle"])

    def predict(self, context, model_input: TypeFromExample, params=None):
        return self.bundle.predict(pd.DataFrame(model_input))


def start_run(key: str, params: dict, contract: dict) -> str:
    """Open the training run: parameters and the data contract's result."""
    mlflow, _ = mlflow_client()
    with mlflow.start_run(experiment_id=experiment_id(key)) as run:
        mlflow.log_params(params)
        mlflow.log_dict(contract, "contract/result.json")
        mlflow.log_metric("contract_success", float(contract.get("success", False)))
        return run.info.run_id


def log_model(run_id: str, key: str, bundle, example_jobs: pd.DataFrame) -> str:
    """Log the bundle as a pyfunc model with signature and input example; return its model URI."""
    mlflow, _ = mlflow_client()
    from mlflow.models import ModelSignature

    example = signature_frame(example_jobs.head(3))
    with mlflow.start_run(run_id=run_id), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bundle.joblib"
        joblib.dump(bundle, path)
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=BundleModel(),
            artifacts={"bundle": str(path)},
            signature=ModelSignature(inputs=input_schema(), outputs=output_schema()),
            input_example=example,
            metadata={"serialization_format": "joblib", "capability": key},
            pip_requirements=[f"jobaware=={__import__('jobaware').__version__}"],
        )
        mlflow.set_tag(MODEL_URI_TAG, info.model_uri)
    return info.model_uri


def log_evaluation(run_id: str, evaluation) -> None:
    """Metrics of the model and its baselines, plots, importance, and the evaluation data for the gate."""
    mlflow, _ = mlflow_client()
    with mlflow.start_run(run_id=run_id), tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, values in evaluation.metrics.items():
            prefix = "" if name == "model" else f"baseline_{name}_"
            mlflow.log_metrics({f"{prefix}{k}": float(v) for k, v in values.items() if isinstance(v, int | float)})
        mlflow.log_dict(evaluation.metrics, "metrics/all.json")
        for path in evaluation.plots:
            mlflow.log_artifact(str(path), "plots")
        if evaluation.importance is not None and len(evaluation.importance):
            mlflow.log_dict(evaluation.importance.sort_values(ascending=False).to_dict(), "metrics/feature_importance.json")
        evaluation.test_features.to_parquet(tmp / "features.parquet")
        evaluation.test_labels.to_frame("label").to_parquet(tmp / "labels.parquet")
        mlflow.log_artifact(str(tmp / "features.parquet"), "eval")
        mlflow.log_artifact(str(tmp / "labels.parquet"), "eval")


def model_uri(run_id: str) -> str:
    """The URI of the model logged in a run."""
    _, client = mlflow_client()
    uri = client.get_run(run_id).data.tags.get(MODEL_URI_TAG)
    if not uri:
        raise JobawareError(f"run {run_id} logged no model")
    return uri


def register(key: str, run_id: str) -> str:
    """Register the run's model as a new version of `jobaware-<key>` and point `challenger` at it."""
    mlflow, client = mlflow_client()
    name = config.model_name(key)
    version = mlflow.register_model(model_uri(run_id), name)
    primary = client.get_run(run_id).data.metrics.get(PRIMARY[key], float("nan"))
    client.set_model_version_tag(name, version.version, PRIMARY[key], f"{primary:.6f}")
    client.set_registered_model_alias(name, "challenger", version.version)
    return str(version.version)


def _alias(client, name: str, alias: str) -> str | None:
    try:
        return str(client.get_model_version_by_alias(name, alias).version)
    except Exception:  # noqa: BLE001
        return None


def load_bundle(key: str, version: str | None = None, alias: str = "champion"):
    """The bundle of a registered version (or of the version an alias points to) and that version."""
    mlflow, client = mlflow_client()
    name = config.model_name(key)
    version = version or _alias(client, name, alias)
    if version is None:
        raise JobawareError(f"no model version of {name} has alias '{alias}'; run the pipeline first")
    model = mlflow.pyfunc.load_model(f"models:/{name}/{version}")
    return model.unwrap_python_model().bundle, str(version)


def _eval_data(key: str, version: str) -> tuple[pd.DataFrame, pd.Series]:
    mlflow, client = mlflow_client()
    run_id = client.get_model_version(config.model_name(key), version).run_id
    with tempfile.TemporaryDirectory() as tmp:
        features = pd.read_parquet(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=EVAL_FEATURES, dst_path=tmp))
        y = pd.read_parquet(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=EVAL_LABELS, dst_path=tmp))["label"]
    keep = y.notna().to_numpy()
    return features.loc[keep].reset_index(drop=True), y.loc[keep].reset_index(drop=True)


def _score(key: str, bundle, features: pd.DataFrame, y: pd.Series) -> float:
    from jobaware.failure.evaluate import metrics

    return metrics(y, bundle.model.predict_proba(features))[PRIMARY[key]]


def _history(client, name: str) -> list[str]:
    tags = client.get_registered_model(name).tags
    return json.loads(tags.get(HISTORY_TAG, "[]"))


def _log_action(key: str, action: str, params: dict, metrics: dict) -> None:
    mlflow, _ = mlflow_client()
    with mlflow.start_run(experiment_id=experiment_id(key), run_name=action, tags={"jobaware.action": action}):
        mlflow.log_params(params)
        mlflow.log_metrics({k: v for k, v in metrics.items() if v == v})


def promote(key: str, version: str | None = None, force: bool = False) -> dict:
    """Gate: re-score champion and candidate on the candidate's evaluation data; move champion if not worse."""
    _, client = mlflow_client()
    name = config.model_name(key)
    candidate = str(version) if version else _alias(client, name, "challenger")
    if candidate is None:
        raise JobawareError(f"{name} has no challenger to promote")
    try:
        client.get_model_version(name, candidate)
    except Exception:  # noqa: BLE001
        raise JobawareError(f"{name} has no version {candidate}") from None
    champion = _alias(client, name, "champion")
    features, y = _eval_data(key, candidate)
    metric = PRIMARY[key]
    candidate_score = _score(key, load_bundle(key, candidate)[0], features, y)
    champion_score = float("nan")
    if champion is not None and champion != candidate:
        champion_score = _score(key, load_bundle(key, champion)[0], features, y)
    better = champion is None or champion == candidate or not champion_score > candidate_score
    if candidate_score != candidate_score and champion is not None:
        better = False  # an undefined score (one class in the evaluation data) never replaces a champion
    promoted = better or force
    if promoted and champion != candidate:
        history = _history(client, name) + ([champion] if champion else [])
        client.set_registered_model_tag(name, HISTORY_TAG, json.dumps(history))
        client.set_registered_model_alias(name, "champion", candidate)
    decision = {
        "model": name, "candidate": candidate, "champion_before": champion, "metric": metric,
        "candidate_score": candidate_score, "champion_score": champion_score, "promoted": promoted,
        "forced": bool(force and not better), "champion": candidate if promoted else champion,
    }
    _log_action(key, "promote", {"candidate": candidate, "champion_before": champion or "none", "forced": force},
                {"candidate_score": candidate_score, "champion_score": champion_score, "promoted": float(promoted)})
    return decision


def rollback(key: str) -> dict:
    """Point champion back at the previous champion; logged like a promotion."""
    _, client = mlflow_client()
    name = config.model_name(key)
    history = _history(client, name)
    if not history:
        raise JobawareError(f"{name} has no earlier champion to roll back to")
    current = _alias(client, name, "champion")
    previous = history.pop()
    client.set_registered_model_alias(name, "champion", previous)
    client.set_registered_model_tag(name, HISTORY_TAG, json.dumps(history))
    _log_action(key, "rollback", {"from_version": current or "none", "to_version": previous}, {})
    return {"model": name, "from": current, "champion": previous}


def list_models() -> list[dict]:
    _, client = mlflow_client()
    rows = []
    for key in config.CAPABILITIES:
        name = config.model_name(key)
        try:
            aliases = client.get_registered_model(name).aliases
        except Exception:  # noqa: BLE001 - not registered yet
            continue
        for version in client.search_model_versions(f"name='{name}'"):
            rows.append(
                {
                    "model": name,
                    "version": str(version.version),
                    "aliases": ",".join(sorted(a for a, v in aliases.items() if str(v) == str(version.version))),
                    PRIMARY[key]: version.tags.get(PRIMARY[key], ""),
                    "run_id": version.run_id,
                    "created": pd.Timestamp(version.creation_timestamp, unit="ms").strftime("%Y-%m-%d %H:%M:%S"),
                }
            )
    return sorted(rows, key=lambda r: (r["model"], int(r["version"])))


def champion_version(key: str) -> str | None:
    _, client = mlflow_client()
    return _alias(client, config.model_name(key), "champion")
