"""`failure`'s answers: one row per job of a service request (`answer_rows`), and `predict_file` over job files
(NREL, SWF or squeue --json), whose history features are computed causally from the files themselves."""

from __future__ import annotations

import json
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.failure.reader import iter_batches
from jobaware.failure.reader.common import to_canonical_dtypes
from jobaware.failure.reader.dispatch import contract_for, job_files
from jobaware.failure.reader.slurm import read_squeue_json
from jobaware import fit
from jobaware.errors import InputError
from jobaware.jsonable import jsonable
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
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
    from jobaware.failure.model import PROBABILITIES

    names = ["job_id", *PROBABILITIES, "most_likely_failure", "likely_fail", "threshold", "model_version"]
    columns = [answer["job_id"].astype(np.int64).tolist(), *(answer[name].tolist() for name in names[1:-1])]
    return [dict(zip(names, values)) for values in zip(*columns, repeat(version, len(columns[0])), strict=True)]


def records(predictions: pd.DataFrame, version: str) -> list[dict]:
    """Prediction rows as plain JSON-ready dicts, with the model version."""
    rows = json.loads(predictions.to_json(orient="records"))
    for row in rows:
        row["model_version"] = version
    return rows


def predict_file(inputs: list[str], output: str | Path, model, progress=None) -> PredictionSummary:
    """Predict every readable job of the files (paths, globs, folders), written as JSON Lines (`-`: standard
    output); bad records go to `<output>.quarantine.jsonl`, counted, never dropped silently. The files are read
    before `model()` loads the model; a read with no job in it is an InputError."""
    frames, quarantined, problems = [], [], []
    paths = job_files(inputs)
    for path in paths:
        jobs, bad, found = read_for_prediction(path)
        frames.append(jobs)
        quarantined += bad
        problems += found
    jobs = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if not len(jobs):
        first = f"; first: {problems[0]}" if problems else ""
        raise InputError(f"{', '.join(map(str, paths))}: no job read ({len(quarantined):,} bad record(s)){first}")
    bundle, version = model()
    predictions = bundle.predict(jobs)
    with atomic_text(output) as handle:
        for row in records(predictions, version):
            handle.write(json.dumps(jsonable(row), allow_nan=False) + "\n")
    if progress:
        progress(len(predictions))
    return PredictionSummary(predictions=len(predictions), model_version=version, output=str(output),
                             bad_records=len(quarantined), quarantine=write_quarantine(output, quarantined),
                             problems=problems[:20], input_profile=fit.describe({contract_for(paths[0]): jobs}, paths))
