"""Jobs as plain dicts (see reference.py) and the canonical tables made from them, for building test indexes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from jobaware.similarity.index import SimilarityIndex
from jobaware.similarity.schema import (
    CODINGS,
    FLOATS,
    LEVELS,
    METRICS,
    NODE_VALUES,
    SCHEMAS,
    aggregate_zeros,
    format_sequence,
)

NODE_SCORES = (0.0, 0.5, 1.0, 2.0, 2.5, 4.0)


def random_job(rng: np.random.Generator, max_len: int = 24, nodes: int | None = None, length: int | None = None) -> dict:
    """A job with random codings: a small alphabet and many zeros, so that similar pairs occur."""
    length = length or int(rng.integers(1, max_len + 1))
    coding = rng.choice([0, 0, 0, 1, 128, 272, 256, 511], length)
    levels = rng.choice([0, 0, 0, 1, 2, 5, 16], (9, length))
    levels[:, rng.random(length) < 0.3] = 0
    nodes = nodes or int(rng.integers(1, 4))
    per_node = rng.choice(NODE_SCORES, (nodes, 9, length), p=[0.5, 0.2, 0.1, 0.05, 0.05, 0.1])
    return {"coding": coding.tolist(), "levels": levels.tolist(), "nodes": per_node,
            "values": [per_node[:, m, :].reshape(-1).tolist() for m in range(9)]}


def long_job(rng: np.random.Generator, length: int, phases: int = 3) -> dict:
    """A long job with few, long I/O phases per metric (long enough for the 400-segment paths of the engine,
    few enough phases that the reference's enumeration of attachments stays small)."""
    job = random_job(rng, nodes=2, length=length)
    levels = np.zeros((9, length), int)
    for m in range(9):
        cuts = np.sort(rng.choice(np.arange(1, length), 2 * phases, replace=False))
        for start, stop in cuts.reshape(-1, 2):
            levels[m, start:stop] = rng.choice([1, 2, 5, 16], stop - start)
    job["levels"] = levels.tolist()
    job["coding"] = (((levels > 0) << np.arange(9)[:, None]).sum(axis=0)).tolist()
    return job


def tables_of(jobs: list[dict], jobids=None, levels: bool = True, node_values: bool = True) -> dict[str, pa.Table]:
    """Canonical tables holding `jobs` (jobids 1..n unless given)."""
    jobids = list(jobids) if jobids is not None else list(range(1, len(jobs) + 1))
    tables = {CODINGS: pa.Table.from_pylist(
        [{"jobid": j, "coding": format_sequence(job["coding"])} for j, job in zip(jobids, jobs, strict=True)],
        schema=SCHEMAS[CODINGS])}
    if levels:
        rows = []
        for j, job in zip(jobids, jobs, strict=True):
            row = {"jobid": j, "coding_abs": format_sequence(job["coding"]),
                   "coding_abs_aggzeros": format_sequence(aggregate_zeros(np.array(job["coding"])))}
            row.update({m: format_sequence(job["levels"][i]) for i, m in enumerate(METRICS)})
            row.update({f: format_sequence(np.array(job["levels"][i]) / 4) for i, f in enumerate(FLOATS)})
            rows.append(row)
        tables[LEVELS] = pa.Table.from_pylist(rows, schema=SCHEMAS[LEVELS])
    if node_values:
        rows = [{"jobid": j, "node": f"n{k}", **{m: format_sequence(node[i]) for i, m in enumerate(METRICS)}}
                for j, job in zip(jobids, jobs, strict=True) for k, node in enumerate(job["nodes"])]
        tables[NODE_VALUES] = pa.Table.from_pylist(rows, schema=SCHEMAS[NODE_VALUES])
    return tables


def index_of(jobs: list[dict], **kwargs) -> SimilarityIndex:
    return SimilarityIndex.from_tables(tables_of(jobs, **kwargs))
