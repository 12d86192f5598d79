"""The similarity index: a pool of jobs held as compact arrays, built once, saved to a folder, memory-mapped on
load and cut into shards of `shard_jobs` jobs (sorted by jobid), queried by jobid or by an inline coding.

Each shard keeps every distinct coding once (binary codings, zero-aggregated codings, each metric's level
sequences, each metric's value distribution for KS) and per job the index of its distinct coding; a query
scores the distinct codings and gathers, so repeated behaviour (a third of all jobs are the one-segment
coding `0`) costs nothing. Scores are float64; a job that an algorithm cannot score (no levels, no node
values, fewer than 8 values for KS) gets NaN and is left out of rankings and histograms, and counted.

Rankings sort by similarity, descending, ties by jobid ascending. Histograms use 40 bins of 2.5 % on [0, 1]
(the last bin holds 1.0).
"""

from __future__ import annotations

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobaware.errors import InputError, JobawareError
from jobaware.similarity import algorithms as alg
from jobaware.similarity.capability import FEATURE_VERSION
from jobaware.similarity.flat import parse, ragged_arange, texts
from jobaware.similarity.schema import CODINGS, JOBS, LEVELS, METRICS, NODE_VALUES, SCHEMAS, aggregate_zeros_flat

FORMAT = 1
BINS = np.linspace(0.0, 1.0, 41)
MAX_GRID = 64
DEFAULT_SHARD_JOBS = 2_000_000


@dataclass
class Reference:
    """The job a query compares against: a pool job (by jobid) or codings given inline."""

    jobid: int | None = None
    coding: np.ndarray | None = None
    levels: list[np.ndarray] | None = None
    values: list[np.ndarray] | None = None
    value_count: int = 0

    @property
    def label(self) -> str:
        return f"job {self.jobid}" if self.jobid is not None else "the inline reference"


def _distinct(text: pa.Array, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Factorise a text column of sequences: (ids per row, flat values of the distinct ones, offsets)."""
    codes, uniques = pd.factorize(np.asarray(text.to_numpy(zero_copy_only=False), dtype=object))
    values, offsets = parse(pa.array(uniques, pa.string()), dtype)
    return codes.astype(np.int32), values, offsets


@dataclass
class Shard:
    """The arrays of one slice of the pool (see the module docstring)."""

    arrays: dict[str, np.ndarray]
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self):
        return {"arrays": {k: np.asarray(v) for k, v in self.arrays.items()}}

    def __setstate__(self, state):
        self.arrays, self._cache = state["arrays"], {}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def has(self, name: str) -> bool:
        return name in self.arrays

    @property
    def size(self) -> int:
        return len(self.arrays["jobid"])

    def strings(self, name: str) -> list[str]:
        if name not in self._cache:
            self._cache[name] = texts(self.arrays[f"{name}_values"], self.arrays[f"{name}_offsets"])
        return self._cache[name]

    def phases(self, metric: int) -> alg.PhaseTable:
        key = f"phases{metric}"
        if key not in self._cache:
            self._cache[key] = alg.PhaseTable(np.asarray(self.arrays[f"level{metric}_values"]),
                                              np.asarray(self.arrays[f"level{metric}_offsets"]))
        return self._cache[key]

    def sequence(self, name: str, unique: int) -> np.ndarray:
        offsets = self.arrays[f"{name}_offsets"]
        return np.asarray(self.arrays[f"{name}_values"][offsets[unique]:offsets[unique + 1]])


class _Source:
    """The canonical tables an index is built from: a dataset folder's Parquet files, or in-memory tables."""

    BATCH = 500_000

    def __init__(self, dataset: str | Path | None = None, tables: dict[str, pa.Table] | None = None):
        self.dataset, self.tables = (Path(dataset) if dataset is not None else None), tables or {}

    def has(self, table: str) -> bool:
        return table in self.tables if self.dataset is None else (self.dataset / f"{table}.parquet").is_file()

    def batches(self, table: str, columns: list[str]):
        if self.dataset is None:
            yield from (pa.Table.from_batches([b]) for b in self.tables[table].select(columns).to_batches(self.BATCH))
        else:
            source = pq.ParquetFile(self.dataset / f"{table}.parquet")
            yield from (pa.Table.from_batches([b]) for b in source.iter_batches(self.BATCH, columns=columns))

    def window(self, table: str, columns: list[str], low: int, high: int) -> pa.Table:
        """The rows of jobs low..high (inclusive), in table order."""
        parts = [b.filter(pc.and_(pc.greater_equal(b["jobid"], low), pc.less_equal(b["jobid"], high)))
                 for b in self.batches(table, columns)]
        return pa.concat_tables(parts) if parts else pa.table({c: [] for c in columns})


def _coding_arrays(jobid: np.ndarray, coding: pa.Array) -> dict[str, np.ndarray]:
    arrays = {"jobid": jobid}
    ids, values, offsets = _distinct(coding, np.uint16)
    arrays.update(coding_ids=ids, coding_values=values, coding_offsets=offsets)
    aggz, aggz_offsets = aggregate_zeros_flat(values, offsets)
    aggz_codes, _ = pd.factorize(np.asarray(texts(aggz, aggz_offsets), dtype=object))
    keep = np.unique(aggz_codes, return_index=True)[1]  # the first coding of every distinct aggregate
    lengths = np.diff(aggz_offsets)[keep]
    arrays["aggz_values"] = aggz[ragged_arange(aggz_offsets[keep], lengths)]
    arrays["aggz_offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    arrays["aggz_ids"] = aggz_codes[ids].astype(np.int32)
    return arrays


def _level_arrays(position: pd.Index, levels: pa.Table) -> tuple[dict[str, np.ndarray], int]:
    arrays = {}
    rows = position.get_indexer(levels["jobid"].to_numpy())
    present = pa.array(rows >= 0)
    for m, metric in enumerate(METRICS):
        metric_ids, values, offsets = _distinct(levels[metric].filter(present).combine_chunks(), np.uint8)
        per_job = np.full(len(position), -1, np.int32)
        per_job[rows[rows >= 0]] = metric_ids
        arrays[f"level{m}_ids"] = per_job
        arrays[f"level{m}_values"], arrays[f"level{m}_offsets"] = values, offsets
        arrays[f"level{m}_nonzero"] = (np.maximum.reduceat(values, offsets[:-1]) > 0 if len(values)
                                       else np.zeros(0, bool))
    return arrays, int((rows < 0).sum())


def _ks_arrays(position: pd.Index, source: _Source, low: int, high: int, grid: np.ndarray) -> tuple[dict, int]:
    """Per metric: every comparable job's cumulative value counts at the grid, each distinct one once."""
    keys = source.window(NODE_VALUES, ["jobid", "node"], low, high)
    frame = pd.DataFrame({"row": position.get_indexer(keys["jobid"].to_numpy()),
                          "node": keys["node"].to_numpy(zero_copy_only=False)})
    keep = (~frame.duplicated(["row", "node"])).to_numpy()
    duplicates = int((~keep).sum())
    counts = np.zeros((len(METRICS), len(position) * len(grid)), np.int64)
    done = 0
    for batch in source.batches(NODE_VALUES, ["jobid", *METRICS]):
        inside = pc.and_(pc.greater_equal(batch["jobid"], low), pc.less_equal(batch["jobid"], high))
        batch = batch.filter(inside)
        mine = keep[done:done + batch.num_rows]
        rows = frame["row"].to_numpy()[done:done + batch.num_rows][mine]
        done += batch.num_rows
        batch = batch.filter(pa.array(mine))
        for m, metric in enumerate(METRICS):
            values, offsets = parse(batch[metric], np.float64)
            owner = np.repeat(rows, np.diff(offsets))
            counts[m] += np.bincount(owner * len(grid) + np.searchsorted(grid, values), minlength=counts.shape[1])
    arrays = {}
    count = np.zeros(len(position), np.int64)
    for m in range(len(METRICS)):
        cumulative = counts[m].reshape(len(position), len(grid)).cumsum(axis=1)
        count = cumulative[:, -1]
        comparable = count >= alg.KS_MIN_VALUES
        unique, inverse = np.unique(cumulative[comparable], axis=0, return_inverse=True)
        per_job = np.full(len(position), -1, np.int32)
        per_job[comparable] = inverse.reshape(-1)
        arrays[f"ks{m}_ids"], arrays[f"ks{m}_cumulative"] = per_job, unique.astype(np.int32)
    arrays["ks_count"] = count.astype(np.int32)
    return arrays, duplicates


class SimilarityIndex:
    """A pool of jobs ready to be ranked against a reference (see the module docstring)."""

    def __init__(self, shards: list[Shard], tables: list[str], grid: np.ndarray | None, jobs: pd.DataFrame | None,
                 info: dict | None = None):
        self.shards, self.tables, self.grid, self.jobs = shards, list(tables), grid, jobs
        self.info = info or {}
        self.feature_version = FEATURE_VERSION
        self.version = self._digest()

    # building, saving, loading

    @classmethod
    def build(cls, dataset: str | Path, *, shard_jobs: int = DEFAULT_SHARD_JOBS, progress=None) -> SimilarityIndex:
        """Index the canonical tables of a dataset folder (written by `ingest`)."""
        if not (Path(dataset) / f"{CODINGS}.parquet").is_file():
            raise InputError(f"{dataset}: no {CODINGS}.parquet; ingest the coding files first")
        return cls._build(_Source(dataset), shard_jobs, progress)

    @classmethod
    def from_tables(cls, tables: dict[str, pa.Table], *, shard_jobs: int = DEFAULT_SHARD_JOBS) -> SimilarityIndex:
        """Index canonical tables held in memory (by contract name; mistral_codings is required)."""
        if CODINGS not in tables:
            raise InputError(f"tables: {CODINGS} is required")
        return cls._build(_Source(tables=tables), shard_jobs, None)

    @classmethod
    def _build(cls, source: _Source, shard_jobs: int, progress) -> SimilarityIndex:
        every = np.concatenate([b["jobid"].to_numpy() for b in source.batches(CODINGS, ["jobid"])] or [[]])
        jobid = np.unique(every.astype(np.int64))
        info = {"duplicate_jobids": int(len(every) - len(jobid)), "levels_without_coding": 0,
                "duplicate_node_rows": 0}
        grid = cls._grid(source) if source.has(NODE_VALUES) else None
        shards = []
        for start in range(0, len(jobid), shard_jobs):
            ids = jobid[start:start + shard_jobs]
            low, high = int(ids[0]), int(ids[-1])
            codings = _first_per_jobid(source.window(CODINGS, ["jobid", "coding"], low, high))
            order = np.argsort(codings["jobid"].to_numpy(), kind="stable")
            arrays = _coding_arrays(ids, codings["coding"].take(pa.array(order)).combine_chunks())
            position = pd.Index(ids)
            if source.has(LEVELS):
                levels = _first_per_jobid(source.window(LEVELS, ["jobid", *METRICS], low, high))
                more, orphans = _level_arrays(position, levels)
                arrays.update(more)
                info["levels_without_coding"] += orphans
            if source.has(NODE_VALUES):
                more, duplicates = _ks_arrays(position, source, low, high, grid)
                arrays.update(more)
                info["duplicate_node_rows"] += duplicates
            shards.append(Shard(arrays))
            if progress:
                progress(len(ids))
        jobs = None
        if source.has(JOBS):
            jobs = pd.concat([b.to_pandas() for b in source.batches(JOBS, list(SCHEMAS[JOBS].names))])
            jobs = jobs.drop_duplicates("jobid")
            jobs = jobs[jobs["jobid"].isin(jobid)].set_index("jobid").sort_index()
        tables = [t for t in (CODINGS, LEVELS, NODE_VALUES, JOBS) if source.has(t)]
        return cls(shards, tables, grid, jobs, info)

    @staticmethod
    def _grid(source: _Source) -> np.ndarray:
        """The distinct node values of the pool (the points where every pool ECDF can jump)."""
        found: set[float] = set()
        for batch in source.batches(NODE_VALUES, list(METRICS)):
            for metric in METRICS:
                values, _ = parse(batch[metric], np.float64)
                found.update(np.unique(values).tolist())
                if len(found) > MAX_GRID:
                    raise InputError(
                        f"{NODE_VALUES}: node values take more than {MAX_GRID} distinct values; KS expects "
                        f"per-segment scores averaged over the file systems (0, 1 or 4 per file system)")
        return np.array(sorted(found or {0.0}), np.float64)

    def save(self, folder: str | Path) -> Path:
        """Write the index as .npy arrays (one folder per shard), metadata as Parquet, and index.json."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        names = []
        for i, shard in enumerate(self.shards):
            name = f"shard-{i:05d}"
            (folder / name).mkdir(exist_ok=True)
            for key, array in shard.arrays.items():
                np.save(folder / name / f"{key}.npy", np.asarray(array), allow_pickle=False)
            names.append(name)
        if self.jobs is not None:
            self.jobs.reset_index().to_parquet(folder / "jobs.parquet", index=False)
        meta = {"format": FORMAT, "feature_version": self.feature_version, "version": self.version,
                "jobs": self.size, "shards": names, "tables": self.tables, "info": self.info,
                "grid": None if self.grid is None else self.grid.tolist()}
        (folder / "index.json").write_text(json.dumps(meta, indent=2))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> SimilarityIndex:
        """Open a saved index; its arrays are memory-mapped, read from disk as queries touch them."""
        folder = Path(folder)
        meta_path = folder / "index.json"
        if not meta_path.is_file():
            raise InputError(f"{folder}: not a similarity index (no index.json)")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT or meta.get("feature_version") != FEATURE_VERSION:
            raise JobawareError(f"{folder}: index format {meta.get('format')}/features {meta.get('feature_version')} "
                                f"is not this code's {FORMAT}/{FEATURE_VERSION}; rebuild the index")
        shards = [Shard({p.stem: np.load(p, mmap_mode="r") for p in sorted((folder / name).glob("*.npy"))})
                  for name in meta["shards"]]
        jobs = pd.read_parquet(folder / "jobs.parquet").set_index("jobid") if (folder / "jobs.parquet").is_file() else None
        grid = None if meta["grid"] is None else np.array(meta["grid"], np.float64)
        index = cls.__new__(cls)
        index.shards, index.tables, index.grid, index.jobs = shards, meta["tables"], grid, jobs
        index.info, index.feature_version, index.version = meta["info"], meta["feature_version"], meta["version"]
        return index

    def _digest(self) -> str:
        digest = hashlib.blake2b(digest_size=8)
        digest.update(FEATURE_VERSION.encode())
        for shard in self.shards:
            for key in sorted(shard.arrays):
                digest.update(key.encode())
                digest.update(np.ascontiguousarray(shard.arrays[key]).tobytes())
        return digest.hexdigest()

    # looking up jobs

    @property
    def size(self) -> int:
        return sum(s.size for s in self.shards)

    @property
    def jobids(self) -> np.ndarray:
        """Every pool jobid, in pool order (ascending)."""
        if getattr(self, "_jobids", None) is None:
            self._jobids = (np.concatenate([np.asarray(s["jobid"]) for s in self.shards]) if self.shards
                            else np.zeros(0, np.int64))
        return self._jobids

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_jobids"}

    def has(self, table: str) -> bool:
        return table in self.tables

    def locate(self, jobid: int) -> tuple[Shard, int]:
        for shard in self.shards:
            ids = shard["jobid"]
            at = int(np.searchsorted(ids, jobid))
            if at < len(ids) and ids[at] == jobid:
                return shard, at
        raise InputError(f"jobid: unknown job {jobid} (not in this index of {self.size:,} jobs)")

    def reference(self, jobid: int) -> Reference:
        """A pool job as a query reference, with every coding the index holds for it."""
        shard, row = self.locate(jobid)
        ref = Reference(jobid=int(jobid), coding=shard.sequence("coding", shard["coding_ids"][row]))
        if shard.has("level0_ids") and shard["level0_ids"][row] >= 0:
            ref.levels = [shard.sequence(f"level{m}", shard[f"level{m}_ids"][row]) for m in range(len(METRICS))]
        if shard.has("ks_count"):
            ref.value_count = int(shard["ks_count"][row])
            if shard["ks0_ids"][row] >= 0:
                ref.values = [np.repeat(self.grid, np.diff(np.r_[0, shard[f"ks{m}_cumulative"][shard[f"ks{m}_ids"][row]]]))
                              for m in range(len(METRICS))]
        return ref

    def job(self, jobid: int) -> dict:
        """What the index knows of a job: its codings and its metadata (JSON-ready)."""
        ref = self.reference(jobid)
        out = {"jobid": int(jobid), "segments": int(len(ref.coding)), "coding": _text(ref.coding),
               "coding_aggzeros": _text(aggregate_zeros_flat(ref.coding, np.array([0, len(ref.coding)]))[0]),
               "levels": None if ref.levels is None else {m: _text(v) for m, v in zip(METRICS, ref.levels, strict=True)},
               "node_values": None, "metadata": None}
        shard, row = self.locate(jobid)
        if shard.has("ks_count"):
            out["node_values"] = {"count": int(shard["ks_count"][row]),
                                  "comparable_by_ks": bool(shard["ks_count"][row] >= alg.KS_MIN_VALUES)}
        if self.jobs is not None and jobid in self.jobs.index:
            row_meta = self.jobs.loc[jobid]
            out["metadata"] = {k: (None if pd.isna(v) else (v.item() if hasattr(v, "item") else v))
                               for k, v in row_meta.items()}
        return out

    # scoring

    def require(self, algorithm: str, ref: Reference | None = None) -> None:
        """Refuse clearly when the pool (or the reference, when given) lacks what the algorithm needs."""
        alg.check_algorithm(algorithm)
        table = alg.NEEDS[algorithm]
        if not self.has(table):
            given = ", ".join(self.tables)
            what = {LEVELS: "the quantised per-metric coding table (job_codings: <metric> levels)",
                    NODE_VALUES: "the per-node value table (jobid,node,<metric>...)"}[table]
            raise alg.MissingTableError(f"algorithm: {algorithm} needs {what} ({table}); this pool was given "
                                        f"{given} only. The binary algorithms b-all and b-aggz work on it.")
        if ref is None:
            return
        if table == CODINGS and ref.coding is None:
            raise InputError(f"coding: {algorithm} needs the reference's binary coding")
        if table == LEVELS and ref.levels is None:
            raise InputError(f"levels: {algorithm} needs the reference's per-metric levels, which {ref.label} lacks")
        if table == NODE_VALUES:
            count = len(ref.values[0]) if ref.values is not None else ref.value_count
            if count == 0:
                raise InputError(f"values: ks needs the reference's node values, which {ref.label} lacks")
            if count < alg.KS_MIN_VALUES:
                raise alg.NotComparableError(
                    f"values: {ref.label} has {count} node value(s) per metric (nodes x segments); KS needs at "
                    f"least {alg.KS_MIN_VALUES}, so it is not comparable by KS (no score is invented)")

    def scores(self, ref: Reference, algorithm: str, workers: int = 0) -> np.ndarray:
        """Similarity of every pool job to `ref` (pool order: by jobid); NaN where not comparable."""
        self.require(algorithm, ref)
        return np.concatenate([_shard_scores(s, ref, algorithm, workers, self.grid) for s in self.shards]) \
            if self.shards else np.zeros(0)

    def query(self, ref: Reference, algorithm: str, top_k: int = 10, workers: int = 0) -> dict:
        """Top k, histogram and counts of one query."""
        started = time.perf_counter()
        scores = self.scores(ref, algorithm, workers)
        seconds = time.perf_counter() - started
        jobids, top = rank(scores, self.jobids, top_k)
        counts = histogram(scores)
        return {"algorithm": algorithm, "ranking": [{"jobid": int(j), "similarity": float(s)}
                                                   for j, s in zip(jobids, top, strict=True)],
                "histogram": {"bin_edges": BINS.tolist(), "counts": counts.tolist()},
                "comparable": int(np.isfinite(scores).sum()), "not_comparable": int(np.isnan(scores).sum()),
                "seconds": seconds, "index_version": self.version}

    def consensus(self, ref: Reference, algorithms: list[str], top_k: int = 10, workers: int = 0) -> list[dict]:
        """The jobs every chosen algorithm places in its top k, by their mean similarity (ties by jobid)."""
        if not algorithms:
            raise InputError("consensus: name at least one algorithm")
        jobids = self.jobids
        chosen, total = None, None
        for name in dict.fromkeys(algorithms):
            scores = self.scores(ref, name, workers)
            top, _ = rank(scores, jobids, top_k)
            chosen = set(top.tolist()) if chosen is None else chosen & set(top.tolist())
            total = scores if total is None else total + scores
        members = np.array(sorted(chosen), np.int64)
        where = np.searchsorted(jobids, members)
        mean = total[where] / len(dict.fromkeys(algorithms))
        order = np.lexsort((members, -mean))
        return [{"jobid": int(members[i]), "similarity": float(mean[i])} for i in order]


def _text(values) -> str:
    return ":".join(str(int(v)) for v in np.asarray(values).tolist())


def _first_per_jobid(table: pa.Table) -> pa.Table:
    """Rows of a table with the first row of every jobid only."""
    _, first = np.unique(table["jobid"].to_numpy(), return_index=True)
    return table.take(pa.array(np.sort(first)))


def _per_metric(task, workers: int) -> list:
    """`task(m)` for the nine metrics, on up to `workers` threads (numpy and rapidfuzz release the GIL)."""
    threads = min(len(METRICS), alg.workers_for(workers))
    if threads == 1:
        return [task(m) for m in range(len(METRICS))]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(task, range(len(METRICS))))


def _shard_scores(shard: Shard, ref: Reference, algorithm: str, workers: int, grid: np.ndarray | None) -> np.ndarray:
    if algorithm == "b-all":
        return alg.levenshtein(alg.as_text(ref.coding), shard.strings("coding"), workers)[shard["coding_ids"]]
    if algorithm == "b-aggz":
        aggz = aggregate_zeros_flat(ref.coding, np.array([0, len(ref.coding)]))[0]
        return alg.levenshtein(alg.as_text(aggz), shard.strings("aggz"), workers)[shard["aggz_ids"]]
    if algorithm == "ks":
        def ks(m):
            cumulative = np.asarray(shard[f"ks{m}_cumulative"])
            p = alg.ks_metric(ref.values[m], grid, cumulative, cumulative[:, -1]) if len(cumulative) else np.zeros(0)
            return np.r_[p, np.nan][np.asarray(shard[f"ks{m}_ids"])]
        return np.sum(_per_metric(ks, workers), axis=0) / len(METRICS)
    ids = [np.asarray(shard[f"level{m}_ids"]) for m in range(len(METRICS))]
    missing = ids[0] < 0
    if algorithm == "q-lev":
        def lev(m):
            per_unique = alg.levenshtein(alg.as_text(ref.levels[m]), shard.strings(f"level{m}"), 1)
            return np.r_[per_unique, np.nan][ids[m]]
        return np.sum(_per_metric(lev, workers), axis=0) / len(METRICS)
    if algorithm == "q-native":
        def native(m):
            per_unique = alg.q_native_metric(ref.levels[m], shard[f"level{m}_values"], shard[f"level{m}_offsets"])
            nonzero = np.r_[np.asarray(shard[f"level{m}_nonzero"]), False][ids[m]] | bool(np.any(ref.levels[m]))
            return np.where(nonzero, np.r_[per_unique, 0.0][ids[m]], 0.0), nonzero
        parts = _per_metric(native, workers)
        total, counted = np.sum([t for t, _ in parts], axis=0), np.sum([c for _, c in parts], axis=0)
        out = np.divide(total, counted, out=np.zeros(shard.size), where=counted > 0)
        out[missing] = np.nan
        return out

    def phased(m):
        s, w = alg.q_phases_metric(ref.levels[m], shard[f"level{m}_values"], shard.phases(m))
        return np.r_[s, 0.0][ids[m]], np.r_[w, 0.0][ids[m]]
    parts = _per_metric(phased, workers)
    score, weight = np.sum([s for s, _ in parts], axis=0), np.sum([w for _, w in parts], axis=0)
    out = np.divide(score, weight, out=np.zeros(shard.size), where=weight > 0)
    out[missing] = np.nan
    return out


def rank(scores: np.ndarray, jobids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best comparable jobs: similarity descending, ties by jobid ascending."""
    valid = np.flatnonzero(~np.isnan(scores))
    if k < len(valid):
        # everything strictly above the k-th best score, plus its ties, then an exact sort of those
        kth = np.partition(scores[valid], len(valid) - k)[len(valid) - k]
        valid = valid[scores[valid] >= kth]
    order = valid[np.lexsort((jobids[valid], -scores[valid]))][:k]
    return jobids[order], scores[order]


def histogram(scores: np.ndarray) -> np.ndarray:
    """Job counts in 40 bins of 2.5 % (NaN left out)."""
    return np.histogram(scores[~np.isnan(scores)], bins=BINS)[0]
