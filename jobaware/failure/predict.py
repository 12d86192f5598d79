"""Predict a job file with a registered model; history is computed causally from the file itself."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from jobaware import tracking
from jobaware.failure.readers import read_jobs
from jobaware.failure.readers.slurm import read_squeue_json

KEY = "failure"


def _is_squeue(path: Path) -> bool:
    if path.suffix.lower() != ".json":
        return False
    with open(path, "rb") as handle:
        return handle.read(256).lstrip().startswith(b"{")


def read_any(path: str | Path) -> pd.DataFrame:
    """NREL (CSV/JSON/Parquet), SWF, or a file of squeue --json output."""
    path = Path(path)
    if path.is_file() and _is_squeue(path):
        return read_squeue_json(path)
    jobs, _ = read_jobs(path)
    return jobs


def records(predictions: pd.DataFrame, version: str) -> list[dict]:
    """Prediction rows as plain JSON-ready dicts, with the model version."""
    rows = json.loads(predictions.to_json(orient="records"))
    for row in rows:
        row["model_version"] = version
    return rows


def predict_file(input_path: str | Path, output: str | Path, version: str | None = None) -> tuple[int, str]:
    jobs = read_any(input_path)
    bundle, used = tracking.load_bundle(KEY, version)
    predictions = bundle.predict(jobs)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w") as handle:
        for row in records(predictions, used):
            handle.write(json.dumps(row) + "\n")
    return len(predictions), used
