"""resource: script analysis throughput, hostile-input bounds, classification latency and the CV training time.

Measured in one run, printed as a table (and written to bench/out/resource_analysis.json):
- analysis (parse + every feature, `bundle.analyse`) against the seed's own work on the same scripts
  (`ast.parse` + one `ast.walk` counting its five features): scripts/s of each and the ratio;
- hostile inputs, each in a fresh process: wall time and memory of the analysis (peak above the process's
  peak before it), and what plain `ast.parse` did with the same input afterwards;
- classification latency of one script and throughput of a batch, with the trained bundle;
- the whole default evaluation (3 x 5-fold CV of all four models, then the final fit), as `make run` does it.
    python bench/resource_analysis.py [--generated 2000] [--skip-train]
"""

from __future__ import annotations

import argparse
import ast
import json
import multiprocessing as mp
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
REAL = ROOT / "jobaware" / "data" / "real" / "scripts"

HOSTILE = {
    "unary chain 100 KB": "-" * 100_000 + "1",
    "binop chain 400 KB": "a" + "+a" * 200_000,
    "call chain 400 KB": "f" + "()" * 200_000,
    "1 MB of names": "a," * 500_000 + "a",
    "1 MB flat statements": "if x:\n    pass\n" * 70_000,
    "nested brackets 200 KB": "(" * 100_000 + ")" * 100_000,
    "8 MB binary": bytes(range(256)) * 32_768,
    "4 MB syntax error": "def f(:\n    x = [1, 2\n" * 200_000,
}


def _seed_work(scripts: list[bytes]) -> int:
    done = 0
    for data in scripts:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        counts = [0] * 5
        for node in ast.walk(tree):
            counts[0] += isinstance(node, ast.For | ast.While)
            counts[1] += isinstance(node, ast.FunctionDef)
            counts[2] += isinstance(node, ast.Call)
            counts[3] += isinstance(node, ast.Load)
            counts[4] += isinstance(node, ast.Assign)
        done += 1
    return done


def _analysis(scripts: list[bytes]) -> int:
    from jobaware.resource.features import extract
    from jobaware.resource.parsing import parse_script

    return sum(1 for data in scripts if extract(parse_script(data)).status)


def _rate(function, scripts: list[bytes], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(scripts)
        times.append(time.perf_counter() - start)
    return len(scripts) / statistics.median(times)


def _hostile_child(data, queue) -> None:
    from jobaware.resource.features import extract
    from jobaware.resource.parsing import parse_script

    raw = data.encode() if isinstance(data, str) else data
    extract(parse_script(b"x = 1\n"))  # imports and first-use costs, outside the measurement
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    features = extract(parse_script(raw))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    plain_start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(raw)
        plain = "parsed"
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        plain = type(error).__name__
    queue.put({"status": features.status, "complete": features.complete, "seconds": seconds,
               "plain_ast_parse": plain, "plain_seconds": time.perf_counter() - plain_start,
               "baseline_mib": baseline, "peak_mib": peak})


def _fresh(target, *args) -> dict:
    """`target(*args, queue)` in a new process; its result, or why it gave none."""
    import queue as queues

    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            result = queue.get(timeout=1)
            process.join()
            return result
        except queues.Empty:
            if not process.is_alive():
                return {"error": f"process ended with exit code {process.exitcode}"}
    process.kill()
    return {"error": "no result within 300 s"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generated", type=int, default=2000, help="generated scripts in the throughput test")
    parser.add_argument("--skip-train", action="store_true", help="leave out the CV training time")
    args = parser.parse_args()

    from jobaware.resource.reader import ingest, read_scripts
    from jobaware.resource.synth import generate, write_synthetic
    from jobaware.resource.train import train

    results: dict = {}
    real = list(read_scripts([str(REAL)])[0]["content"])
    generated = [r["content"] for r in generate(args.generated, seed=1)]
    for name, scripts in (("real", real), ("generated", generated)):
        ours, seed = _rate(_analysis, scripts), _rate(_seed_work, scripts)
        megabytes = sum(map(len, scripts)) / 1e6
        results[f"analysis_{name}"] = {"scripts": len(scripts), "mb": round(megabytes, 3),
                                       "jobaware_scripts_per_s": round(ours, 1), "seed_scripts_per_s": round(seed, 1),
                                       "ratio_jobaware_to_seed": round(ours / seed, 3)}
    results["hostile"] = {name: _fresh(_hostile_child, data) for name, data in HOSTILE.items()}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_synthetic(tmp / "generated", 600, seed=0)
        ingest([str(REAL), str(tmp / "generated")], tmp / "data")
        params = {} if not args.skip_train else {"candidates": ["rich"], "cv_repeats": 1}
        start = time.perf_counter()
        bundle, evaluation = train(tmp / "data", params, tmp / "work")
        results["train"] = {"seconds": round(time.perf_counter() - start, 1), "params": params or "defaults",
                            "chosen": evaluation.chosen,
                            "table": evaluation.table.round(3).to_dict(orient="index")}
        one = real[5]
        latencies = []
        for _ in range(50):
            start = time.perf_counter()
            bundle.classify([one])
            latencies.append(time.perf_counter() - start)
        start = time.perf_counter()
        bundle.classify(real)
        results["classify"] = {"one_script_median_ms": round(1000 * statistics.median(latencies), 2),
                               "batch_scripts_per_s": round(len(real) / (time.perf_counter() - start), 1),
                               "model": bundle.kind}

    print("analysis (parse + all features) vs the seed's ast.parse + five counts")
    for name in ("real", "generated"):
        r = results[f"analysis_{name}"]
        print(f"  {name:10s} {r['scripts']:5d} scripts {r['mb']:7.3f} MB  jobaware {r['jobaware_scripts_per_s']:8.1f}/s"
              f"  seed {r['seed_scripts_per_s']:8.1f}/s  ratio {r['ratio_jobaware_to_seed']:.3f}")
    print("hostile inputs (fresh process each)")
    for name, r in results["hostile"].items():
        if "error" in r:
            print(f"  {name:24s} {r['error']}")
            continue
        print(f"  {name:24s} {r['status']:12s} complete={r['complete']!s:5s} {r['seconds']:6.2f} s "
              f"+{r['peak_mib'] - r['baseline_mib']:6.1f} MiB | plain ast.parse: {r['plain_ast_parse']} "
              f"in {r['plain_seconds']:.2f} s")
    c, t = results["classify"], results["train"]
    print(f"classify ({c['model']}): one script {c['one_script_median_ms']} ms (median of 50), "
          f"batch {c['batch_scripts_per_s']} scripts/s")
    print(f"training with CV ({t['params']}): {t['seconds']} s, chosen {t['chosen']}")
    for model, row in t["table"].items():
        print(f"  {model:9s} macro-F1 {row['macro_f1']:.3f} ± {row['macro_f1_std']:.3f}")
    OUT.mkdir(exist_ok=True)
    (OUT / "resource_analysis.json").write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
