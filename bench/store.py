"""The job store's queries at a site's size: SQLite and Redis against the folder log (the reference), one run.

Fills each backend with the same `--jobs` jobs (default 200,000) over 180 days of submit times: a canonical row,
three state changes, a final state for all but the last day's, a batch script for one in four, and an adapter
verdict (a job card) for one in two. Then, for each backend in a fresh process (so that its peak memory is its
own): opening the store, the adapter's verdict cache (`cached_verdicts`: the last 30 days, newest first, with
their verdicts), a cluster's open jobs, the verdicts by name over 30 days, and 1,000 single reads. Prints the time
of each (median of `--repeats`), the memory it took (the process's peak resident memory past what its imports
took), and each figure's ratio to the folder log's.
Redis is Debian's `redis-server`, started here on a free port (left out when it is not installed).

    python bench/store.py [--jobs 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobaware.store import JobKey, open_store  # noqa: E402

CLUSTER = "bench"
DAY = 86_400
NOW = 1_800_000_000
STATES = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY")


def submit_time(i: int) -> int:
    return NOW - 180 * DAY + i * (180 * DAY) // ARGS.jobs


def job(i: int, rng: random.Random) -> tuple[dict, dict | None]:
    """The i-th job's record and its verdict (or None)."""
    submit = submit_time(i)
    user, partition = f"user{rng.randrange(300)}", rng.choice(("short", "standard", "long", "gpu"))
    minutes, cpus = rng.choice((10, 30, 60, 240, 1440)), rng.choice((1, 4, 16, 36))
    row = {"job_id": i, "user": user, "account": f"proj{rng.randrange(50)}", "partition": partition, "qos": "normal",
           "name": f"run{rng.randrange(1000)}.sh", "work_dir": f"/home/{user}/w{rng.randrange(20)}",
           "wallclock_req": minutes * 60.0, "nodes_req": 1, "processors_req": cpus, "gpus_req": 0,
           "mem_req": cpus * 2000.0, "submit_time": submit, "start_time": submit + 60, "end_time": submit + 600,
           "run_time": 540.0, "state": "COMPLETED", "submit_line": None}
    ended = submit < NOW - DAY
    final = {"state": rng.choice(STATES), "source": "sacct", "exit_code": 0, "signal": None} if ended else None
    record = {"cluster": CLUSTER, "job_id": i, "submit_time": submit, "row": row, "final": final,
              "states": [{"state": s, "time": submit + k * 60.0} for k, s in enumerate(("PENDING", "RUNNING"))]
              + ([{"state": final["state"], "time": submit + 600.0}] if final else []),
              "script": f"#!/bin/bash\n#SBATCH -t {minutes}\nsrun ./run {i}\n" * 8 if i % 4 == 0 else None}
    verdict = None
    if i % 2 == 0:
        p = round(rng.random(), 3)
        verdict = {"dry_run": False, "acts": [], "card": {"job_id": i, "short": f"jobaware: p(fail)={p}", "missing": [],
                   "parts": {"failure": {"status": "ok", "p_fail": p, "likely": "TIMEOUT", "likely_fail": p >= 0.5,
                                         "threshold": 0.5, "model_version": "3"},
                             "resource": {"status": "ok", "binding": "cpu", "model_version": "2"}}}}
    return record, verdict


def fill(uri: str) -> float:
    rng = random.Random(7)
    started = time.perf_counter()
    with open_store(uri) as store, store.batch():
        for i in range(ARGS.jobs):
            record, verdict = job(i, rng)
            store.put_record(record)
            if verdict:
                store.put_prediction(JobKey(CLUSTER, i, record["submit_time"]), "adapter:failure=3,resource=2", verdict)
    return time.perf_counter() - started


def timed(function, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def query(uri: str, repeats: int) -> dict:
    """Each query's median time, what it found, and the peak memory of this process (run in a fresh one)."""
    import jobaware.store.local  # noqa: F401 - imports are not the store's cost
    import jobaware.store.redis  # noqa: F401
    import jobaware.store.sqlite  # noqa: F401
    from jobaware.adapters.slurm.adapter import Policy, cached_verdicts

    since = NOW - 30 * DAY
    before = resident_mib()
    opened, store = timed(lambda: open_store(uri), 1)
    sample = [JobKey(CLUSTER, i, submit_time(i)) for i in random.Random(1).sample(range(ARGS.jobs), 1000)]
    figures = {"open": opened}
    for name, function in {
        "verdict cache (30 days)": lambda: len(cached_verdicts(store, CLUSTER, Policy(), now=NOW)),
        "open jobs": lambda: len(store.open_keys(CLUSTER)),
        "verdicts by name (30 days)": lambda: sum(1 for _ in store.predictions_by_name("adapter:", CLUSTER, since)),
        "1,000 reads": lambda: sum(store.get(k) is not None for k in sample),
    }.items():
        figures[name], found = timed(function, repeats)
        figures[f"{name} found"] = found
    store.close()
    figures["MiB"] = status_mib("VmHWM") - before
    return figures


def status_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS: resident now; VmHWM: the peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def resident_mib() -> float:
    """This process's resident memory now, its peak reset to it (Linux: `5` into clear_refs), so that the peak
    read later is what the store took, not what the imports did."""
    Path("/proc/self/clear_refs").write_text("5")
    return status_mib("VmRSS")


def start_redis(folder: Path) -> tuple[subprocess.Popen | None, str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        return None, None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes",
                                "--appendfsync", "everysec", "--dir", str(folder), "--save", ""],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    for _ in range(100):
        try:
            redis.Redis(port=port).ping()
            return process, f"redis://127.0.0.1:{port}/0"
        except redis.ConnectionError:
            time.sleep(0.1)
    process.kill()
    return None, None


def main() -> None:
    if ARGS.query:
        print(json.dumps(query(ARGS.query, ARGS.repeats)))
        return
    with tempfile.TemporaryDirectory(prefix="store-bench-") as scratch:
        redis, redis_uri = start_redis(Path(scratch))
        try:
            backends = {"folder (reference)": f"folder:{scratch}/folder", "sqlite": f"sqlite:{scratch}/sqlite"}
            if redis_uri:
                backends["redis"] = redis_uri
            results = {}
            for name, uri in backends.items():
                filled = fill(uri)
                print(f"{name}: filled {ARGS.jobs:,} jobs in {filled:.1f} s", file=sys.stderr, flush=True)
                answer = subprocess.run([sys.executable, __file__, "--query", uri, "--repeats", str(ARGS.repeats),
                                         "--jobs", str(ARGS.jobs)], capture_output=True, text=True, check=True)
                results[name] = {"fill": filled, **json.loads(answer.stdout)}
        finally:
            if redis:
                redis.terminate()
                redis.wait(20)
    reference = results["folder (reference)"]
    columns = [c for c in reference if not c.endswith("found")]
    print(f"{ARGS.jobs:,} jobs; seconds (median of {ARGS.repeats}) and MiB past the imports; ratio to the folder "
          "log in brackets")
    print("| backend | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, figures in results.items():
        cells = [f"{figures[c]:.3f}" if c != "MiB" else f"{figures[c]:.0f}" for c in columns]
        if name != "folder (reference)":
            cells = [f"{cell} ({figures[c] / reference[c]:.2g}x)" if reference[c] else cell
                     for cell, c in zip(cells, columns, strict=True)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    found = {name: {c: f[c] for c in f if c.endswith("found")} for name, f in results.items()}
    print("found (the same in each backend): " + json.dumps(found["folder (reference)"]))
    if any(f != found["folder (reference)"] for f in found.values()):
        sys.exit(f"the backends found different answers: {found}")


parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--jobs", type=int, default=200_000)
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--query", help=argparse.SUPPRESS)
ARGS = parser.parse_args()

if __name__ == "__main__":
    main()
