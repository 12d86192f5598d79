"""How well an index ranks, and how fast: the evaluation the pipeline logs and the promotion gate decides on.

Primary metric `precision_at_k` (higher is better): for each reference job of the evaluation folder, the
share of the k jobs ranked most similar to it (itself left out) that belong to its own planted family,
k_eff = min(k, family size - 1) so that a perfect ranking scores 1; mean over the references the bundle's
algorithm can score. Families are
- on generated pools: the generator's planted families (`mistral_families`);
- on real pools (no families known, e.g. the real Mistral sample): planted here, by adding to the
  evaluation pool `eval_family_size - 1` perturbed copies of each reference (the generator's operators, see
  `variants`), so the metric is defined on real data too: can the algorithm find a real job's re-runs?
The evaluation folder holds its own pool (a sample of at most `eval_pool_jobs` jobs), so champion and
challenger are scored on the same jobs whatever pool they indexed: `score` builds an index of that pool and
ranks it with the bundle's algorithm.

Also measured: `self_match_rate` (share of references that no other job outscores: a job is its own best
match), the same precision for every algorithm the pool allows, two baselines (`random`: the expected
precision of a random ranking; `length`: ranking by closeness of the number of segments), and seconds per
100k jobs per algorithm for reference jobs of about 25, 48 and 400 segments.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobaware.errors import InputError
from jobaware.similarity import variants
from jobaware.similarity.algorithms import ALGORITHMS, NEEDS
from jobaware.similarity.capability import PRIMARY_METRIC
from jobaware.similarity.flat import parse
from jobaware.similarity.index import SimilarityIndex, rank
from jobaware.similarity.schema import (
    CODINGS,
    FAMILIES,
    FLOATS,
    JOBS,
    LEVELS,
    METRICS,
    NODE_VALUES,
    SCHEMAS,
    SEGMENT_SECONDS,
    aggregate_zeros,
    format_sequence,
)

TIMING_SEGMENTS = (25, 48, 400)
EVAL_JSON, QUERIES, TRUTH, POOL = "eval.json", "queries.parquet", "truth.parquet", "pool"
BIT_METRIC = np.arange(len(METRICS))


def available(index: SimilarityIndex) -> list[str]:
    return [a for a in ALGORITHMS if index.has(NEEDS[a])]


# the evaluation folder


def make_eval(dataset: str | Path, eval_dir: str | Path, params: dict) -> dict:
    """Write the evaluation folder: a pool sample, its reference queries and the family of every job."""
    dataset, eval_dir = Path(dataset), Path(eval_dir)
    rng = np.random.default_rng(params["seed"])
    codings = pq.read_table(dataset / f"{CODINGS}.parquet")
    jobid = codings["jobid"].to_numpy()
    families_path = dataset / f"{FAMILIES}.parquet"
    (eval_dir / POOL).mkdir(parents=True, exist_ok=True)
    if families_path.is_file():
        meta = _planted_from_truth(dataset, eval_dir, jobid, pq.read_table(families_path).to_pandas(), params, rng)
    else:
        meta = _planted_by_perturbing(dataset, eval_dir, codings, params, rng)
    meta.update(k=params["eval_k"], seed=params["seed"])
    (eval_dir / EVAL_JSON).write_text(json.dumps(meta, indent=2))
    return meta


def _copy_tables(dataset: Path, eval_dir: Path, keep: np.ndarray, extra: dict[str, pa.Table] | None = None) -> None:
    """The dataset's tables restricted to the jobs `keep`, plus `extra` rows, into eval_dir/pool."""
    wanted = pa.array(np.sort(keep))
    for table in (CODINGS, LEVELS, JOBS, NODE_VALUES):
        source = dataset / f"{table}.parquet"
        if not source.is_file():
            continue
        parts = []
        for batch in pq.ParquetFile(source).iter_batches(batch_size=500_000):
            parts.append(pa.Table.from_batches([batch]).filter(pc.is_in(batch["jobid"], value_set=wanted)))
        if extra and table in extra:
            parts.append(extra[table])
        pq.write_table(pa.concat_tables(parts).cast(SCHEMAS[table]), eval_dir / POOL / f"{table}.parquet")


def _planted_from_truth(dataset, eval_dir, jobid, truth: pd.DataFrame, params, rng) -> dict:
    truth = truth[truth["jobid"].isin(jobid)]
    members = truth[truth["family"] >= 0]
    sizes = members.groupby("family").size()
    families = sizes[sizes >= 2].index.to_numpy().copy()
    if not len(families):
        raise InputError(f"{dataset}: no planted family has two jobs in the pool; nothing to evaluate on")
    rng.shuffle(families)
    room = params["eval_pool_jobs"]
    chosen, total = [], 0
    for family in families[: params["eval_references"]]:
        if total + sizes[family] > room // 2 and chosen:
            break
        chosen.append(family)
        total += int(sizes[family])
    in_family = members[members["family"].isin(chosen)]
    others = np.setdiff1d(jobid, in_family["jobid"].to_numpy())
    filler = rng.choice(others, min(len(others), room - len(in_family)), replace=False)
    keep = np.concatenate([in_family["jobid"].to_numpy(), filler])
    queries = in_family.groupby("family").sample(1, random_state=params["seed"])[["jobid", "family"]]
    _copy_tables(dataset, eval_dir, keep)
    labels = pd.DataFrame({"jobid": keep, "family": np.r_[in_family["family"].to_numpy(), np.full(len(filler), -1)]})
    labels.to_parquet(eval_dir / TRUTH, index=False)
    queries.sort_values("jobid").to_parquet(eval_dir / QUERIES, index=False)
    return {"kind": "planted by the generator", "references": len(queries), "pool_jobs": len(keep)}


def _planted_by_perturbing(dataset, eval_dir, codings: pa.Table, params, rng) -> dict:
    """Real pools: pick references with I/O and several segments, add perturbed copies of each."""
    values, offsets = parse(codings["coding"], np.int64)
    lengths = np.diff(offsets)
    busy = np.add.reduceat(values > 0, offsets[:-1]) > 0
    text = codings["coding"].to_numpy(zero_copy_only=False)
    unique = ~pd.Series(text).duplicated(keep=False).to_numpy()
    candidates = np.flatnonzero(busy & (lengths >= 3) & unique)
    if not len(candidates):
        raise InputError(f"{dataset}: no job with I/O over 3 or more segments to plant families around")
    copies = params["eval_family_size"] - 1
    refs = rng.choice(candidates, min(len(candidates), params["eval_references"],
                                      params["eval_pool_jobs"] // (2 * (copies + 1))), replace=False)
    jobid = codings["jobid"].to_numpy()
    room = params["eval_pool_jobs"] - len(refs) * (copies + 1)
    rest = np.setdiff1d(np.arange(len(jobid)), refs)
    filler = rng.choice(rest, min(len(rest), max(room, 0)), replace=False)
    keep = jobid[np.concatenate([refs, filler])]
    rows = _rows_of(dataset, jobid[refs])
    extra: dict[str, list[dict]] = {t: [] for t in rows}
    next_id = int(jobid.max()) + 1
    new_ids, new_family = [], []
    for family, ref in enumerate(jobid[refs].tolist()):
        for _ in range(copies):
            made = _perturbed(rows, ref, next_id, rng)
            for table, records in made.items():
                extra[table] += records
            new_ids.append(next_id)
            new_family.append(family)
            next_id += 1
    tables = {t: pa.Table.from_pylist(records, schema=SCHEMAS[t]) for t, records in extra.items() if records}
    _copy_tables(dataset, eval_dir, keep, tables)
    family_of_ref = np.arange(len(refs))
    labels = pd.DataFrame({"jobid": np.r_[keep, new_ids],
                           "family": np.r_[family_of_ref, np.full(len(filler), -1), new_family]})
    labels.to_parquet(eval_dir / TRUTH, index=False)
    pd.DataFrame({"jobid": jobid[refs], "family": family_of_ref}).sort_values("jobid").to_parquet(
        eval_dir / QUERIES, index=False)
    return {"kind": "perturbed copies of real jobs", "references": int(len(refs)), "pool_jobs": int(len(labels))}


def _rows_of(dataset: Path, jobids: np.ndarray) -> dict[str, dict[int, list[dict]]]:
    """Every table's rows of the given jobs, as dicts by jobid."""
    wanted = pa.array(np.sort(jobids))
    out = {}
    for table in (CODINGS, LEVELS, JOBS, NODE_VALUES):
        path = dataset / f"{table}.parquet"
        if path.is_file():
            found = pq.read_table(path, filters=pc.field("jobid").isin(wanted)).to_pylist()
            by_job: dict[int, list[dict]] = {}
            for record in found:
                by_job.setdefault(record["jobid"], []).append(record)
            out[table] = by_job
    return out


def _seq(text: str, dtype=np.int64) -> np.ndarray:
    return np.array(text.split(":"), dtype=np.float64).astype(dtype)


def _perturbed(rows: dict, ref: int, new_id: int, rng: np.random.Generator) -> dict[str, list[dict]]:
    """Rows of every table for one perturbed copy of job `ref` (operators of `variants`)."""
    coding = _seq(rows[CODINGS][ref][0]["coding"])
    level_row = rows.get(LEVELS, {}).get(ref, [None])[0]
    levels = np.array([_seq(level_row[m]) for m in METRICS]) if level_row else None
    floats = np.array([_seq(level_row[f], np.float64) for f in FLOATS]) if level_row else None
    node_rows = rows.get(NODE_VALUES, {}).get(ref, [])
    nodes = [(r["node"], np.array([_seq(r[m], np.float64) for m in METRICS])) for r in node_rows]
    ops = [op for op in variants.choose(rng) if op != "nodes" or nodes] or ["rerun"]
    for op in ops:
        if op == "rerun":
            bits = (coding[None, :] >> BIT_METRIC[:, None]) & 1 == 1
            drop = variants.dropped_cells(bits, rng)
            coding = coding & ~(drop.astype(np.int64) << BIT_METRIC[:, None]).sum(axis=0)
            if levels is not None:
                levels[drop], floats[drop] = 0, 0.0
            nodes = [(name, np.where(drop, 0.0, v)) for name, v in nodes]
        elif op == "nodes":
            factor = float(rng.choice(variants.NODE_FACTORS))
            if factor < 1:
                nodes = nodes[: max(1, len(nodes) // 2)]
            else:
                nodes = [(f"{name}-{k}" if k else name, v) for k in range(int(factor)) for name, v in nodes]
        else:
            source = variants.segment_map(op, coding > 0, rng)
            coding = variants.apply_map(coding, source)
            if levels is not None:
                levels, floats = variants.apply_map(levels, source), variants.apply_map(floats, source)
            nodes = [(name, variants.apply_map(v, source)) for name, v in nodes]
    out = {CODINGS: [{"jobid": new_id, "coding": format_sequence(coding)}]}
    if levels is not None:
        record = {"jobid": new_id, "coding_abs": format_sequence(coding),
                  "coding_abs_aggzeros": format_sequence(aggregate_zeros(coding))}
        record.update({m: format_sequence(levels[i]) for i, m in enumerate(METRICS)})
        record.update({f: format_sequence(np.round(floats[i], 4)) for i, f in enumerate(FLOATS)})
        out[LEVELS] = [record]
    if nodes:
        out[NODE_VALUES] = [{"jobid": new_id, "node": name, **{m: format_sequence(v[i]) for i, m in enumerate(METRICS)}}
                            for name, v in nodes]
    job_row = rows.get(JOBS, {}).get(ref, [None])[0]
    if job_row:
        out[JOBS] = [{**job_row, "jobid": new_id, "nodes": max(1, len(nodes)) if nodes else job_row["nodes"],
                      "elapsed": max(1, len(coding) * SEGMENT_SECONDS - SEGMENT_SECONDS // 2)}]
    return out


# scoring an evaluation folder


class EvalSet:
    """An evaluation folder opened: its pool indexed, its references and every job's family."""

    def __init__(self, eval_dir: str | Path, workers: int = 0):
        eval_dir = Path(eval_dir)
        if not (eval_dir / EVAL_JSON).is_file():
            raise InputError(f"{eval_dir}: not a similarity evaluation folder (no {EVAL_JSON})")
        self.meta = json.loads((eval_dir / EVAL_JSON).read_text())
        self.index = SimilarityIndex.build(eval_dir / POOL)
        self.queries = pd.read_parquet(eval_dir / QUERIES)
        truth = pd.read_parquet(eval_dir / TRUTH).set_index("jobid")["family"]
        self.family = truth.reindex(self.index.jobids).fillna(-1).to_numpy(np.int64)
        self.size = np.bincount(self.family[self.family >= 0]) if (self.family >= 0).any() else np.zeros(0, int)
        self.workers = workers

    def precision(self, scorer, k: int) -> tuple[float, np.ndarray, float]:
        """Mean precision@k over the references `scorer` (jobid -> scores or None) can score; the per-reference
        values (NaN where not scorable); the self-match rate."""
        jobids = self.index.jobids
        values, selves = [], []
        for ref, family in zip(self.queries["jobid"].tolist(), self.queries["family"].tolist(), strict=True):
            scores = scorer(ref)
            if scores is None:
                values.append(np.nan)
                continue
            at = int(np.searchsorted(jobids, ref))
            selves.append(bool(np.nanmax(scores) <= scores[at]))
            k_eff = min(k, int(self.size[family]) - 1)
            top, _ = rank(scores, jobids, k_eff + 1)
            top = top[top != ref][:k_eff]
            values.append(float(np.sum(self.family[np.searchsorted(jobids, top)] == family)) / k_eff)
        values = np.array(values)
        mean = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
        return mean, values, float(np.mean(selves)) if selves else float("nan")

    def algorithm_scorer(self, algorithm: str):
        def scorer(jobid: int):
            try:
                return self.index.scores(self.index.reference(jobid), algorithm, self.workers)
            except InputError:
                return None
        return scorer

    def length_scorer(self):
        shard_lengths = np.concatenate([np.diff(np.asarray(s["coding_offsets"]))[np.asarray(s["coding_ids"])]
                                        for s in self.index.shards])

        def scorer(jobid: int):
            own = shard_lengths[np.searchsorted(self.index.jobids, jobid)]
            return 1.0 / (1.0 + np.abs(shard_lengths - own))
        return scorer

    def random_precision(self, k: int) -> float:
        """Expected precision@k of a ranking in random order."""
        n = self.index.size
        sizes = self.size[self.queries["family"].to_numpy()]
        return float(np.mean((sizes - 1) / (n - 1)))


def evaluate(bundle, eval_dir: Path, params: dict) -> dict[str, dict[str, float]]:
    """Precision@k (and self-match rate) of every algorithm the evaluation pool allows, and the baselines."""
    evalset = EvalSet(eval_dir, bundle.workers)
    k = evalset.meta["k"]
    metrics: dict[str, dict[str, float]] = {}
    for algorithm in available(evalset.index):
        mean, values, selves = evalset.precision(evalset.algorithm_scorer(algorithm), k)
        metrics[algorithm] = {PRIMARY_METRIC: mean, "self_match_rate": selves,
                              "references": float(np.isfinite(values).sum())}
    if bundle.algorithm not in metrics:
        raise InputError(f"algorithm: the evaluation pool lacks what {bundle.algorithm} needs ({NEEDS[bundle.algorithm]})")
    model = dict(metrics[bundle.algorithm])
    model.update(k=float(k), pool_jobs=float(evalset.index.size), index_jobs=float(bundle.index.size))
    for algorithm, values in metrics.items():
        model[f"{PRIMARY_METRIC}_{algorithm}"] = values[PRIMARY_METRIC]
    out = {"model": model, "random": {PRIMARY_METRIC: evalset.random_precision(k)}}
    length, _, _ = evalset.precision(evalset.length_scorer(), k)
    out["length"] = {PRIMARY_METRIC: length}
    out.update({a: v for a, v in metrics.items() if a != bundle.algorithm})
    return out


def timings(index: SimilarityIndex, workers: int = 0, repeats: int = 3,
            targets: tuple[int, ...] = TIMING_SEGMENTS) -> dict[str, float]:
    """Median seconds per 100k pool jobs of every available algorithm, for the pool's reference jobs closest
    to `targets` segments (with I/O and everything the algorithm needs)."""
    out = {}
    for algorithm in available(index):
        for target in targets:
            ref = _timing_reference(index, algorithm, target)
            if ref is None:
                continue
            index.scores(ref, algorithm, workers)  # warm: the shard's strings and pages
            spent = []
            for _ in range(repeats):
                started = time.perf_counter()
                index.scores(ref, algorithm, workers)
                spent.append(time.perf_counter() - started)
            out[f"seconds_per_100k_{algorithm}_{target}"] = float(np.median(spent)) * 100_000 / index.size
            out[f"reference_segments_{algorithm}_{target}"] = float(len(ref.coding))
    return out


def _timing_reference(index: SimilarityIndex, algorithm: str, target: int):
    """The pool job with I/O whose length is nearest `target` and that the algorithm can use as reference."""
    shard = index.shards[0]
    lengths = np.diff(np.asarray(shard["coding_offsets"]))[np.asarray(shard["coding_ids"])]
    busy_unique = np.maximum.reduceat(np.asarray(shard["coding_values"]), np.asarray(shard["coding_offsets"])[:-1]) > 0
    usable = busy_unique[np.asarray(shard["coding_ids"])]
    if NEEDS[algorithm] == LEVELS:
        usable &= np.asarray(shard["level0_ids"]) >= 0
    if NEEDS[algorithm] == NODE_VALUES:
        usable &= np.asarray(shard["ks0_ids"]) >= 0
    rows = np.flatnonzero(usable)
    if not len(rows):
        return None
    row = rows[np.argmin(np.abs(lengths[rows] - target))]
    return index.reference(int(shard["jobid"][row]))
