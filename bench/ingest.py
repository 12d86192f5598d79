"""Ingest + validate + featurize throughput and peak memory, against plain pandas.read_csv of the same file.

Each measurement (the peer; each jobaware step) runs in a fresh process, so its peak RSS is its own; repeated,
interleaved; medians and ratios are printed. Each step's time includes its imports (Great Expectations' is about
3 s), as the step's own process spends it. Featurizing works window by window (`featurize_file`), so its peak
memory depends on the window and the number of entities, not on the number of jobs.
    python bench/ingest.py --jobs 1000000 [--repeats 3] [--no-featurize] [--train]

With --train the path goes on to the end: fit the model on its training sample (at most `max_train_rows` jobs, a
seeded draw), bundle the history, and evaluate the model and its baselines on every test job.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fresh import measure  # bench/fresh.py (this folder is on sys.path when a script here runs)

OUT = Path(__file__).resolve().parent / "out"
STEPS = ("ingest", "validate", "featurize", "train", "evaluate")


def _pandas_read_csv(path: str) -> dict:
    start = time.perf_counter()
    import pandas as pd

    frame = pd.read_csv(path)
    return {"seconds": time.perf_counter() - start, "rows": len(frame)}


def _arrow_typed_parse(path: str) -> dict:
    """What any ingest through Arrow spends first: Arrow's multi-threaded parse of the file into the column types
    jobaware reads (no checks, no canonical table, no Parquet)."""
    start = time.perf_counter()
    import pyarrow.csv as pacsv

    from jobaware.jobtable.nrel import FAST_BLOCK_BYTES, FAST_TYPES

    table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(block_size=FAST_BLOCK_BYTES),
                           convert_options=pacsv.ConvertOptions(column_types=FAST_TYPES))
    return {"seconds": time.perf_counter() - start, "rows": table.num_rows}


def _polars_csv_to_parquet(path: str, folder: str) -> dict:
    """A CSV-to-Parquet conversion by polars' streaming engine, typed as jobaware types it (no checks)."""
    start = time.perf_counter()
    import polars as pl

    from jobaware.jobtable.nrel import FAST_TYPES

    types = {"int64": pl.Int64, "double": pl.Float64, "string": pl.String}
    schema = {name: types[str(kind)] for name, kind in FAST_TYPES.items()}
    with open(path) as handle:
        header = handle.readline().strip().split(",")
    out = Path(folder) / "polars.parquet"
    pl.scan_csv(path, schema={name: schema.get(name, pl.String) for name in header}).sink_parquet(out)
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    out.unlink()
    return {"seconds": time.perf_counter() - start, "rows": rows}


def _ingest(path: str, folder: str) -> dict:
    start = time.perf_counter()
    from jobaware.failure.reader import ingest

    report = ingest([path], folder)
    return {"seconds": time.perf_counter() - start, "rows": report.rows}


def _validate(folder: str) -> dict:
    start = time.perf_counter()
    from jobaware.contracts import validate_parquet

    contract = validate_parquet(Path(folder) / "nrel_jobs.parquet", "nrel_jobs")
    assert contract["success"], contract["failed"]
    return {"seconds": time.perf_counter() - start}


def _featurize(folder: str) -> dict:
    start = time.perf_counter()
    import pyarrow.parquet as pq

    from jobaware.failure.train import featurize_file

    featurize_file(Path(folder) / "nrel_jobs.parquet", Path(folder) / "features.parquet")  # window by window
    return {"seconds": time.perf_counter() - start, "rows": pq.ParquetFile(Path(folder) / "features.parquet").metadata.num_rows}


def _train(folder: str) -> dict:
    start = time.perf_counter()
    import joblib

    from jobaware.failure.bundle import FailureBundle
    from jobaware.failure.train import FeatureTable, fit

    bundle = fit(FeatureTable(Path(folder) / "features.parquet"),
                 FailureBundle.history_tail_file(Path(folder) / "nrel_jobs.parquet"), {})
    joblib.dump(bundle, Path(folder) / "model.joblib")
    return {"seconds": time.perf_counter() - start}


def _evaluate(folder: str, truth: str) -> dict:
    start = time.perf_counter()
    import joblib
    import pandas as pd

    from jobaware.failure.synth import TRUTH_FOR_SCORES
    from jobaware.failure.train import FeatureTable, evaluate

    evaluation = evaluate(joblib.load(Path(folder) / "model.joblib"), FeatureTable(Path(folder) / "features.parquet"),
                          {}, pd.read_parquet(truth, columns=TRUTH_FOR_SCORES), Path(folder) / "plots")
    model = evaluation.primary
    return {"seconds": time.perf_counter() - start, "test_rows": model["test_rows"], "fit_rows": model["fit_rows"],
            "train_rows": model["train_rows"], "roc_auc": round(model["roc_auc"], 4),
            "gap_to_bayes": round(model["gap_to_bayes"], 4)}


def _jobaware(path: str, featurize: bool, train: bool) -> dict:
    """Each step in its own fresh process (its peak memory its own), on files the step before wrote."""
    with tempfile.TemporaryDirectory() as folder:
        steps = {"ingest": measure(_ingest, path, folder), "validate": measure(_validate, folder)}
        if featurize:
            steps["featurize"] = measure(_featurize, folder)
            assert steps["featurize"]["rows"] == steps["ingest"]["rows"]
        if train:
            steps["train"] = measure(_train, folder)
            steps["evaluate"] = measure(_evaluate, folder, str(Path(path).with_suffix(".truth.parquet")))
            print(f"trained on {steps['evaluate']['fit_rows']:,} of {steps['evaluate']['train_rows']:,} training "
                  f"jobs, evaluated on every one of {steps['evaluate']['test_rows']:,} test jobs: ROC-AUC "
                  f"{steps['evaluate']['roc_auc']}, gap to Bayes {steps['evaluate']['gap_to_bayes']}", file=sys.stderr)
    return {"seconds": sum(step["seconds"] for step in steps.values()), "rows": steps["ingest"]["rows"],
            "peak_mib": max(step["peak_mib"] for step in steps.values()),
            **{name: step["seconds"] for name, step in steps.items()},
            **{f"{name}_peak_mib": step["peak_mib"] for name, step in steps.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-featurize", action="store_true", help="ingest + validate only")
    parser.add_argument("--train", action="store_true", help="then fit (on the stated sample) and evaluate every test job")
    args = parser.parse_args()
    from jobaware.failure.synth import write

    OUT.mkdir(exist_ok=True)
    data = OUT / f"jobs_{args.jobs}.csv"
    if not data.exists():
        print(f"generating {args.jobs:,} jobs into {data} ...", file=sys.stderr)
        write(data, args.jobs, "csv", seed=1)
    runs = {"pandas.read_csv": [], "pyarrow.csv.read_csv (typed)": [], "jobaware": []}
    polars = importlib.util.find_spec("polars") is not None  # `pip install -e '.[bench]'` (make bench) brings it
    if polars:
        runs["polars CSV to Parquet"] = []
    for _ in range(args.repeats):  # interleaved, so drift hits all alike
        runs["pandas.read_csv"].append(measure(_pandas_read_csv, str(data)))
        runs["pyarrow.csv.read_csv (typed)"].append(measure(_arrow_typed_parse, str(data)))
        if polars:
            with tempfile.TemporaryDirectory() as folder:
                runs["polars CSV to Parquet"].append(measure(_polars_csv_to_parquet, str(data), folder))
        runs["jobaware"].append(_jobaware(str(data), not args.no_featurize, args.train))
    summary = {}
    for name, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        summary[name] = {
            "median_seconds": round(seconds, 2),
            "rows_per_second": round(results[0]["rows"] / seconds),
            "median_peak_mib": round(statistics.median(r["peak_mib"] for r in results)),
            **{f"median_{k}_seconds": round(statistics.median(r[k] for r in results), 2)
               for k in STEPS if k in results[0]},
            **{f"median_{k}_peak_mib": round(statistics.median(r[f"{k}_peak_mib"] for r in results))
               for k in STEPS if k in results[0]},
        }
    jw, pd_ = summary["jobaware"], summary["pandas.read_csv"]
    steps = " + ".join(k for k in STEPS if f"median_{k}_seconds" in jw)
    print(json.dumps({"jobs": args.jobs, "file_mib": round(data.stat().st_size / 2**20), "repeats": args.repeats,
                      "steps": steps, **summary}, indent=2))
    print(f"{args.jobs:,} jobs: jobaware {steps} takes {jw['median_seconds'] / pd_['median_seconds']:.2f}x the time of "
          f"pandas.read_csv alone; peak memory of the largest step {jw['median_peak_mib'] / pd_['median_peak_mib']:.2f}x")
    print(f"ingest alone: {jw['median_ingest_seconds'] / pd_['median_seconds']:.2f}x pandas.read_csv "
          f"(target: at most 1x: {'met' if jw['median_ingest_seconds'] <= pd_['median_seconds'] else 'missed'})")
    for peer in ("pyarrow.csv.read_csv (typed)", "polars CSV to Parquet"):
        if peer in summary:
            seconds = summary[peer]["median_seconds"]
            print(f"  {peer}: {seconds / pd_['median_seconds']:.2f}x pandas.read_csv; "
                  f"jobaware's ingest {jw['median_ingest_seconds'] / seconds:.2f}x it")
    validate, ingest = jw["median_validate_seconds"], jw["median_ingest_seconds"]
    print(f"contract (validate) {validate / ingest:.2f}x ingest (target: at most 1x: {'met' if validate <= ingest else 'missed'})")
    for step in STEPS[2:]:
        if f"median_{step}_peak_mib" in jw:
            peak = jw[f"median_{step}_peak_mib"]
            print(f"{step} peak memory: {peak:,} MiB (target: at most 4 GiB: {'met' if peak <= 4096 else 'missed'})")


if __name__ == "__main__":
    main()
