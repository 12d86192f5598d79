"""A slice of a real trace replayed on the one-node test Slurm (harness/slurm_cluster.py), with more work than cores:
jobaware's wait estimate, `squeue --start`'s and the real start, job by job, at submission and again while pending.

The model is trained on the same trace's earlier 70 % scaled as the replay is (processors to the node's cores,
submit gaps and run times to seconds, requested times rounded up to whole minutes as Slurm keeps them), with the
waits EASY backfilling gives those jobs on the replay's cores (the trace's own waits were another machine's); the
slice comes from the later 30 %. Each job is submitted at its scaled time with its scaled processors and time limit and
sleeps its scaled run time. Right after each submission, and then every `--every` seconds for every pending job,
the queue is read once with `squeue --json` (the snapshot jobaware's estimate is made from, in process, by the
functions the service uses) and `squeue --start` gives Slurm's expected starts. The real starts come from squeue
when the jobs have run. The model works in minutes where the replay has seconds (`to_model`). Errors: mean |log10(estimate / actual)| with both floored at one second, and the share
within a factor of two (both under one second counts as within).

    .venv/bin/python bench/wait_replay.py --jobs 120 --cores 8
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.slurm_cluster import SlurmCluster  # noqa: E402
from jobaware.bodies import parse_body  # noqa: E402
from jobaware.wait.reader import read_trace, squeue_body, squeue_jobs  # noqa: E402
from jobaware.wait.service import WaitRequest, parse_request  # noqa: E402
from jobaware.wait.train import fit_and_evaluate  # noqa: E402

TRACE = Path(__file__).resolve().parents[1] / "jobaware" / "data" / "real" / "swf" / "KTH-SP2-1996-2.1-cln.swf"


def scaled(jobs: pd.DataFrame, cores: int, gap: float, run: float) -> pd.DataFrame:
    """The trace as the replay runs it: processors to `cores`, submit offsets x `gap`, run times x `run`, limits
    x `run` rounded up to minutes (Slurm's unit), waits x `run` (the queue drains at the run times' pace)."""
    out = jobs.copy()
    machine = float(jobs["cluster_procs"].iloc[0])
    out["processors_req"] = np.ceil(jobs["processors_req"] * cores / machine).clip(1, cores)
    t0 = jobs["submit_time"].min()
    offsets = (jobs["submit_time"] - t0).dt.total_seconds() * gap
    out["submit_time"] = t0 + pd.to_timedelta(offsets, unit="s")
    out["run_s"] = (jobs["run_s"] * run).clip(lower=1).round()
    out["wallclock_req"] = np.ceil(jobs["wallclock_req"] * run / 60).clip(lower=1) * 60
    out["wait_s"] = jobs["wait_s"] * run
    out["start_time"] = out["submit_time"] + pd.to_timedelta(out["wait_s"], unit="s")
    out["end_time"] = out["start_time"] + pd.to_timedelta(out["run_s"], unit="s")
    out["cluster_procs"] = cores
    return out


def simulated(jobs: pd.DataFrame, cores: int) -> pd.DataFrame:
    """The scaled jobs with the starts EASY backfilling gives them on `cores` (the replay cluster's own history:
    the trace's waits were another machine's)."""
    from jobaware.wait.synth import simulate

    t0 = jobs["submit_time"].min()
    offsets = (jobs["submit_time"] - t0).dt.total_seconds().to_numpy()
    work = {"submit": offsets, "procs": jobs["processors_req"].to_numpy(float).astype(int),
            "req": jobs["wallclock_req"].to_numpy(float), "run": np.minimum(jobs["run_s"], jobs["wallclock_req"]).to_numpy(float)}
    start = simulate(work, cores)
    out = jobs.copy()
    out["wait_s"] = start - offsets
    out["start_time"] = out["submit_time"] + pd.to_timedelta(out["wait_s"], unit="s")
    out["end_time"] = out["start_time"] + pd.to_timedelta(work["run"], unit="s")
    return out


def to_model(jobs: pd.DataFrame, unit: float) -> pd.DataFrame:
    """The replay's jobs in the model's time unit: every duration and offset x `unit`. The model resolves waits of
    a minute and more (its shortest class is "under a minute"), the replay's waits are seconds: a replay second is
    a model minute."""
    out = jobs.copy()
    t0 = jobs["submit_time"].min()
    for column in ("submit_time", "start_time", "end_time"):
        out[column] = t0 + (jobs[column] - t0) * unit
    for column in ("wallclock_req", "run_s", "wait_s"):
        out[column] = jobs[column] * unit
    return out


def squeue(cluster: SlurmCluster) -> dict:
    done = subprocess.run(["squeue", "--json"], env=cluster.env, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def slurm_starts(cluster: SlurmCluster) -> dict[int, float]:
    """`squeue --start`'s expected start of each pending job (epoch seconds), where it has one."""
    done = subprocess.run(["squeue", "--start", "-h", "-t", "PD", "-o", "%i %S"], env=cluster.env,
                          capture_output=True, text=True, timeout=60)
    starts = {}
    for line in done.stdout.splitlines():
        job, _, when = line.partition(" ")
        if when.strip() not in ("N/A", "", "Unknown") and job.isdigit():
            starts[int(job)] = time.mktime(time.strptime(when.strip(), "%Y-%m-%dT%H:%M:%S"))  # local time
    return starts


def still_pending(payload: dict, ids: list[int]) -> tuple[list[int], list[int]]:
    """Of `ids`, the jobs the squeue snapshot shows pending (the ones asked about) and the others: started since
    (the service refuses them: no wait is left) or gone from the queue."""
    states = {job["job_id"]: job["state"] for job in squeue_jobs(payload)}
    pending = [job for job in ids if states.get(job) == "PENDING"]
    return pending, [job for job in ids if states.get(job) != "PENDING"]


UNIT = 60.0
ORIGIN = 1_000_000_000  # the model's clock: replay seconds from the first submission, x UNIT, from here


def estimate(bundle, payload: dict, ids: list[int], now: float, begin: float) -> dict[int, float]:
    """jobaware's remaining wait (replay seconds) of each job in `ids`, from one squeue snapshot in model units."""
    body = squeue_body(payload, ids, now=now, capacity=bundle.clusters["replay"]["capacity"])
    body["cluster"] = "replay"
    clock = lambda t: int(ORIGIN + (t - begin) * UNIT)  # noqa: E731
    body["time"] = clock(now)
    for job in body["jobs"] + body["running"] + body["pending"]:
        for name in ("submit_time", "start_time"):
            if name in job:
                job[name] = clock(job[name])
        if "wallclock_req" in job:
            job["wallclock_req"] *= UNIT
    jobs, snapshot = parse_request(parse_body(WaitRequest, body), bundle)
    answer, _ = bundle.snapshot(jobs, snapshot)
    return dict(zip(jobs["job_id"].astype(int), answer["wait_s"] / UNIT, strict=True))


def errors(pairs: list[tuple[float, float]]) -> tuple[float, float, int]:
    """Mean |log10 error| and the share within a factor of two (floor: one second), and how many pairs."""
    if not pairs:
        return math.nan, math.nan, 0
    logs, within = [], []
    for predicted, actual in pairs:
        p, a = max(predicted, 1.0), max(actual, 1.0)
        logs.append(abs(math.log10(p / a)))
        within.append(float((actual < 1 and predicted < 1) or a / 2 <= p <= 2 * a))
    return statistics.mean(logs), statistics.mean(within), len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=120)
    parser.add_argument("--cores", type=int, default=8)
    parser.add_argument("--gap", type=float, default=1 / 400, help="submit gaps are scaled by this")
    parser.add_argument("--run", type=float, default=1 / 600, help="run and requested times are scaled by this")
    parser.add_argument("--start", type=float, default=0.8, help="where the slice begins in the trace (share)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between re-estimates of pending jobs")
    args = parser.parse_args()

    trace = read_trace(TRACE)[0].sort_values("submit_time", kind="stable").reset_index(drop=True)
    replay = scaled(trace, args.cores, args.gap, args.run).assign(cluster="replay", timezone="UTC")
    cut = int(len(replay) * 0.7)
    t0 = time.process_time()
    history = simulated(replay.iloc[:cut], args.cores)
    bundle, evaluation = fit_and_evaluate(to_model(history, UNIT), {})
    print(f"trained on {cut:,} scaled jobs with the waits EASY backfilling gives them on {args.cores} cores, in "
          f"{time.process_time() - t0:.1f} s of CPU; within x2 on their later 30 %: "
          f"{evaluation.metrics['model']['within_x2']:.3f}", flush=True)
    first = int(len(replay) * args.start)
    chosen = replay.iloc[first: first + args.jobs].reset_index(drop=True)
    offsets = (chosen["submit_time"] - chosen["submit_time"].iloc[0]).dt.total_seconds().to_numpy()

    at_submit, refreshed = {}, []  # job -> (jobaware, squeue --start or None, submitted); [(job, now, ours, theirs)]
    started = []  # jobs that started before they could be asked about at submission
    with tempfile.TemporaryDirectory(prefix="jobaware-wait-replay-") as tmp:
        cluster = SlurmCluster(Path(tmp), cpus=args.cores).start()
        try:
            begin, submitted, next_refresh = time.time(), {}, time.time() + args.every
            for k, job in chosen.iterrows():
                while time.time() < begin + offsets[k]:
                    if time.time() >= next_refresh:
                        _refresh(cluster, bundle, refreshed, begin)
                        next_refresh = time.time() + args.every
                    time.sleep(0.2)
                limit = min(max(int(job["wallclock_req"] // 60), 1), 60)  # the test partition's MaxTime
                done = subprocess.run(
                    ["sbatch", "--parsable", "-n", str(int(job["processors_req"])), "-t", str(limit), "-J", f"r{k}",
                     f"--chdir={cluster.root / 'jobs'}", f"--wrap=sleep {int(job['run_s'])}"],
                    env=cluster.env, capture_output=True, text=True, timeout=60, check=True)
                job_id = int(done.stdout.strip().split(";")[0])
                now = time.time()
                submitted[job_id] = now
                payload = squeue(cluster)
                if not still_pending(payload, [job_id])[0]:
                    started.append(job_id)
                    continue
                ours = estimate(bundle, payload, [job_id], now, begin)[job_id]
                theirs = slurm_starts(cluster).get(job_id)
                at_submit[job_id] = (ours, None if theirs is None else max(theirs - now, 0.0), now)
            while True:  # re-estimates until every job has started
                payload = squeue(cluster)
                if not any(j.get("job_state") == "PENDING" for j in payload["jobs"]):
                    break
                _refresh(cluster, bundle, refreshed, begin)
                time.sleep(args.every)
            starts = {int(j["job_id"]): float(j["start_time"]) for j in squeue(cluster)["jobs"] if j.get("start_time")}
        finally:
            cluster.stop()

    waits = {job: starts[job] - at_submit[job][2] for job in at_submit if job in starts}
    ours = errors([(at_submit[j][0], w) for j, w in waits.items()])
    theirs = errors([(at_submit[j][1], w) for j, w in waits.items() if at_submit[j][1] is not None])
    both = [j for j in waits if at_submit[j][1] is not None]
    ours_both = errors([(at_submit[j][0], waits[j]) for j in both])
    later = [(o, t, starts[j] - now) for j, now, o, t in refreshed if j in starts]
    ours_later = errors([(o, a) for o, _, a in later])
    theirs_later = errors([(t, a) for _, t, a in later if t is not None])
    ours_dated = errors([(o, a) for o, t, a in later if t is not None])
    waited = sorted(waits.values())
    print(f"{len(started)} of {len(submitted)} jobs had started when squeue was read after their submission: not "
          f"asked about, not counted below")
    if not waited:
        return
    print(f"{len(waits)} jobs replayed on {args.cores} cores; waits: median {statistics.median(waited):.0f} s, "
          f"max {waited[-1]:.0f} s; {sum(w >= 1 for w in waited)} waited a second or more")
    print("| estimate | when | jobs | mean abs log10 error | within x2 |")
    print("|---|---|---|---|---|")
    print(f"| jobaware | at submission, every job | {ours[2]} | {ours[0]:.3f} | {ours[1]:.3f} |")
    print(f"| jobaware | at submission, jobs squeue --start dated | {ours_both[2]} | {ours_both[0]:.3f} | {ours_both[1]:.3f} |")
    print(f"| squeue --start | at submission, where it dated the job | {theirs[2]} | {theirs[0]:.3f} | {theirs[1]:.3f} |")
    print(f"| jobaware | while pending, remaining wait | {ours_later[2]} | {ours_later[0]:.3f} | {ours_later[1]:.3f} |")
    print(f"| jobaware | while pending, where squeue --start dated the job | {ours_dated[2]} | {ours_dated[0]:.3f} | "
          f"{ours_dated[1]:.3f} |")
    print(f"| squeue --start | while pending, where it dated the job | {theirs_later[2]} | {theirs_later[0]:.3f} | "
          f"{theirs_later[1]:.3f} |")
    if theirs_later[2]:
        print(f"jobaware's error / squeue --start's (same snapshots, while pending): {ours_dated[0] / theirs_later[0]:.2f}x")
    if theirs[2] and ours_both[2]:
        print(f"jobaware's error / squeue --start's (same jobs, at submission): {ours_both[0] / theirs[0]:.2f}x")


def _refresh(cluster: SlurmCluster, bundle, refreshed: list, begin: float) -> None:
    """Every pending job re-estimated from one snapshot, beside squeue --start's expected start."""
    payload = squeue(cluster)
    now = time.time()
    pending, _ = still_pending(payload, [job["job_id"] for job in squeue_jobs(payload)])
    if not pending:
        return
    ours = estimate(bundle, payload, pending, now, begin)
    theirs = slurm_starts(cluster)
    for job in pending:
        refreshed.append((job, now, ours[job], None if job not in theirs else max(theirs[job] - now, 0.0)))


if __name__ == "__main__":
    main()
