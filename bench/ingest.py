"""Ingest + validate + featurize throughput and peak memory, against plain pandas.read_csv of the same file.

Each measurement (the peer; each jobaware step) runs in a fresh process, so its peak RSS is its own; repeated,
interleaved; medians and ratios are printed. Featurizing works window by window (`featurize_file`), so its peak
memory depends on the window and the number of entities, not on the number of jobs.
    python bench/ingest.py --jobs 1000000 [--repeats 3] [--no-featurize]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fresh import measure  # bench/fresh.py (this folder is on sys.path when a script here runs)

OUT = Path(__file__).resolve().parent / "out"


def _pandas_read_csv(path: str) -> dict:
    import pandas as pd

    start = time.perf_counter()
    frame = pd.read_csv(path)
    return {"seconds": time.perf_counter() - start, "rows": len(frame)}


def _ingest(path: str, folder: str) -> dict:
    from jobaware.failure.readers import ingest

    start = time.perf_counter()
    report = ingest([path], folder)
    return {"seconds": time.perf_counter() - start, "rows": report.rows}


def _validate(folder: str) -> dict:
    from jobaware.contracts import validate_parquet

    start = time.perf_counter()
    contract = validate_parquet(Path(folder) / "nrel_jobs.parquet", "nrel_jobs")
    assert contract["success"], contract["failed"]
    return {"seconds": time.perf_counter() - start}


def _featurize(folder: str) -> dict:
    import pyarrow.parquet as pq

    from jobaware.failure.train import featurize_file

    start = time.perf_counter()
    featurize_file(Path(folder) / "nrel_jobs.parquet", Path(folder) / "features.parquet")  # window by window
    return {"seconds": time.perf_counter() - start, "rows": pq.ParquetFile(Path(folder) / "features.parquet").metadata.num_rows}


def _jobaware(path: str, featurize: bool) -> dict:
    """Each step in its own fresh process (its peak memory its own), on files the step before wrote."""
    with tempfile.TemporaryDirectory() as folder:
        steps = {"ingest": measure(_ingest, path, folder), "validate": measure(_validate, folder)}
        if featurize:
            steps["featurize"] = measure(_featurize, folder)
            assert steps["featurize"]["rows"] == steps["ingest"]["rows"]
    return {"seconds": sum(step["seconds"] for step in steps.values()), "rows": steps["ingest"]["rows"],
            "peak_mib": max(step["peak_mib"] for step in steps.values()),
            **{name: step["seconds"] for name, step in steps.items()},
            **{f"{name}_peak_mib": step["peak_mib"] for name, step in steps.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-featurize", action="store_true", help="ingest + validate only")
    args = parser.parse_args()
    from jobaware.failure.synth import write

    OUT.mkdir(exist_ok=True)
    data = OUT / f"jobs_{args.jobs}.csv"
    if not data.exists():
        print(f"generating {args.jobs:,} jobs into {data} ...", file=sys.stderr)
        write(data, args.jobs, "csv", seed=1)
    runs = {"pandas.read_csv": [], "jobaware": []}
    for _ in range(args.repeats):  # interleaved, so drift hits both alike
        runs["pandas.read_csv"].append(measure(_pandas_read_csv, str(data)))
        runs["jobaware"].append(_jobaware(str(data), not args.no_featurize))
    summary = {}
    for name, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        summary[name] = {
            "median_seconds": round(seconds, 2),
            "rows_per_second": round(results[0]["rows"] / seconds),
            "median_peak_mib": round(statistics.median(r["peak_mib"] for r in results)),
            **{f"median_{k}_seconds": round(statistics.median(r[k] for r in results), 2)
               for k in ("ingest", "validate", "featurize") if k in results[0]},
            **{f"median_{k}_peak_mib": round(statistics.median(r[f"{k}_peak_mib"] for r in results))
               for k in ("ingest", "validate", "featurize") if k in results[0]},
        }
    jw, pd_ = summary["jobaware"], summary["pandas.read_csv"]
    steps = "ingest + validate" + ("" if args.no_featurize else " + featurize")
    print(json.dumps({"jobs": args.jobs, "file_mib": round(data.stat().st_size / 2**20), "repeats": args.repeats,
                      "steps": steps, **summary}, indent=2))
    print(f"{args.jobs:,} jobs: jobaware {steps} takes {jw['median_seconds'] / pd_['median_seconds']:.2f}x the time of "
          f"pandas.read_csv alone; peak memory of the largest step {jw['median_peak_mib'] / pd_['median_peak_mib']:.2f}x")
    print(f"ingest alone: {jw['median_ingest_seconds'] / pd_['median_seconds']:.2f}x pandas.read_csv "
          f"(target: at most 1x: {'met' if jw['median_ingest_seconds'] <= pd_['median_seconds'] else 'missed'})")
    if not args.no_featurize:
        peak = jw["median_featurize_peak_mib"]
        print(f"featurize peak memory: {peak:,} MiB (target: at most 4 GiB: {'met' if peak <= 4096 else 'missed'})")


if __name__ == "__main__":
    main()
