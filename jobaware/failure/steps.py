"""The `failure` pipeline's own steps and registry functions, as plain functions over files."""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import pandas as pd
import pyarrow.parquet as pq

from jobaware import tracking
from jobaware.errors import JobawareError
from jobaware.failure import synth
from jobaware.failure.params import check_params
from jobaware.failure.bundle import FailureBundle
from jobaware.failure.train import FeatureTable, evaluate, featurize_file, fit
from jobaware.reading import QUARANTINE

KEY = "failure"
DEFAULT_SYNTH_JOBS = 150_000


def jobs_table(dataset: str | Path) -> Path:
    """The one canonical job table of a dataset folder (NREL- or SWF-sourced)."""
    tables = sorted(Path(dataset).glob("*_jobs.parquet"))
    if len(tables) != 1:
        raise JobawareError(f"{dataset}: expected one canonical job table, found {len(tables)}")
    return tables[0]


def featurize_step(dataset: str, out: str, params: str) -> int:
    """Features, labels and the time split of every job; returns the number of training rows."""
    p = check_params(json.loads(params or "{}"))
    return featurize_file(jobs_table(dataset), Path(out), p["test_fraction"])


def train_step(features: str, dataset: str, params: str, validation: str, data: str, model_out: str) -> str:
    """Fit on the training sample; log parameters, validation result, quarantine, model and its operating
    threshold; return the run id.
    Reads the feature table part by part and of the job table only the history the bundle keeps."""
    p = check_params(json.loads(params or "{}"))
    table = jobs_table(dataset)
    bundle = fit(FeatureTable(features), FailureBundle.history_tail_file(table), p)
    joblib.dump(bundle, model_out)
    report = json.loads(Path(validation).read_text()) if validation else {}
    run_id = tracking.start_run(KEY, {**p, "data": data, "rows": pq.ParquetFile(table).metadata.num_rows}, report,
                                Path(dataset) / QUARANTINE, dataset=dataset)
    tracking.log_model(run_id, KEY, bundle)
    tracking.log_operating(run_id, bundle.model.operating)
    return run_id


def evaluate_step(run_id: str, model: str, features: str, params: str, data: str, truth: str, workdir: str) -> dict:
    """Score model and baselines on the test side; log metrics, plots and the gate's evaluation data."""
    truth_file = truth or (str(synth.truth_path(data)) if not data.startswith("[") else "")
    truth_table = (pd.read_parquet(truth_file, columns=synth.TRUTH_FOR_SCORES)
                   if truth_file and Path(truth_file).is_file() else None)
    evaluation = evaluate(joblib.load(model), FeatureTable(features), json.loads(params or "{}"), truth_table,
                          Path(workdir) / "plots")
    log_evaluation(run_id, evaluation, Path(workdir))
    return evaluation.metrics


def log_evaluation(run_id: str, evaluation, workdir: Path) -> None:
    """Metrics, plots, feature importance and the test side's features and labels (the gate's data)."""
    eval_dir = workdir / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True)
    evaluation.test_features.to_parquet(eval_dir / "features.parquet")
    evaluation.test_labels.to_frame("label").to_parquet(eval_dir / "labels.parquet")
    importance = evaluation.importance
    documents = {"feature_importance": importance.sort_values(ascending=False).to_dict()} if importance is not None else {}
    tracking.log_evaluation(run_id, evaluation.metrics, evaluation.plots, eval_dir, documents)


def log_trained(bundle, evaluation, params: dict, workdir: Path) -> str:
    """Log an in-memory training result as the pipeline would (run, model, evaluation); the run id."""
    run_id = tracking.start_run(KEY, params, {"success": True})
    tracking.log_model(run_id, KEY, bundle)
    tracking.log_operating(run_id, bundle.model.operating)
    log_evaluation(run_id, evaluation, Path(workdir))
    return run_id


def score(bundle, eval_dir: Path) -> tuple[float, int]:
    """ROC-AUC of P(fail) of a bundle on a stored evaluation folder, and the number of labelled jobs in it."""
    from jobaware.failure.evaluate import metrics

    features = pd.read_parquet(Path(eval_dir) / "features.parquet")
    labels = pd.read_parquet(Path(eval_dir) / "labels.parquet")["label"]
    keep = labels.notna().to_numpy()
    features, labels = features.loc[keep].reset_index(drop=True), labels.loc[keep].reset_index(drop=True)
    if len(labels) == 0:
        return float("nan"), 0
    return metrics(labels, bundle.model.predict_proba(features))["roc_auc"], len(labels)


def default_data(data_dir: Path, progress=None) -> str:
    """Synthetic NREL-format jobs, generated once under `data_dir` (the embedded default of `make run`)."""
    path = data_dir / f"synthetic_failure_{DEFAULT_SYNTH_JOBS}.parquet"
    if not path.exists():
        synth.write(path, DEFAULT_SYNTH_JOBS, "parquet", 0, progress=progress)
    return str(path)


def signature():
    """The pyfunc signature: submit-time fields in (only job_id and submit_time required); probabilities, the
    operating threshold and the flag at it out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    from jobaware.failure.schema import INTEGER, NUMERIC, OUTCOMES, SUBMIT_FIELDS, TIME_COLUMNS

    def kind(field: str) -> str:
        if field == "job_id":
            return "long"
        if field in TIME_COLUMNS:
            return "datetime"
        return "double" if field in NUMERIC or field in INTEGER else "string"

    inputs = Schema([ColSpec(kind(f), f, required=f in ("job_id", "submit_time")) for f in SUBMIT_FIELDS])
    probabilities = [ColSpec("double", f"p_{c}") for c in ("fail", *OUTCOMES)]
    outputs = Schema([ColSpec("long", "job_id"), *probabilities, ColSpec("string", "most_likely_failure"),
                      ColSpec("boolean", "likely_fail", required=False), ColSpec("double", "threshold", required=False)])
    return ModelSignature(inputs=inputs, outputs=outputs)


def input_example(bundle) -> pd.DataFrame:
    """The three most recent jobs of the bundled history, as submit-time records of the signature's types."""
    from jobaware.failure.schema import INTEGER, NUMERIC, SUBMIT_FIELDS

    frame = bundle.history.sort_values("submit_time").tail(3)[list(SUBMIT_FIELDS)].copy()
    for column in frame.columns:
        if column == "job_id":
            frame[column] = frame[column].astype("int64")
        elif column in NUMERIC or column in INTEGER:
            frame[column] = frame[column].astype("float64")
        elif pd.api.types.is_string_dtype(frame[column]):
            frame[column] = frame[column].astype(object)
    return frame.reset_index(drop=True)


def write_synthetic(out: Path, n: int, seed: int = 0, fmt: str | None = None, progress=None) -> Path:
    """`jobaware data synth failure`: jobs in the NREL format; returns the truth file beside them."""
    return synth.write(out, n, fmt, seed, progress=progress)
