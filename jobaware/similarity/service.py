"""Request handling for the `similarity` service and the CLI's logic, as plain functions.

`POST /similar` takes {"jobid": J} or an inline reference ({"coding": "0:256:..."} and/or {"levels": {metric:
"0:3:..."}} and/or {"values": {metric: [..]}}), with "algorithm" (default: the bundle's), "top_k" (default:
the bundle's) and optionally "consensus": [algorithms]; it answers the ranked jobs, the histogram, the
counts and the index version. `POST /job` ({"jobid": J}) answers a job's codings and metadata. A bad request
raises `InputError` whose message starts with the JSON path of the bad field; every size is bounded before
anything is built from it.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jobaware import fit
from jobaware.errors import InputError
from jobaware.jsonable import jsonable
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import write_quarantine
from jobaware.similarity.algorithms import ALGORITHMS, KS_MIN_VALUES, NEEDS, check_algorithm
from jobaware.similarity.index import Reference, SimilarityIndex
from jobaware.similarity.schema import (CODINGS, LEVEL_MAX, LEVELS, METRICS, NODE_VALUES, SCORE_MAX,
                                        SYMBOL_MAX)

MAX_TOP_K = 1000
MAX_VALUES = 200_000
# segments of an inline reference (about a week; the pool may hold jobs of up to MAX_SEGMENTS): Q-native and
# Q-phases compare every segment of the reference with every segment of the pool, so this bounds a request's cost
MAX_REFERENCE_SEGMENTS = 1_000
MAX_JOBID = 2**62
FIELDS = ("jobid", "coding", "levels", "values", "algorithm", "top_k", "consensus")
REFERENCE_FIELD = {CODINGS: "coding", LEVELS: "levels", NODE_VALUES: "values"}  # an algorithm's table, inline
INLINE = tuple(REFERENCE_FIELD.values())


@dataclass
class SimilarRequest:
    reference: Reference
    algorithm: str
    top_k: int
    consensus: list[str] | None = None


def _integer(value, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
            value = int(value)
        else:
            raise InputError(f"{where}: expected an integer {low}..{high}, got {_show(value)}")
    if not low <= value <= high:
        raise InputError(f"{where}: expected an integer {low}..{high}, got {value}")
    return value


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _sequence(value, where: str, high: float, *, integer: bool, limit: int, least: int = 1) -> np.ndarray:
    """A ':'-separated string or a list of numbers, bounded in length (least..limit) and range."""
    if isinstance(value, str):
        if len(value) > limit * 8:
            raise InputError(f"{where}: longer than {limit * 8:,} characters")
        items, path = value.split(":"), lambda i: f"{where} (segment {i + 1})"
    elif isinstance(value, list):
        items, path = value, lambda i: f"{where}[{i}]"
    else:
        raise InputError(f"{where}: expected a ':'-separated string or a list of numbers, got {_show(value)}")
    if not items or items == [""]:
        raise InputError(f"{where}: empty")
    if len(items) > limit:
        raise InputError(f"{where}: {len(items):,} values, at most {limit:,}")
    if len(items) < least:
        raise InputError(f"{where}: {len(items)} value(s), at least {least}")
    kind = f"an integer 0..{int(high)}" if integer else f"a number 0..{high:g}"
    if isinstance(value, list) and all(type(item) in (int, float) for item in items):  # plain numbers: at once
        with np.errstate(invalid="ignore"):
            numbers = np.asarray(items, np.float64)
            good = np.isfinite(numbers) & (numbers >= 0) & (numbers <= high)
            if integer:
                good &= numbers == np.floor(numbers)
        if good.all():
            return numbers.astype(np.int64) if integer else numbers
    out = np.empty(len(items), np.int64 if integer else np.float64)
    for i, item in enumerate(items):
        if isinstance(item, bool):
            raise InputError(f"{path(i)}: expected {kind}, got {_show(item)}")
        try:
            number = float(item)
        except (TypeError, ValueError):
            raise InputError(f"{path(i)}: expected {kind}, got {_show(item)}") from None
        if not math.isfinite(number) or not 0 <= number <= high or (integer and not number.is_integer()):
            raise InputError(f"{path(i)}: expected {kind}, got {_show(item)}")
        out[i] = number
    return out


def _per_metric(value, where: str, high: float, *, integer: bool, limit: int, least: int = 1) -> list[np.ndarray]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object with the nine metrics {', '.join(METRICS)}")
    unknown = sorted(set(value) - set(METRICS))
    if unknown:
        raise InputError(f"{where}.{unknown[0]}: unknown metric; expected {', '.join(METRICS)}")
    missing = [m for m in METRICS if m not in value]
    if missing:
        raise InputError(f"{where}.{missing[0]}: missing; all nine metrics are needed")
    out = [_sequence(value[m], f"{where}.{m}", high, integer=integer, limit=limit, least=least) for m in METRICS]
    for m, seq in zip(METRICS, out, strict=True):
        if len(seq) != len(out[0]):
            raise InputError(f"{where}.{m}: {len(seq)} values, {METRICS[0]} has {len(out[0])}")
    return out


def _listed(value_pattern: str) -> str:
    """A ':'-separated string of 1 to MAX_REFERENCE_SEGMENTS values, each matching `value_pattern`."""
    return rf"^(?:{value_pattern})(?::(?:{value_pattern})){{0,{MAX_REFERENCE_SEGMENTS - 1}}}$"


def _sequence_schema(high: int, value_pattern: str, description: str) -> dict:
    return {"oneOf": [{"type": "string", "pattern": _listed(value_pattern)},
                      {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": high},
                       "minItems": 1, "maxItems": MAX_REFERENCE_SEGMENTS}],
            "description": description}


def _per_metric_schema(item: dict, description: str) -> dict:
    return {"type": "object", "properties": {m: item for m in METRICS}, "required": list(METRICS),
            "additionalProperties": False, "description": description}


def _needed_by(field: str, algorithms: list[str]) -> dict:
    """An inline reference holds `field` where the algorithm or one of the consensus needs it."""
    others = [a for a in ALGORITHMS if a not in algorithms]
    return {"anyOf": [{"required": [field]},
                      {"properties": {"algorithm": {"enum": others}, "consensus": {"items": {"enum": others}}}}]}


JOBID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_JOBID, "description": "a job of the pool"}


def request_schema() -> dict:
    """The JSON schema of a `POST /similar` body, from the bounds `parse_request` checks (the service's OpenAPI
    document shows it). Beyond what JSON Schema can say: a jobid must be in the pool, and the nine metrics of an
    inline reference have as many values each (levels: as many as the coding's segments)."""
    symbol = "[0-9]|[1-9][0-9]|[1-4][0-9]{2}|50[0-9]|51[01]"  # 0..SYMBOL_MAX (511)
    level = "[0-9]|1[0-6]"  # 0..LEVEL_MAX
    values = {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": SCORE_MAX},
              "minItems": KS_MIN_VALUES, "maxItems": MAX_VALUES}
    inline = {"anyOf": [{"required": [field]} for field in INLINE]}
    return {
        "type": "object",
        "properties": {
            "jobid": JOBID_SCHEMA,
            "coding": _sequence_schema(SYMBOL_MAX, symbol, "an inline binary coding, one symbol per 10 minutes"),
            "levels": _per_metric_schema(_sequence_schema(LEVEL_MAX, level, "the metric's levels"),
                                         "inline per-metric levels, as many as the coding's segments"),
            "values": _per_metric_schema(values, "inline per-node values of each metric (for ks)"),
            "algorithm": {"type": "string", "enum": list(ALGORITHMS)},
            "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K},
            "consensus": {"type": "array", "items": {"type": "string", "enum": list(ALGORITHMS)},
                          "minItems": 1, "maxItems": len(ALGORITHMS),
                          "description": "several algorithms whose ranks are combined"},
        },
        "oneOf": [{"required": ["jobid"], "not": inline},
                  {"not": {"required": ["jobid"]}, **inline,
                   "allOf": [_needed_by(field, [a for a in ALGORITHMS if REFERENCE_FIELD[NEEDS[a]] == field])
                             for field in INLINE]}],
        "additionalProperties": False,
        "description": "a pool job or an inline reference; without `algorithm`, the model's own decides which "
                       "coding an inline reference needs",
    }


def job_schema() -> dict:
    """The JSON schema of a `POST /job` body."""
    return {"type": "object", "properties": {"jobid": JOBID_SCHEMA}, "required": ["jobid"],
            "additionalProperties": False}


def parse_request(payload, index: SimilarityIndex, algorithm: str, top_k: int) -> SimilarRequest:
    """Validate a `POST /similar` body; `algorithm` and `top_k` are the defaults."""
    if not isinstance(payload, dict):
        raise InputError(f"body: expected a JSON object, got {type(payload).__name__}")
    unknown = sorted(set(payload) - set(FIELDS))
    if unknown:
        raise InputError(f"{unknown[0]}: unknown field; expected some of {', '.join(FIELDS)}")
    inline = [k for k in INLINE if payload.get(k) is not None]
    if payload.get("jobid") is not None and inline:
        raise InputError(f"jobid: give either a jobid or an inline reference ({', '.join(inline)}), not both")
    if payload.get("jobid") is not None:
        ref = index.reference(_integer(payload["jobid"], "jobid", 1, MAX_JOBID))
    elif inline:
        ref = Reference()
        if payload.get("coding") is not None:
            ref.coding = _sequence(payload["coding"], "coding", SYMBOL_MAX, integer=True,
                                   limit=MAX_REFERENCE_SEGMENTS)
        if payload.get("levels") is not None:
            ref.levels = _per_metric(payload["levels"], "levels", LEVEL_MAX, integer=True,
                                     limit=MAX_REFERENCE_SEGMENTS)
            if ref.coding is not None and len(ref.coding) != len(ref.levels[0]):
                raise InputError(f"levels: {len(ref.levels[0])} segments, coding has {len(ref.coding)}")
        if payload.get("values") is not None:
            ref.values = _per_metric(payload["values"], "values", SCORE_MAX, integer=False, limit=MAX_VALUES,
                                     least=KS_MIN_VALUES)  # fewer: not comparable by KS, the only use of values
    else:
        raise InputError("jobid: give a jobid or an inline reference (coding, levels or values)")
    name = payload.get("algorithm", algorithm)
    if not isinstance(name, str):
        raise InputError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {_show(name)}")
    check_algorithm(name)
    k = _integer(payload.get("top_k", top_k), "top_k", 1, MAX_TOP_K)
    consensus = payload.get("consensus")
    if consensus is not None:
        if not isinstance(consensus, list) or not 1 <= len(consensus) <= len(ALGORITHMS):
            raise InputError(f"consensus: expected a list of 1..{len(ALGORITHMS)} algorithms, got {_show(consensus)}")
        for i, item in enumerate(consensus):
            if not isinstance(item, str) or item not in ALGORITHMS:
                raise InputError(f"consensus[{i}]: expected one of {', '.join(ALGORITHMS)}, got {_show(item)}")
    return SimilarRequest(ref, name, k, consensus)


def similar_request(bundle, payload) -> dict:
    """`POST /similar`: ranked jobs with scores, the histogram and the index version (JSON-ready)."""
    request = parse_request(payload, bundle.index, bundle.algorithm, bundle.top_k)
    reference = ({"jobid": request.reference.jobid} if request.reference.jobid is not None
                 else {"inline": [k for k in INLINE if getattr(request.reference, k) is not None]})
    if request.consensus:
        ranking = bundle.index.consensus(request.reference, request.consensus, request.top_k, bundle.workers)
        return jsonable({"consensus": request.consensus, "top_k": request.top_k, "reference": reference,
                         "results": [{"rank": i + 1, **r} for i, r in enumerate(ranking)],
                         "index_version": bundle.index.version, "feature_version": bundle.feature_version})
    answer = bundle.index.query(request.reference, request.algorithm, request.top_k, bundle.workers)
    return jsonable({"algorithm": request.algorithm, "top_k": request.top_k, "reference": reference,
                     "results": [{"rank": i + 1, **r} for i, r in enumerate(answer["ranking"])],
                     "histogram": answer["histogram"], "comparable": answer["comparable"],
                     "not_comparable": answer["not_comparable"], "index_version": answer["index_version"],
                     "feature_version": bundle.feature_version})


def job_request(bundle, jobid) -> dict:
    """`POST /job`: the job's codings and metadata (JSON-ready)."""
    return jsonable(bundle.index.job(_integer(jobid, "jobid", 1, MAX_JOBID)))


def open_index(data: list[str] | str | None = None, index: str | Path | None = None, *, progress=None) -> SimilarityIndex:
    """An index from a saved index folder, or built from source files / a canonical dataset folder."""
    if (data is None) == (index is None):
        raise InputError("data: give either --data (coding files or a dataset folder) or --index (an index folder)")
    if index is not None:
        return SimilarityIndex.load(index)
    sources = [data] if isinstance(data, str | Path) else list(data)
    if len(sources) == 1 and Path(sources[0]).is_dir() and any(Path(sources[0]).glob("*.parquet")):
        return SimilarityIndex.build(sources[0], progress=progress)
    from jobaware.similarity.reader import ingest

    with tempfile.TemporaryDirectory(prefix="jobaware-similar-") as tmp:
        ingest([str(s) for s in sources], Path(tmp), progress=progress)
        return SimilarityIndex.build(tmp, progress=progress)


def similar(jobid: int, *, data=None, index=None, algorithm: str = "b-aggz", top: int = 10,
            consensus: list[str] | None = None, workers: int = 0) -> list[dict]:
    """`jobaware similar JOBID`: `[{"jobid": ..., "similarity": ...}]`, similarity descending, ties by jobid.
    With `consensus`, the jobs every named algorithm ranks in its top `top`, by mean similarity."""
    pool = index if isinstance(index, SimilarityIndex) else open_index(data, index)
    top = _integer(top, "top", 1, MAX_TOP_K)
    ref = pool.reference(_integer(jobid, "jobid", 1, MAX_JOBID))
    if consensus:
        for name in consensus:
            check_algorithm(name)
        return pool.consensus(ref, list(consensus), top, workers)
    check_algorithm(algorithm)
    return pool.query(ref, algorithm, top, workers)["ranking"]


def predict_file(inputs: list[str], output: str | Path, bundle, version: str, progress=None) -> PredictionSummary:
    """Rank the bundle's pool against every job of Mistral coding files (paths, globs, folders; binary or
    quantised), by the bundle's algorithm; one JSON line per query job (`-`: standard output). Bad records are
    counted and written to `<output>.quarantine.jsonl`."""
    from jobaware.similarity.reader import expand, iter_blocks
    algorithm = bundle.algorithm
    predictions, quarantined, problems, tables = 0, [], [], {}
    paths = expand(inputs)
    with atomic_text(output) as handle:
        for path in paths:
            for block in iter_blocks(path, set()):
                quarantined += block.quarantined
                problems += [str(p) for p in block.problems]
                if block.table not in (CODINGS, LEVELS):
                    raise InputError(f"{path}: holds {block.table}; queries come from a coding file")
                if block.table == CODINGS and algorithm not in ("b-all", "b-aggz"):
                    raise InputError(f"{path}: binary codings only; the bundle's algorithm {algorithm} needs the "
                                     f"quantised codings (job_codings.csv) of the queries")
                tables[block.table] = tables.get(block.table, 0) + block.rows.num_rows
                for row in block.rows.to_pylist():
                    coding = row.get("coding") or row["coding_abs"]
                    ref = Reference(jobid=None, coding=np.array(coding.split(":"), np.int64))
                    if block.table == LEVELS:
                        ref.levels = [np.array(row[m].split(":"), np.int64) for m in METRICS]
                    answer = bundle.index.query(ref, algorithm, bundle.top_k, bundle.workers)
                    record = {"query_jobid": row["jobid"], "algorithm": algorithm, "ranking": answer["ranking"],
                              "model_version": version, "index_version": answer["index_version"]}
                    handle.write(json.dumps(jsonable(record), allow_nan=False) + "\n")
                    predictions += 1
                    if progress:
                        progress(1)
    return PredictionSummary(predictions=predictions, model_version=version, output=str(output),
                             bad_records=len(quarantined), quarantine=write_quarantine(output, quarantined),
                             problems=problems[:20], input_profile=fit.describe(tables, [str(p) for p in paths]))
