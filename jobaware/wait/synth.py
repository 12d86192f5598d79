"""Synthetic queue traces: a cluster with EASY backfilling simulated job by job, written as a Standard Workload
Format trace, so every wait comes from a queue (the jobs ahead, the processors in use, the requested times).

Users submit in bursts with a working-day rhythm; each asks for processors (powers of two, a few large jobs) and a
wall time, and runs for a share of it (some hit the limit). The scheduler starts jobs in submit order while they
fit, reserves the first job that does not fit at the earliest time enough processors free up (by the running jobs'
requested times), and starts any later job that fits now without delaying that reservation. The generator's
settings are written beside the trace (`<name>.truth.json`), which marks it as generated.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

import numpy as np

from jobaware.errors import InputError
from jobaware.packaged import bundled

MIN_JOBS, MAX_JOBS = 200, 500_000
CAPACITY = 128
REAL_DEFAULT = "KTH-SP2-1996-2.1-cln.swf"  # make run's data: the real KTH IBM SP2 trace (28,476 jobs)
QUEUES = {1: "short", 2: "batch", 3: "long"}


def _workload(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n_users = int(np.clip(np.sqrt(n) * 2, 10, 400))
    weight = rng.lognormal(0, 1.2, n_users)
    user = rng.choice(n_users, n, p=weight / weight.sum())
    # about 0.9 of the machine's work on average: queues build up in the day and drain at night
    t = rng.uniform(0, 1, 4 * n)
    hour = (t * 24 * 7) % 24
    keep = rng.random(4 * n) < 0.3 + 0.7 * np.exp(-(((hour - 13) / 4) ** 2))
    procs = np.minimum(2 ** rng.choice(8, n, p=[.3, .15, .15, .12, .1, .1, .05, .03]), CAPACITY)
    req = np.exp(rng.uniform(np.log(300), np.log(86_400), n)).round(-1)
    run = np.maximum(req * np.where(rng.random(n) < 0.15, 1.0, rng.beta(1.2, 3.0, n)), 1).round()
    mean_area = float(np.mean(procs * run))
    span = mean_area * n / (0.9 * CAPACITY)
    submit = np.sort(t[keep][:n] if keep.sum() >= n else rng.uniform(0, 1, n))[:n] * span
    queue = np.where(req <= 3600, 1, np.where(req <= 43_200, 2, 3))
    return {"submit": submit.round(), "procs": procs, "req": req, "run": run, "user": user + 1, "queue": queue}


def simulate(work: dict[str, np.ndarray], capacity: int = CAPACITY) -> np.ndarray:
    """Each job's start time under EASY backfilling (jobs in submit order)."""
    n = len(work["submit"])
    submit, procs, req, run = work["submit"], work["procs"], work["req"], work["run"]
    start = np.full(n, np.nan)
    running: list[tuple[float, int, int]] = []  # (end, job, procs)
    pending: list[int] = []
    free = capacity
    arrived = 0
    now = 0.0
    while arrived < n or pending:
        next_submit = submit[arrived] if arrived < n else np.inf
        next_end = running[0][0] if running else np.inf
        now = min(next_submit, next_end)
        while running and running[0][0] <= now:
            free += heapq.heappop(running)[2]
        while arrived < n and submit[arrived] <= now:
            pending.append(arrived)
            arrived += 1
        free = _schedule(now, pending, running, free, procs, req, run, start)
    return start


def _schedule(now, pending, running, free, procs, req, run, start) -> int:
    while pending and procs[pending[0]] <= free:  # first come, first served while the head fits
        job = pending.pop(0)
        free = _start(job, now, running, free, procs, run, start)
    if not pending:
        return free
    head_need, have, shadow = procs[pending[0]], free, now  # the head's reservation
    for end, _, back in sorted(running):
        have += back
        shadow = end
        if have >= head_need:
            break
    by_shadow = free + sum(back for end, _, back in running if end <= shadow)
    extra = by_shadow - head_need
    for job in list(pending[1:]):
        if procs[job] <= free and (now + req[job] <= shadow or procs[job] <= extra):
            pending.remove(job)
            free = _start(job, now, running, free, procs, run, start)
            if now + req[job] > shadow:
                extra -= procs[job]
    return free


def _start(job, now, running, free, procs, run, start) -> int:
    start[job] = now
    heapq.heappush(running, (now + run[job], job, int(procs[job])))
    return free - int(procs[job])


def truth_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name.split(".")[0] + ".truth.json")


def write_synthetic(out: Path, n: int, seed: int = 0, fmt: str | None = None, progress=None) -> Path:
    """`jobaware data synth wait`: a simulated trace at `out` (a `.swf` file, or `synthetic.swf` in the folder
    `out`); returns the settings file beside it."""
    if fmt not in (None, "swf"):
        raise InputError(f"format: the wait generator writes SWF only, got {fmt!r}")
    if not isinstance(n, int) or not MIN_JOBS <= n <= MAX_JOBS:
        raise InputError(f"jobs: expected {MIN_JOBS:,}..{MAX_JOBS:,}, got {n!r}")
    out = Path(out)
    path = out if out.name.lower().endswith(".swf") else out / "synthetic.swf"
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    work = _workload(n, rng)
    start = simulate(work)
    wait = start - work["submit"]
    header = ["; Version: 2.2", "; Computer: simulated cluster (jobaware wait generator)", "; UnixStartTime: 1704067200",
              "; TimeZoneString: UTC", f"; MaxProcs: {CAPACITY}", f"; MaxNodes: {CAPACITY}", "; MaxQueues: 3",
              *(f"; Queue: {code} {name}" for code, name in QUEUES.items()), "; Note: EASY backfilling, simulated"]
    with open(path, "w") as handle:
        handle.write("\n".join(header) + "\n")
        for j in range(n):
            fields = [j + 1, int(work["submit"][j]), int(wait[j]), int(work["run"][j]), int(work["procs"][j]), -1, -1,
                      int(work["procs"][j]), int(work["req"][j]), -1, 1, int(work["user"][j]), -1, -1,
                      int(work["queue"][j]), -1, -1, -1]
            handle.write(" ".join(map(str, fields)) + "\n")
    if progress:
        progress(n)
    truth = truth_path(path)
    truth.write_text(json.dumps({"generator": "jobaware.wait.synth", "jobs": n, "seed": seed, "capacity": CAPACITY,
                                 "scheduler": "EASY backfilling on requested times"}, indent=1) + "\n")
    return truth


def default_data(data_dir: Path, progress=None) -> str:
    """`make run`'s data: the bundled real KTH IBM SP2 trace."""
    return str(bundled("data", "real", "swf", REAL_DEFAULT))
