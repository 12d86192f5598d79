"""The `failure` pipeline's own steps (featurize, train, evaluate), as plain functions over files."""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import pandas as pd
import pyarrow.parquet as pq

from jobaware import tracking
from jobaware.failure import synth
from jobaware.failure.params import check_params
from jobaware.failure.bundle import FailureBundle
from jobaware.failure.schema import jobs_table
from jobaware.failure.train import FeatureTable, evaluate, featurize_file, fit, log_evaluation
from jobaware.reading import QUARANTINE

KEY = "failure"


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
