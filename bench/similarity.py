"""Seconds per 100k jobs of the six similarity algorithms over a generated pool, against the paper, against a
bare rapidfuzz `process.cdist`, and against the plain reference implementations, all in one run.

    python bench/similarity.py --jobs 1000000 [--repeats 5] [--workers 0] [--sample 1000] [--pool DIR]

1. Generates (once, cached in --pool) a pool of --jobs jobs with every table, ingests it, builds the index
   and saves it; the benchmark queries the saved index (memory-mapped).
2. Reference jobs: the pool jobs with I/O (and at least 8 node values) whose lengths are nearest 25, 48 and
   400 segments, the paper's three references.
3. Per algorithm and reference: median seconds of --repeats queries (after one warm-up), on one core
   (workers=1) and on all cores (workers=--workers, 0 = all), as seconds per 100k pool jobs, beside the
   paper's one-core figures; the ratio paper / ours is the speed-up (target: >= 100 per core everywhere).
4. The Levenshtein algorithms against a bare `rapidfuzz.process.cdist` over the same pool (every job's
   string, no deduplication, the faster of pool-as-query and reference-as-query; Q-lev: the nine metrics):
   engine / bare must be <= 2.
5. The engine against the plain reference implementations (tests/jobaware/similarity/reference.py) on a
   sample of the pool: agreement (max |difference|) and speed-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import similarity_reference as plain  # noqa: E402
from jobaware.similarity import synth  # noqa: E402
from jobaware.similarity.algorithms import as_text, workers_for  # noqa: E402
from jobaware.similarity.index import SimilarityIndex  # noqa: E402
from jobaware.similarity.reader import ingest  # noqa: E402
from jobaware.similarity.schema import METRICS  # noqa: E402

TARGETS = (25, 48, 400)
# the paper's seconds per 100k jobs on one core (Betke & Kunkel 2021, as quoted by issue 8)
PAPER = {
    25: {"b-all": 41.0, "b-aggz": 76.2, "q-native": 272.5, "q-lev": 345.9, "q-phases": 1094, "ks": 4.2},
    48: {"b-all": 65.1, "b-aggz": 101.1, "q-native": 240.8, "q-lev": 605.0, "q-phases": 583.2, "ks": 39.9},
    400: {"b-all": 433.4, "b-aggz": 471.7, "q-native": 1736, "q-lev": 3699, "q-phases": 491.3, "ks": 36.3},
}
ORDER = ("b-all", "b-aggz", "q-native", "q-lev", "q-phases", "ks")


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def prepare(pool: Path, jobs: int) -> SimilarityIndex:
    files, dataset, saved = pool / "files", pool / "dataset", pool / "index"
    if not (files / synth.FILES[synth.FAMILIES]).is_file():
        started = time.perf_counter()
        synth.write_synthetic(files, jobs, seed=0)
        print(f"generated {jobs:,} jobs in {time.perf_counter() - started:.0f} s")
    if not (dataset / "read.done").is_file():
        started = time.perf_counter()
        report = ingest([str(files)], dataset)
        (dataset / "read.done").write_text(json.dumps(report.as_dict()))
        print(f"ingested {report.rows:,} records ({report.bad_rows} bad) in {time.perf_counter() - started:.0f} s")
    if not (saved / "index.json").is_file():
        started = time.perf_counter()
        SimilarityIndex.build(dataset).save(saved)
        print(f"built and saved the index in {time.perf_counter() - started:.0f} s")
    return SimilarityIndex.load(saved)


def references(index: SimilarityIndex) -> dict[int, int]:
    """Target length -> jobid of the pool job with I/O, levels and >= 8 node values nearest the target from
    above (nearest overall when no job is that long)."""
    shard = index.shards[0]
    ids = np.asarray(shard["coding_ids"])
    lengths = np.diff(np.asarray(shard["coding_offsets"]))[ids]
    busy = (np.maximum.reduceat(np.asarray(shard["coding_values"]), np.asarray(shard["coding_offsets"])[:-1]) > 0)[ids]
    usable = busy & (np.asarray(shard["level0_ids"]) >= 0) & (np.asarray(shard["ks0_ids"]) >= 0)
    rows = np.flatnonzero(usable)
    chosen = {}
    for target in TARGETS:
        long_enough = rows[lengths[rows] >= target]
        pick = long_enough if len(long_enough) else rows  # at least the target's length where the pool has one
        chosen[target] = int(shard["jobid"][pick[np.argmin(np.abs(lengths[pick] - target))]])
    return chosen


def median_seconds(run, repeats: int) -> float:
    run()  # warm-up: string caches, memory-mapped pages
    spent = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        spent.append(time.perf_counter() - started)
    return statistics.median(spent)


def bare_cdist(reference: str, pool: list[str], workers: int, repeats: int) -> float:
    """The faster of the two ways to give rapidfuzz the pool: as queries (parallel) or as choices."""
    score = Levenshtein.normalized_similarity
    as_queries = median_seconds(lambda: process.cdist(pool, [reference], scorer=score, dtype=np.float64,
                                                      workers=workers), repeats)
    as_choices = median_seconds(lambda: process.cdist([reference], pool, scorer=score, dtype=np.float64,
                                                      workers=workers), repeats)
    return min(as_queries, as_choices)


def pool_strings(index: SimilarityIndex, name: str) -> list[str]:
    """Every job's string (not deduplicated), as a bare benchmark would hold the pool."""
    shard = index.shards[0]
    unique = shard.strings(name)
    return [unique[i] for i in np.asarray(shard[f"{name}_ids"]).tolist()]


def enumerable(reference: dict, job: dict, limit: int = 20_000) -> bool:
    """Whether the plain Q-phases (every attachment enumerated) stays within `limit` attachments per metric."""
    from math import comb

    for a, b in zip(reference["levels"], job["levels"], strict=True):
        p, q = len(plain.phases_of(a)), len(plain.phases_of(b))
        if comb(max(p, q), min(p, q)) > limit:
            return False
    return True


def sample_index(dataset: Path, jobids: np.ndarray) -> SimilarityIndex:
    """An index of just the sample jobs (their rows of every table)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = pc.field("jobid").isin(pa.array(jobids))
    tables = {p.stem: pq.read_table(p, filters=wanted) for p in dataset.glob("mistral_*.parquet")}
    return SimilarityIndex.from_tables(tables)


def plain_job(index: SimilarityIndex, jobid: int) -> dict:
    ref = index.reference(jobid)
    return {"coding": ref.coding.tolist(), "levels": [v.tolist() for v in ref.levels],
            "values": [v.tolist() for v in ref.values] if ref.values is not None else [[]] * 9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=0, help="threads for the all-core runs (0 = all cores)")
    parser.add_argument("--sample", type=int, default=1000, help="pool jobs compared with the plain reference")
    parser.add_argument("--pool", type=Path, default=None, help="cache folder of the generated pool")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    pool = args.pool or Path(tempfile.gettempdir()) / f"jobaware-bench-similarity-{args.jobs}"
    cores = workers_for(args.workers)
    print(f"load before: {load()}; cores used for 'all': {cores}")
    index = prepare(pool, args.jobs)
    n = index.size
    per_100k = 100_000 / n
    refs = references(index)
    lengths = {t: len(index.reference(j).coding) for t, j in refs.items()}
    print(f"pool: {n:,} jobs; references (target -> jobid, segments): "
          + ", ".join(f"{t} -> {j} ({lengths[t]})" for t, j in refs.items()))
    results: dict = {"jobs": n, "cores": cores, "references": {str(t): [refs[t], lengths[t]] for t in refs},
                     "engine": {}, "bare": {}, "plain": {}}

    # 3. engine: one core and all cores
    for target, jobid in refs.items():
        reference = index.reference(jobid)
        for algorithm in ORDER:
            one = median_seconds(lambda: index.scores(reference, algorithm, 1), args.repeats) * per_100k
            every = median_seconds(lambda: index.scores(reference, algorithm, args.workers), args.repeats) * per_100k
            results["engine"][f"{algorithm}/{target}"] = {"one_core": one, "all_cores": every}
    print(f"\nSeconds per 100k jobs (median of {args.repeats}); speed-up = paper / jobaware\n")
    print(f"| reference | algorithm | paper (1 core) | jobaware 1 core | speed-up per core | jobaware {cores} cores | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for target in TARGETS:
        for algorithm in ORDER:
            r = results["engine"][f"{algorithm}/{target}"]
            paper = PAPER[target][algorithm]
            print(f"| {target} ({lengths[target]}) seg | {algorithm} | {paper:g} | {r['one_core']:.4f} | "
                  f"{paper / r['one_core']:,.0f}x | {r['all_cores']:.4f} | {paper / r['all_cores']:,.0f}x |")

    # 4. against a bare rapidfuzz.process.cdist over the same pool
    strings = {"b-all": pool_strings(index, "coding"), "b-aggz": pool_strings(index, "aggz")}
    level_strings = [[index.shards[0].strings(f"level{m}")[i] for i in np.asarray(index.shards[0][f"level{m}_ids"]).tolist()]
                     for m in range(len(METRICS))]
    print("\nLevenshtein algorithms against a bare rapidfuzz.process.cdist over the same pool (seconds per 100k)\n")
    print("| reference | algorithm | workers | bare cdist | jobaware | jobaware / bare | bare codings/s per core |")
    print("|---|---|---|---|---|---|---|")
    for target, jobid in refs.items():
        ref = index.reference(jobid)
        texts = {"b-all": as_text(ref.coding), "b-aggz": as_text(np.array(plain.collapse_zeros(ref.coding.tolist())))}
        for algorithm in ("b-all", "b-aggz", "q-lev"):
            for workers, label in ((1, "one_core"), (args.workers, "all_cores")):
                if algorithm == "q-lev":
                    bare = sum(bare_cdist(as_text(ref.levels[m]), level_strings[m], workers, args.repeats)
                               for m in range(len(METRICS)))
                else:
                    bare = bare_cdist(texts[algorithm], strings[algorithm], workers, args.repeats)
                ours = results["engine"][f"{algorithm}/{target}"][label] / per_100k
                results["bare"][f"{algorithm}/{target}/{label}"] = {"bare": bare * per_100k, "engine": ours * per_100k}
                rate = n * (9 if algorithm == "q-lev" else 1) / bare / (1 if workers == 1 else cores)
                print(f"| {target} seg | {algorithm} | {workers_for(workers)} | {bare * per_100k:.4f} | "
                      f"{ours * per_100k:.4f} | {ours / bare:.2f} | {rate / 1e6:.2f} M |")

    # 5. against the plain reference implementations on a sample of the pool
    rng = np.random.default_rng(0)
    jobids = index.jobids
    short = [j for j in rng.choice(jobids, 20 * args.sample, replace=False).tolist()
             if len(index.reference(j).coding) <= 60][: args.sample]
    sample = np.array(sorted(short))
    jobs = [plain_job(index, j) for j in sample.tolist()]
    small = sample_index(pool / "dataset", sample)
    print(f"\nEngine against the plain reference implementation on the same {len(sample)} pool jobs (of <= 60 "
          f"segments, so that every Q-phases attachment can be enumerated); seconds per 100k, one core\n")
    print("| reference | algorithm | plain | jobaware on the sample | speed-up | jobaware on the pool | max abs difference |")
    print("|---|---|---|---|---|---|---|")
    for target, jobid in refs.items():
        reference = plain_job(index, jobid)
        inline = index.reference(jobid)
        for algorithm in ORDER:
            implementation = plain.REFERENCE[algorithm]
            keep = np.array([algorithm != "q-phases" or enumerable(reference, job) for job in jobs])
            started = time.perf_counter()
            expected = np.array([implementation(reference, job) for job, k in zip(jobs, keep) if k], dtype=float)
            plain_seconds = (time.perf_counter() - started) / keep.sum() * 100_000
            engine = median_seconds(lambda: small.scores(inline, algorithm, 1), args.repeats) / len(sample) * 100_000
            got = small.scores(inline, algorithm, 1)[keep]
            both = np.isfinite(expected)
            assert np.array_equal(np.isnan(got), ~both), algorithm
            difference = float(np.max(np.abs(got[both] - expected[both]))) if both.any() else 0.0
            ours = results["engine"][f"{algorithm}/{target}"]["one_core"]
            results["plain"][f"{algorithm}/{target}"] = {"plain": plain_seconds, "engine_sample": engine,
                                                         "difference": difference, "pairs": int(keep.sum())}
            print(f"| {target} seg | {algorithm} | {plain_seconds:,.1f} | {engine:.3f} | {plain_seconds / engine:,.0f}x | "
                  f"{ours:.4f} | {difference:.1e} ({keep.sum()} pairs) |")
    print(f"\nload after: {load()}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
