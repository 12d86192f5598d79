"""`report jobs` and `report waste` over a week of jobs with an array of 10,000 tasks: what they cost against the
peer of reading the same records from the store (the least any report over them can do), one run.

Fills an SQLite store with `--jobs` single jobs (default 50,000) over 7 days and one array of `--tasks` tasks
(default 10,000), each with its use (the collector's `usage` dict), and an adapter's card for one job in two.
Then, each in a fresh process (so that its peak memory is its own): reading every record of the week with its
predictions (`store.records`, the peer), `report jobs` over the week (200 rows, every job in the totals and
plots), `report jobs --job ARRAY` (the array alone, as one row) and `report waste`. Prints each one's time (median
of `--repeats`), the memory it took past its imports (peak resident), and the ratio of each to the peer's.

    python bench/report_jobs.py [--jobs 50000] [--tasks 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CLUSTER = "bench"
NOW = 1_780_000_000
ARRAY = 9_000_000
WORK = {
    "read": "sum(1 for _ in store.records(None, since, until, newest_first=True, predictions=''))",
    "report jobs": "report(store, Filters(since=since, until=until)).jobs",
    "report jobs --job ARRAY": f"report(store, Filters(since=since, until=until, jobs=[({ARRAY}, None)])).rows[0]['tasks']",
    "report waste": "waste(store, Filters(since=since, until=until))[1]['jobs']",
}


def fill(uri: str, jobs: int, tasks: int) -> None:
    from jobaware.store import JobKey, open_store

    rng = random.Random(7)
    states = ("COMPLETED",) * 8 + ("FAILED", "TIMEOUT")

    def record(job_id: int, submit: int, array_task: int | None) -> dict:
        cpus, limit = rng.choice((1, 4, 16)), rng.choice((600, 3600, 14_400))
        elapsed = rng.randint(10, limit)
        state = rng.choice(states)
        usage = {"source": "sacct", "state": state, "elapsed_s": elapsed, "time_limit_s": limit, "cpus": cpus,
                 "cpu_time_s": elapsed * cpus * rng.random(), "nodes": 1, "gpus": 0, "mem_req_mib": cpus * 2000.0,
                 "mem_used_mib": cpus * 2000.0 * rng.random(), "mem_step": "batch", "exit_code": 0, "signal": None}
        if array_task is not None:
            usage.update(array_job_id=ARRAY, array_task_id=array_task)
        user = f"user{rng.randrange(200)}"
        return {"cluster": CLUSTER, "job_id": job_id, "submit_time": submit, "script": None, "usage": usage,
                "row": {"user": user, "account": f"proj{rng.randrange(40)}", "partition": "standard",
                        "name": f"run{job_id}", "start_time": submit + 60, "end_time": submit + 60 + elapsed,
                        "state": state},
                "states": [{"state": "PENDING", "time": float(submit)}, {"state": state, "time": submit + 60.0 + elapsed}],
                "final": {"state": state, "source": "sacct", "exit_code": 0, "signal": None}}

    with open_store(uri) as store, store.batch():
        for i in range(jobs):
            submit = NOW - 7 * 86_400 + i * 7 * 86_400 // jobs
            store.put_record(record(i + 1, submit, None))
            if i % 2 == 0:
                store.put_prediction(JobKey(CLUSTER, i + 1, submit), "adapter:failure=3", {"card": {
                    "created": submit + 1.0, "parts": {"failure": {"status": "ok", "p_fail": rng.random(),
                                                                   "likely": "TIMEOUT", "model_version": "3"}}}})
        for task in range(tasks):
            store.put_record(record(ARRAY + task, NOW - 3 * 86_400, task))


def measure(uri: str, name: str) -> dict:
    """One work in a fresh process: its seconds and the resident memory it took past its imports."""
    code = f"""
import json, resource, sys, time
sys.path.insert(0, {str(ROOT)!r})
from jobaware.store import open_store
from jobaware.usage.jobs import Filters, report
from jobaware.usage.waste import waste
store = open_store({uri!r})
since, until = {NOW - 8 * 86_400}, {NOW}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
result = {WORK[name]}
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
                  "result": result}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        uri = str(Path(scratch) / "store")
        started = time.perf_counter()
        fill(uri, args.jobs, args.tasks)
        print(f"filled {args.jobs:,} jobs and an array of {args.tasks:,} tasks in {time.perf_counter() - started:.1f} s")
        results = {}
        for name in WORK:
            runs = [measure(uri, name) for _ in range(args.repeats)]
            results[name] = {"seconds": statistics.median(r["seconds"] for r in runs),
                             "mib": statistics.median(r["mib"] for r in runs), "result": runs[0]["result"]}
    peer = results["read"]
    print(f"{'work':<26}{'seconds':>9}{'x read':>8}{'MiB':>8}{'x read':>8}  result")
    for name, found in results.items():
        print(f"{name:<26}{found['seconds']:>9.2f}{found['seconds'] / peer['seconds']:>8.2f}{found['mib']:>8.0f}"
              f"{found['mib'] / max(peer['mib'], 1):>8.2f}  {found['result']}")


if __name__ == "__main__":
    main()
