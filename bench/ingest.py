"""Ingest + validate + featurize throughput and peak memory, against plain pandas.read_csv of the same file.

Each measurement runs in a fresh process (so its peak RSS is its own), repeated; medians and ratios are printed.
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


def _jobaware(path: str, featurize: bool) -> dict:
    import pyarrow.parquet as pq

    from jobaware.contracts import validate_parquet
    from jobaware.failure.readers import ingest
    from jobaware.failure.train import featurize_file

    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        canonical = Path(tmp) / "nrel_jobs.parquet"
        start = time.perf_counter()
        report = ingest([path], tmp)
        times["ingest"] = time.perf_counter() - start
        start = time.perf_counter()
        contract = validate_parquet(canonical, "nrel_jobs")
        times["validate"] = time.perf_counter() - start
        if featurize:
            start = time.perf_counter()
            featurize_file(canonical, Path(tmp) / "features.parquet")  # window by window
            times["featurize"] = time.perf_counter() - start
            assert pq.ParquetFile(Path(tmp) / "features.parquet").metadata.num_rows == report.rows
    assert contract["success"], contract["failed"]
    return {"seconds": sum(times.values()), "rows": report.rows, **times}


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
        runs["jobaware"].append(measure(_jobaware, str(data), not args.no_featurize))
    summary = {}
    for name, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        summary[name] = {
            "median_seconds": round(seconds, 2),
            "rows_per_second": round(results[0]["rows"] / seconds),
            "median_peak_mib": round(statistics.median(r["peak_mib"] for r in results)),
            **{f"median_{k}_seconds": round(statistics.median(r[k] for r in results), 2)
               for k in ("ingest", "validate", "featurize") if k in results[0]},
        }
    jw, pd_ = summary["jobaware"], summary["pandas.read_csv"]
    steps = "ingest + validate" + ("" if args.no_featurize else " + featurize")
    print(json.dumps({"jobs": args.jobs, "file_mib": round(data.stat().st_size / 2**20), "repeats": args.repeats,
                      "steps": steps, **summary}, indent=2))
    print(f"{args.jobs:,} jobs: jobaware {steps} takes {jw['median_seconds'] / pd_['median_seconds']:.2f}x the time of "
          f"pandas.read_csv alone; peak memory {jw['median_peak_mib'] / pd_['median_peak_mib']:.2f}x")


if __name__ == "__main__":
    main()
