"""The platform's reader of terminated HTCondor jobs (`jobaware.condor_log`, what `sizing` learns memory from)
against HTCondor's own (`htcondor2.JobEventLog`), on a large log built from the real IceCube log.

The log is the real `jobaware/data/real/condor-more/CosmicRay__job.log` written `--copies` times, each copy's cluster ids
moved by 10,000,000 (kept under bench/out/ for reuse). Then, each in a fresh process (its peak resident memory is
its own), `--rounds` times:
  official   htcondor2.JobEventLog over the log, keeping per job what the platform's reader keeps (submit time,
             last execute time, and of each terminate event its time, return value and memory usage, request
             and allocation)
  jobaware   jobaware.condor_log.read_ended_jobs
Prints the median seconds, jobs per second and peak memory of each, and their ratios.

    .venv/bin/python bench/condor_log.py [--copies 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from fresh import measure  # bench/fresh.py (this folder is on sys.path when a script here runs)

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "out"
SOURCE = ROOT / "jobaware" / "data" / "real" / "condor-more" / "CosmicRay__job.log"
_CLUSTER = re.compile(r"^(\d{3}) \((\d+)\.", re.MULTILINE)


def build(copies: int) -> Path:
    """The large log (built once per number of copies)."""
    path = OUT / f"condor-log-{copies}.log"
    if not path.is_file():
        OUT.mkdir(exist_ok=True)
        text = SOURCE.read_text()
        with open(path, "w") as handle:
            for k in range(copies):
                handle.write(_CLUSTER.sub(lambda m: f"{m.group(1)} ({int(m.group(2)) + k * 10_000_000}.", text))
    return path


def official(path: str) -> dict:
    import htcondor2

    kinds = htcondor2.JobEventType
    start = time.perf_counter()
    submitted, started, ended = {}, {}, {}
    for event in htcondor2.JobEventLog(path).events(stop_after=0):
        key = (event.cluster, event.proc)
        if event.type == kinds.SUBMIT:
            submitted.setdefault(key, event.timestamp)
        elif event.type == kinds.EXECUTE:
            started[key] = event.timestamp
        elif event.type == kinds.JOB_TERMINATED and key in submitted:
            ended[key] = (event.timestamp, event.get("ReturnValue"), event.get("MemoryUsage"),
                          event.get("RequestMemory"), event.get("Memory"))
    return {"seconds": time.perf_counter() - start, "jobs": len(ended)}


def platform(path: str) -> dict:
    from jobaware.condor_log import read_ended_jobs

    start = time.perf_counter()
    jobs, problems = read_ended_jobs(path)
    return {"seconds": time.perf_counter() - start, "jobs": len(jobs), "problems": len(problems)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=200, help="copies of the real log (378 jobs, 1.3 MB each)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    path = build(args.copies)
    print(f"log: {path} ({path.stat().st_size / 2**20:,.0f} MiB)")
    runs = {"official": [], "jobaware": []}
    for _ in range(args.rounds):
        runs["official"].append(measure(official, str(path)))
        runs["jobaware"].append(measure(platform, str(path)))
    summary = {}
    for name, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        peak = statistics.median(r["peak_mib"] for r in results)
        summary[name] = (seconds, peak)
        print(f"{name:9s} {results[0]['jobs']:,} jobs  median {seconds:6.2f} s  {results[0]['jobs'] / seconds:10,.0f} "
              f"jobs/s  peak {peak:7.1f} MiB")
    (official_s, official_mib), (ours_s, ours_mib) = summary["official"], summary["jobaware"]
    print(f"jobaware / official: time x{ours_s / official_s:.2f}, peak memory x{ours_mib / official_mib:.2f}")


if __name__ == "__main__":
    main()
