"""Failure service latency (p50/p99) and throughput on loopback, single and batched, against the in-process
model on the same inputs (the peer: what the model itself costs without HTTP). Bounded request counts.
    python bench/service.py [--single 300] [--batches 60] [--batch-size 100]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def percentile(values, q):
    return float(np.percentile(np.asarray(values) * 1000, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--single", type=int, default=300)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="jobaware-bench-")
    os.environ["JOBAWARE_HOME"] = home
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    from jobaware import tracking
    from jobaware.failure.steps import log_trained
    from jobaware.failure.train import train
    from jobaware.failure.readers import read_jobs
    from jobaware.failure.readers.slurm import parse_request_jobs
    from jobaware.failure.synth import write

    data = Path(home) / "jobs.parquet"
    write(data, 100_000, "parquet", seed=2)
    jobs, _ = read_jobs(data)
    bundle, evaluation = train(jobs, {"max_iter": 100})
    run_id = log_trained(bundle, evaluation, {}, Path(home))
    tracking.promote("failure", tracking.register("failure", run_id))

    # live jobs, as a scheduler sends them: submitted after everything the model has seen ended, not yet run
    after = bundle.history["end_time"].max() + pd.Timedelta(minutes=5)
    live = jobs.tail(args.batch_size).drop(columns=["start_time", "end_time", "run_time", "state"])
    live["submit_time"] = (after + pd.to_timedelta(np.arange(len(live)), unit="s")).strftime("%Y-%m-%d %H:%M:%S")
    requests = json.loads(live.to_json(orient="records"))
    port = 3900 + os.getpid() % 1000
    process = subprocess.Popen([sys.executable.replace("python", "jobaware"), "serve", "failure", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        results = {}
        with httpx.Client(timeout=60) as client:
            for name, body, count in (("single", lambda i: [requests[i % len(requests)]], args.single),
                                      ("batch", lambda i: requests, args.batches)):
                client.post(f"{url}/predict", json={"jobs": body(0)}).raise_for_status()  # warm-up
                http, local = [], []
                for i in range(count):
                    start = time.perf_counter()
                    client.post(f"{url}/predict", json={"jobs": body(i)}).raise_for_status()
                    http.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    bundle.predict(parse_request_jobs(body(i)))
                    local.append(time.perf_counter() - start)
                jobs_per_request = len(body(0))
                results[name] = {
                    "requests": count, "jobs_per_request": jobs_per_request,
                    "http_p50_ms": round(percentile(http, 50), 1), "http_p99_ms": round(percentile(http, 99), 1),
                    "in_process_p50_ms": round(percentile(local, 50), 1),
                    "jobs_per_second": round(jobs_per_request / statistics.median(http), 1),
                    "http_over_in_process_p50": round(statistics.median(http) / statistics.median(local), 2),
                }
        print(json.dumps({"history_jobs": len(bundle.history), **results}, indent=2))
        for name, r in results.items():
            print(f"{name}: p50 {r['http_p50_ms']} ms, p99 {r['http_p99_ms']} ms over HTTP "
                  f"({r['http_over_in_process_p50']}x the in-process model), {r['jobs_per_second']} jobs/s")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


if __name__ == "__main__":
    main()
