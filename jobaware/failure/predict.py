"""Predict a job file with a registered model; history is computed causally from the file itself."""

from __future__ import annotations

import json
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.failure.model import PROBABILITIES
from jobaware.failure.readers import iter_batches
from jobaware.failure.readers.common import to_canonical_dtypes
from jobaware.failure.readers.slurm import read_squeue_json
from jobaware.jsonable import jsonable
from jobaware.reading import write_quarantine


def _is_squeue(path: Path) -> bool:
    if path.suffix.lower() != ".json":
        return False
    with open(path, "rb") as handle:
        return handle.read(256).lstrip().startswith(b"{")


def read_for_prediction(path: str | Path) -> tuple[pd.DataFrame, list[dict], list[str]]:
    """Jobs of an NREL (CSV/JSON/Parquet), SWF or squeue --json file; the quarantined records and problems."""
    path = Path(path)
    if path.is_file() and _is_squeue(path):
        return read_squeue_json(path)
    frames, quarantined, problems = [], [], []
    for batch in iter_batches(path):
        frames.append(batch.frame)
        quarantined += batch.quarantined
        problems += [str(p) for p in batch.problems]
    jobs = pd.concat(frames, ignore_index=True) if frames else to_canonical_dtypes(pd.DataFrame())
    return jobs, quarantined, problems


def answer_rows(answer: dict[str, np.ndarray], version: str) -> list[dict]:
    """A bundle's `answer` (arrays per field) as one plain dict per job, with the model version."""
    names = ["job_id", *PROBABILITIES, "most_likely_failure", "likely_fail", "threshold", "model_version"]
    columns = [answer["job_id"].astype(np.int64).tolist(), *(answer[name].tolist() for name in names[1:-1])]
    return [dict(zip(names, values)) for values in zip(*columns, repeat(version, len(columns[0])), strict=True)]


def records(predictions: pd.DataFrame, version: str) -> list[dict]:
    """Prediction rows as plain JSON-ready dicts, with the model version."""
    rows = json.loads(predictions.to_json(orient="records"))
    for row in rows:
        row["model_version"] = version
    return rows


def predict_file(input_path: str, output: Path, bundle, version: str) -> dict:
    """Predict every readable job; bad records go to `<output>.quarantine.jsonl`, counted, never dropped silently."""
    jobs, quarantined, problems = read_for_prediction(input_path)
    predictions = bundle.predict(jobs) if len(jobs) else pd.DataFrame()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w") as handle:
        for row in records(predictions, version):
            handle.write(json.dumps(jsonable(row), allow_nan=False) + "\n")
    summary = {"predictions": len(predictions), "bad_records": len(quarantined), "model_version": version,
               "output": str(output), "problems": problems[:20]}
    if quarantine := write_quarantine(output, quarantined):
        summary["quarantine"] = quarantine
    return summary
