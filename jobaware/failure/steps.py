"""The `failure` pipeline's steps as plain functions over files: what each KFP component calls."""

from __future__ import annotations

import json
import os
from pathlib import Path

import joblib
import pandas as pd

from jobaware import contracts, tracking
from jobaware.failure.model import check_params
from jobaware.failure.train import evaluate, featurize, fit
from jobaware.failure.readers import ingest
from jobaware.failure.synth import truth_path

KEY = "failure"


def use_tracking(uri: str) -> None:
    if uri:
        os.environ["MLFLOW_TRACKING_URI"] = uri


def ingest_step(data: str, out: str) -> dict:
    """Source file -> canonical Parquet; returns the read report and the contract the source is held to."""
    report = ingest(data, out)
    return {**report.as_dict(), "contract": contracts.contract_for(data)}


def validate_step(jobs: str, contract: str, report_out: str) -> dict:
    """Run the contract; write its report; stop (ContractError) when it fails."""
    report = contracts.validate_parquet(jobs, contract)
    Path(report_out).write_text(json.dumps(report, indent=2, default=str))
    print(contracts.format_report(report))
    contracts.require(report)
    return report


def featurize_step(jobs: str, out: str, params: str) -> int:
    table = featurize(pd.read_parquet(jobs), check_params(json.loads(params or "{}"))["test_fraction"])
    table.to_parquet(out)
    return int((table["split"] == "train").sum())


def train_step(features: str, jobs: str, params: str, contract_report: str, data: str, model_out: str) -> str:
    """Fit on the train side, log parameters, contract result and model to MLflow; return the run id."""
    p = check_params(json.loads(params or "{}"))
    table, job_table = pd.read_parquet(features), pd.read_parquet(jobs)
    bundle = fit(table, job_table, p)
    joblib.dump(bundle, model_out)
    contract = json.loads(Path(contract_report).read_text()) if contract_report else {}
    run_id = tracking.start_run(KEY, {**p, "data": data, "rows": len(job_table)}, contract)
    tracking.log_model(run_id, KEY, bundle, job_table.sort_values("submit_time").tail(3))
    return run_id


def evaluate_step(run_id: str, model: str, features: str, params: str, data: str, truth: str, plots: str) -> dict:
    """Score model and baselines on the test side; log metrics and plots into the training run."""
    truth_file = truth or str(truth_path(data))
    truth_table = pd.read_parquet(truth_file) if truth_file and Path(truth_file).is_file() else None
    evaluation = evaluate(joblib.load(model), pd.read_parquet(features), json.loads(params or "{}"), truth_table,
                          Path(plots))
    tracking.log_evaluation(run_id, evaluation)
    return evaluation.metrics


def register_step(run_id: str) -> str:
    return tracking.register(KEY, run_id)


def promote_step(version: str) -> dict:
    return tracking.promote(KEY, version)
