"""What a registered `similarity` model carries: the index (the pool, as arrays) and how to query it.

Pickled with joblib, the bundle holds the index's arrays in the same file; `joblib.load(path,
mmap_mode="r")` memory-maps them instead of reading them into memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.model import Bundle
from jobaware.similarity.index import FEATURE_VERSION, SimilarityIndex

INPUT_COLUMNS = ("jobid", "coding", "levels", "algorithm", "top_k")
OUTPUT_COLUMNS = ("query", "algorithm", "rank", "jobid", "similarity")


@dataclass
class SimilarityBundle(Bundle):
    index: SimilarityIndex
    algorithm: str
    top_k: int = 10
    workers: int = 0
    feature_version: str = FEATURE_VERSION

    def warm(self) -> None:
        """Compile the Q-phases kernel before the first request (the service calls this once per model)."""
        from jobaware.similarity.algorithms import compile_kernels

        compile_kernels()

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """One query per row -> ranked rows (query = the row's position, rank 1 = most similar).

        Columns in: `jobid` (a pool job) or an inline reference: `coding` (binary, ':'-separated) and/or
        `levels` (JSON object of the nine metrics' ':'-separated levels); optional `algorithm` and `top_k`
        (else the bundle's)."""
        from jobaware.bodies import parse_body
        from jobaware.similarity.service import SimilarBody, request_of

        unknown = sorted(set(frame.columns) - set(INPUT_COLUMNS))
        if unknown:
            raise InputError(f"{unknown[0]}: unknown column; expected some of {', '.join(INPUT_COLUMNS)}")
        rows = []
        for position, record in enumerate(frame.to_dict(orient="records")):
            payload = {k: _plain(v) for k, v in record.items() if _plain(v) is not None}
            if isinstance(payload.get("levels"), str):
                try:
                    payload["levels"] = json.loads(payload["levels"])
                except json.JSONDecodeError as exc:
                    raise InputError(f"levels: not a JSON object ({exc.msg})") from None
            try:
                request = request_of(parse_body(SimilarBody, payload), self.index, self.algorithm, self.top_k)
            except InputError as exc:
                raise InputError(f"row {position}: {exc}") from None
            answer = self.index.query(request.reference, request.algorithm, request.top_k, self.workers)
            for rank, item in enumerate(answer["ranking"], 1):
                rows.append((position, request.algorithm, rank, item["jobid"], item["similarity"]))
        out = pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))
        return out.astype({"query": "int64", "rank": "int64", "jobid": "int64", "similarity": "float64",
                           "algorithm": object})


def _plain(value):
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    return value.item() if hasattr(value, "item") else value


def signature():
    """The pyfunc signature: queries in (every column optional), ranked rows out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    inputs = Schema([ColSpec("long", "jobid", required=False), ColSpec("string", "coding", required=False),
                     ColSpec("string", "levels", required=False), ColSpec("string", "algorithm", required=False),
                     ColSpec("long", "top_k", required=False)])
    outputs = Schema([ColSpec("long", "query"), ColSpec("string", "algorithm"), ColSpec("long", "rank"),
                      ColSpec("long", "jobid"), ColSpec("double", "similarity")])
    return ModelSignature(inputs=inputs, outputs=outputs)


def input_example(bundle: SimilarityBundle) -> pd.DataFrame:
    """Three queries by jobid (pool jobs with I/O), as the signature's types. (A frame's rows are all by
    jobid or all inline: MLflow's schema does not let a `long` column hold missing values.)"""
    index = bundle.index
    busy = [j for j in index.jobids[:10_000].tolist() if np.any(index.reference(j).coding)][:3]
    busy = busy or index.jobids[:3].tolist()
    return pd.DataFrame({"jobid": np.array(busy, np.int64), "algorithm": [bundle.algorithm] * len(busy),
                         "top_k": np.full(len(busy), 5, np.int64)})
