"""Request handling for the `similarity` service and the CLI's logic, as plain functions.

`POST /similar` takes {"jobid": J} or an inline reference ({"coding": "0:256:..."} and/or {"levels": {metric:
"0:3:..."}} and/or {"values": {metric: [..]}}), with "algorithm" (default: the bundle's), "top_k" (default:
the bundle's) and optionally "consensus": [algorithms]; it answers the ranked jobs, the histogram, the
counts and the index version (`similar_to`). `POST /job` ({"jobid": J}) answers a job's codings and metadata (`job`).
`Limits` are what the service accepts (`JOBAWARE_SIMILARITY_*`); `SimilarBody` and `JobBody` declare both bodies
under them, bounds and all (the service's OpenAPI document shows them); a bad request raises `InputError` whose
message starts with the JSON path of the bad field.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, create_model, model_validator
from pydantic_settings import SettingsConfigDict

from jobaware import fit
from jobaware.bodies import Body, worded
from jobaware.bodies import Limits as BaseLimits
from jobaware.errors import InputError
from jobaware.jsonable import jsonable
from jobaware.model import Served
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import read_each, write_quarantine
from jobaware.similarity.algorithms import ALGORITHMS, KS_MIN_VALUES, NEEDS, check_algorithm
from jobaware.similarity.index import Reference, SimilarityIndex
from jobaware.similarity.schema import CODINGS, LEVEL_MAX, LEVELS, METRICS, NODE_VALUES, SCORE_MAX, SYMBOL_MAX
from jobaware.text import ascii_digits


class Limits(BaseLimits):
    """What the service accepts (JOBAWARE_SIMILARITY_MAX_TOP_K, _MAX_VALUES, _MAX_REFERENCE_SEGMENTS): results per
    answer, node values per metric of an inline reference, and its segments (about a week; the pool may hold jobs
    of up to MAX_SEGMENTS): Q-native and Q-phases compare every segment of the reference with every segment of the
    pool, so this bounds a request's cost."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_SIMILARITY_")
    max_top_k: int = Field(1000, ge=1)
    max_values: int = Field(200_000, ge=KS_MIN_VALUES)
    max_reference_segments: int = Field(1_000, ge=1)


LIMITS = Limits.load()
MAX_JOBID = 2**62
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
        if isinstance(value, str) and ascii_digits(value.strip().removeprefix("-")) and len(value) < 20:
            value = int(value)
        else:
            raise InputError(f"{where}: expected an integer {low}..{high}, got {_show(value)}")
    if not low <= value <= high:
        raise InputError(f"{where}: expected an integer {low}..{high}, got {value}")
    return value


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _sequence(high: int, value: str) -> Any:
    """1 to `max_reference_segments` integers 0..high (each matching `value`): a ':'-separated string or a list."""
    most = LIMITS.max_reference_segments
    listed = rf"^(?:{value})(?::(?:{value})){{0,{most - 1}}}$"
    return worded(Annotated[str, Field(pattern=listed)]
                  | Annotated[list[Annotated[int, Field(ge=0, le=high)]], Field(min_length=1, max_length=most)],
                  f"expected 1 to {most:,} integers 0..{high}, ':'-separated or as a list")


Coding = _sequence(SYMBOL_MAX, "[0-9]|[1-9][0-9]|[1-4][0-9]{2}|50[0-9]|51[01]")  # 0..511
Values = Annotated[list[Annotated[float, Field(ge=0, le=SCORE_MAX)]], Field(min_length=KS_MIN_VALUES, max_length=LIMITS.max_values)]
Levels = create_model("Levels", __base__=Body, **{m: (_sequence(LEVEL_MAX, "[0-9]|1[0-6]"), ...) for m in METRICS})
NodeValues = create_model("NodeValues", __base__=Body, **{m: (Values, ...) for m in METRICS})
JobId = Annotated[int, Field(ge=1, le=MAX_JOBID, description="a job of the pool")]
Algorithm = Literal[*ALGORITHMS]


def _needed_by(field: str) -> dict:
    """An inline reference holds `field` where the algorithm or one of the consensus needs it."""
    others = [a for a in ALGORITHMS if REFERENCE_FIELD[NEEDS[a]] != field]
    return {"anyOf": [{"required": [field]},
                      {"properties": {"algorithm": {"enum": others}, "consensus": {"items": {"enum": others}}}}]}


_INLINE = {"anyOf": [{"required": [field]} for field in INLINE]}


class SimilarBody(Body):
    """The body of `POST /similar`. Beyond it: a jobid must be in the pool, the nine metrics of an inline
    reference have as many values each (levels: as many as the coding's segments), and without `algorithm` the
    model's own decides which coding an inline reference needs."""

    model_config = ConfigDict(title="SimilarRequest", json_schema_extra={
        "oneOf": [{"required": ["jobid"], "not": _INLINE},
                  {"not": {"required": ["jobid"]}, **_INLINE, "allOf": [_needed_by(field) for field in INLINE]}],
        "description": "a pool job or an inline reference; without `algorithm`, the model's own decides which "
                       "coding an inline reference needs"})

    jobid: JobId | None = None
    coding: Coding | None = Field(None, description="an inline binary coding, one symbol per 10 minutes")
    levels: Levels | None = Field(None, description="inline per-metric levels, as many as the coding's segments")
    values: NodeValues | None = Field(None, description="inline per-node values of each metric (for ks)")
    algorithm: Algorithm | None = None
    top_k: Annotated[int, Field(ge=1, le=LIMITS.max_top_k)] | None = None
    consensus: Annotated[list[Algorithm], Field(min_length=1, max_length=len(ALGORITHMS))] | None = Field(
        None, description="several algorithms whose ranks are combined")

    @model_validator(mode="after")
    def _one_reference(self) -> SimilarBody:
        inline = [field for field in INLINE if getattr(self, field) is not None]
        if self.jobid is not None and inline:
            raise ValueError(f"jobid: give either a jobid or an inline reference ({', '.join(inline)}), not both")
        if self.jobid is None and not inline:
            raise ValueError("jobid: give a jobid or an inline reference (coding, levels or values)")
        return self


class JobBody(Body):
    """The body of `POST /job`."""

    model_config = ConfigDict(title="JobRequest")

    jobid: JobId


# Why a body valid by the OpenAPI document may still be refused (the reason with numbers and quoted values blanked as
# #): what no JSON Schema can state: a jobid must be in the pool, an inline reference's metrics as long as each other.
UNSTATABLE = (r"^jobid: unknown job #", r"^(levels|values)\.\w+: # values, \w+ has #$", r"^levels: # segments, coding has #$",
              r"needs the reference's .*, which job # lacks$",  # a pool job without that coding
              r"^coding: b-aggz needs the reference's binary coding$")  # no algorithm named: the model's own


def _numbers(value: str | list[int]) -> np.ndarray:
    return np.array(value.split(":") if isinstance(value, str) else value, np.int64)


def _per_metric(where: str, sequences: list[np.ndarray]) -> list[np.ndarray]:
    for m, seq in zip(METRICS, sequences, strict=True):
        if len(seq) != len(sequences[0]):
            raise InputError(f"{where}.{m}: {len(seq)} values, {METRICS[0]} has {len(sequences[0])}")
    return sequences


def request_of(body: SimilarBody, index: SimilarityIndex, algorithm: str, top_k: int) -> SimilarRequest:
    """The reference, algorithm and `top_k` of a /similar body; `algorithm` and `top_k` are the defaults."""
    if body.jobid is not None:
        ref = index.reference(body.jobid)
    else:
        ref = Reference()
        if body.coding is not None:
            ref.coding = _numbers(body.coding)
        if body.levels is not None:
            ref.levels = _per_metric("levels", [_numbers(getattr(body.levels, m)) for m in METRICS])
            if ref.coding is not None and len(ref.coding) != len(ref.levels[0]):
                raise InputError(f"levels: {len(ref.levels[0])} segments, coding has {len(ref.coding)}")
        if body.values is not None:
            ref.values = _per_metric("values", [np.asarray(getattr(body.values, m), np.float64) for m in METRICS])
    name = body.algorithm or algorithm
    check_algorithm(name)
    return SimilarRequest(ref, name, body.top_k or top_k, body.consensus)


def rank(bundle, body: SimilarBody) -> dict:
    """The ranked jobs with scores, the histogram and the index version of a /similar body (JSON-ready)."""
    request = request_of(body, bundle.index, bundle.algorithm, bundle.top_k)
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


def similar_to(body: SimilarBody, model: Served, limits: Limits = LIMITS) -> dict:
    """The pool's jobs ranked by similarity to a pool job or an inline reference, with the histogram."""
    return {**rank(model.bundle, body), "model_version": model.version, "fit": model.fit()}


def job(body: JobBody, model: Served, limits: Limits = LIMITS) -> dict:
    """A pool job's codings and metadata."""
    return {**jsonable(model.bundle.index.job(body.jobid)), "model_version": model.version}


def open_index(data: list[str] | str | None = None, index: str | Path | None = None, *, progress=None,
               on_read=None) -> SimilarityIndex:
    """An index from a saved index folder, or built from source files / a canonical dataset folder; `on_read` is
    given the read report of source files (their bad records, a file no record could be read from among them)."""
    if (data is None) == (index is None):
        raise InputError("data: give either --data (coding files or a dataset folder) or --index (an index folder)")
    if index is not None:
        return SimilarityIndex.load(index)
    sources = [data] if isinstance(data, str | Path) else list(data)
    if len(sources) == 1 and Path(sources[0]).is_dir() and any(Path(sources[0]).glob("*.parquet")):
        return SimilarityIndex.build(sources[0], progress=progress)
    from jobaware.similarity.reader import ingest

    with tempfile.TemporaryDirectory(prefix="jobaware-similar-") as tmp:
        report = ingest([str(s) for s in sources], Path(tmp), progress=progress)
        if not report.rows:
            first = f"; first: {report.problems[0]}" if report.problems else ""
            raise InputError(f"{', '.join(map(str, sources))}: no job read ({report.bad_rows:,} bad record(s)){first}")
        if on_read is not None:
            on_read(report)
        return SimilarityIndex.build(tmp, progress=progress)


def similar(jobid: int, *, data=None, index=None, algorithm: str = "b-aggz", top: int = 10,
            consensus: list[str] | None = None, workers: int = 0) -> list[dict]:
    """`jobaware similarity rank JOBID`: `[{"jobid": ..., "similarity": ...}]`, similarity descending, ties by jobid.
    With `consensus`, the jobs every named algorithm ranks in its top `top`, by mean similarity."""
    pool = index if isinstance(index, SimilarityIndex) else open_index(data, index)
    top = _integer(top, "top", 1, LIMITS.max_top_k)
    ref = pool.reference(_integer(jobid, "jobid", 1, MAX_JOBID))
    if consensus:
        for name in consensus:
            check_algorithm(name)
        return pool.consensus(ref, list(consensus), top, workers)
    check_algorithm(algorithm)
    return pool.query(ref, algorithm, top, workers)["ranking"]


def predict_file(inputs: list[str], output: str | Path, model, progress=None) -> PredictionSummary:
    """Rank the bundle's pool against every job of Mistral coding files (paths, globs, folders; binary or
    quantised), by the bundle's algorithm; one JSON line per query job (`-`: standard output). Bad records are
    counted and written to `<output>.quarantine.jsonl`. The files are read before `model()` loads the model."""
    from jobaware.similarity.reader import expand, iter_blocks, read_header
    quarantined, problems, tables, queries = [], [], {}, []
    paths = expand(inputs)

    def unreadable(problem, record) -> None:  # a file with no header of a Mistral table: one bad record
        problems.append(str(problem))
        quarantined.append(record)

    for path in read_each(paths, lambda path: read_header(path) and path, unreadable):
        for block in iter_blocks(path, set()):
            quarantined += block.quarantined
            problems += [str(p) for p in block.problems]
            if block.table not in (CODINGS, LEVELS):
                raise InputError(f"{path}: holds {block.table}; queries come from a coding file")
            tables[block.table] = tables.get(block.table, 0) + block.rows.num_rows
            for row in block.rows.to_pylist():
                coding = row.get("coding") or row["coding_abs"]
                ref = Reference(jobid=None, coding=np.array(coding.split(":"), np.int64))
                if block.table == LEVELS:
                    ref.levels = [np.array(row[m].split(":"), np.int64) for m in METRICS]
                queries.append((path, block.table, row["jobid"], ref))
    if not queries:
        first = f"; first: {problems[0]}" if problems else ""
        raise InputError(f"{', '.join(map(str, paths))}: no coding read ({len(quarantined):,} bad record(s)){first}")
    bundle, version = model()
    algorithm = bundle.algorithm
    if CODINGS in tables and algorithm not in ("b-all", "b-aggz"):
        path = next(p for p, table, _, _ in queries if table == CODINGS)
        raise InputError(f"{path}: binary codings only; the bundle's algorithm {algorithm} needs the "
                         f"quantised codings (job_codings.csv) of the queries")
    predictions = 0
    with atomic_text(output) as handle:
        for _, _, jobid, ref in queries:
            answer = bundle.index.query(ref, algorithm, bundle.top_k, bundle.workers)
            record = {"query_jobid": jobid, "algorithm": algorithm, "ranking": answer["ranking"],
                      "model_version": version, "index_version": answer["index_version"]}
            handle.write(json.dumps(jsonable(record), allow_nan=False) + "\n")
            predictions += 1
            if progress:
                progress(1)
    return PredictionSummary(predictions=predictions, model_version=version, output=str(output),
                             bad_records=len(quarantined), quarantine=write_quarantine(output, quarantined),
                             problems=problems[:20], input_profile=fit.describe(tables, [str(p) for p in paths]))
