"""The `hold` event-log reader against HTCondor's own (htcondor2.JobEventLog), and the tensor build rate.

Generates a global event log of at least `--gb` GB (jobaware.hold.synth; kept under bench/out/ for reuse),
then, each in a fresh process (its peak RSS is its own):
  official        htcondor2.JobEventLog over the log, collecting what a table needs per event (type, job id,
                  time, and the hold code and subcode of 012 events)
  official-bare   the same iteration touching nothing (the official reader's ceiling)
  jobaware        jobaware.hold.reader.ingest: the whole canonical table written to Parquet, plus quarantine
  tensors         e x m x j tensors of `--tensors` hold decisions (drawn with replacement, seeded, from the
                  log's holds) built into a memory-mapped file
Prints events/s of each reader, the ratios and the peak memory; the machine's load before and after.
    python bench/hold_reader.py --gb 1.0 [--tensors 100000 --m 100 --j 100] [--only readers|tensors]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from fresh import measure  # bench/fresh.py (this folder is on sys.path when a script here runs)

OUT = Path(__file__).resolve().parent / "out"
BYTES_PER_JOB = 2_900  # about what the generator writes per job


def official(path: str, bare: bool) -> dict:
    import htcondor2

    held = htcondor2.JobEventType.JOB_HELD
    start = time.perf_counter()
    rows = 0
    if bare:
        for _ in htcondor2.JobEventLog(path).events(stop_after=0):
            rows += 1
    else:
        kinds, clusters, procs, subprocs, stamps, codes, subcodes = [], [], [], [], [], [], []
        for event in htcondor2.JobEventLog(path).events(stop_after=0):
            kind = event.type
            kinds.append(int(kind))
            clusters.append(event.cluster)
            procs.append(event.proc)
            subprocs.append(event.get("Subproc", -1))
            stamps.append(event.timestamp)
            codes.append(event.get("HoldReasonCode") if kind == held else None)
            subcodes.append(event.get("HoldReasonSubCode") if kind == held else None)
        rows = len(kinds)
    return {"seconds": time.perf_counter() - start, "events": rows}


def jobaware(path: str) -> dict:
    from jobaware.hold.reader import ingest

    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        start = time.perf_counter()
        report = ingest([path], Path(tmp))
        seconds = time.perf_counter() - start
        size = (Path(tmp) / "condor_events.parquet").stat().st_size
    return {"seconds": seconds, "events": report.rows, "bad_records": report.bad_rows, "parquet_mib": size / 2**20}


def tensors(path: str, count: int, m: int, j: int, timeframe_len: int) -> dict:
    import numpy as np

    from jobaware.hold import features
    from jobaware.hold.labels import decisions
    from jobaware.hold.train import read_events_table

    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        from jobaware.hold.reader import ingest

        ingest([path], Path(tmp))
        events = read_events_table(Path(tmp) / "condor_events.parquet")
        table = decisions(events)
        index = features.build_index(events)
        del events
        rows = np.sort(np.random.default_rng(0).integers(0, len(table), count))
        chosen = table.iloc[rows]
        start = time.perf_counter()
        states = features.build_tensors(index, chosen, m, j, timeframe_len, seed=0, out=Path(tmp) / "tensors.npy")
        seconds = time.perf_counter() - start
        nonzero = float((states[:: max(1, count // 1000)] > 0).mean())
    return {"seconds": seconds, "tensors": count, "holds_in_log": len(table), "shape": [count, m, j],
            "filled_share": nonzero}


def generate(gb: float) -> Path:
    from jobaware.hold import synth

    target = int(gb * 1e9)
    path = OUT / f"hold_global_{gb:g}GB.log"
    jobs = max(int(target / BYTES_PER_JOB * 1.03), synth.MIN_JOBS)
    while not path.exists() or path.stat().st_size < target:
        synth.write(path, jobs, seed=0)
        jobs = int(jobs * target / path.stat().st_size * 1.03) + 1
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the generated log (GB)")
    parser.add_argument("--tensors", type=int, default=100_000, help="decisions to build tensors for (0: skip)")
    parser.add_argument("--m", type=int, default=100)
    parser.add_argument("--j", type=int, default=100)
    parser.add_argument("--timeframe-len", type=int, default=300)
    parser.add_argument("--skip-bare", action="store_true", help="leave out the bare official iteration")
    parser.add_argument("--only", choices=("all", "readers", "tensors"), default="all")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    load_before = os.getloadavg()
    log = generate(args.gb)
    size = log.stat().st_size
    results = {"log": str(log), "bytes": size, "load_before": load_before}
    if args.only in ("all", "readers"):
        results["jobaware"] = measure(jobaware, str(log))
        results["official"] = measure(official, str(log), False)
        if not args.skip_bare:
            results["official_bare"] = measure(official, str(log), True)
    if args.tensors and args.only in ("all", "tensors"):
        results["tensors"] = measure(tensors, str(log), args.tensors, args.m, args.j, args.timeframe_len)
    results["load_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))
    print(f"\nlog: {size / 1e9:.2f} GB (load {load_before[0]:.1f} -> {results['load_after'][0]:.1f})")
    if "jobaware" in results:
        assert results["jobaware"]["events"] == results["official"]["events"], "the readers disagree on the events"
        rate = {name: results[name]["events"] / results[name]["seconds"]
                for name in ("jobaware", "official", "official_bare") if name in results}
        print(f"{results['jobaware']['events']:,} events")
        for name, value in rate.items():
            print(f"{name:>14}: {value:>10,.0f} events/s  {results[name]['seconds']:7.1f} s  "
                  f"peak {results[name]['peak_mib']:,.0f} MiB")
        print(f"ratio jobaware / official: {rate['jobaware'] / rate['official']:.2f}x"
              + (f"  (/ official-bare: {rate['jobaware'] / rate['official_bare']:.2f}x)" if "official_bare" in rate else ""))
    if "tensors" in results:
        t = results["tensors"]
        print(f"tensors: {t['tensors']:,} of {args.m} frames x {args.j} jobs in {t['seconds']:.1f} s "
              f"({t['tensors'] / t['seconds']:,.0f}/s), peak {t['peak_mib']:,.0f} MiB")


if __name__ == "__main__":
    main()
