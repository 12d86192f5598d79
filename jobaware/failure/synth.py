"""Synthetic Slurm job tables in the exact NREL Eagle format, with a known cause for every failure.

Every job's outcome is drawn from independent causes whose probabilities are known exactly:
  CANCELLED      user's cancel propensity
  NODE_FAIL      hazard per node-hour x nodes x the job's typical runtime
  OUT_OF_MEMORY  memory need (log-normal per script) above the limit (mem_req, or the partition's default)
  TIMEOUT        true runtime (log-normal per script) above the requested wall time
  FAILED         user's and script's propensity
The first cause that fires, in that order, is the state; none firing gives COMPLETED. The exact class
probabilities are written beside the table, so the Bayes-optimal score is known.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.special import ndtr

from jobaware.errors import InputError
from jobaware.failure.writers import NrelWriter

MIN_JOBS, MAX_JOBS = 1_000, 11_000_000
DEFAULT_SYNTH_JOBS = 30_000
FORMATS = ("csv", "json", "parquet")
TRUTH_CLASSES = ("COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "CANCELLED")
ROUND_TIMES = np.array([300, 600, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800, 345600, 864000], float)
# name, max wall time (s), default memory per node (MB), share of users who prefer it
PARTITIONS = (
    ("short", 4 * 3600, 85_000, 0.25),
    ("standard", 2 * 86400, 85_000, 0.40),
    ("long", 10 * 86400, 85_000, 0.10),
    ("bigmem", 2 * 86400, 750_000, 0.08),
    ("gpu", 2 * 86400, 180_000, 0.10),
    ("debug", 3600, 85_000, 0.07),
)
NODE_FAIL_PER_NODE_HOUR = 3e-4
CHUNK_JOBS = 1_000_000


@dataclass
class Population:
    """Users, their accounts and habits, and their scripts (one job name each)."""

    user_weight: np.ndarray
    user_account: np.ndarray
    user_qos: np.ndarray
    user_req_factor: np.ndarray
    user_sets_mem: np.ndarray
    user_cancel: np.ndarray
    user_array_mean: np.ndarray
    user_scripts: list[np.ndarray]
    script_partition: np.ndarray
    script_mu: np.ndarray
    script_sigma: np.ndarray
    script_mem_mu: np.ndarray
    script_nodes: np.ndarray
    script_fail: np.ndarray


def make_population(n_jobs: int, rng: np.random.Generator) -> Population:
    n_users = int(np.clip(3 * np.sqrt(n_jobs), 20, 4000))
    n_accounts = max(5, n_users // 4)
    user_partition = rng.choice(len(PARTITIONS), n_users, p=[p[3] for p in PARTITIONS])
    user_fail = rng.beta(0.6, 9.0, n_users)
    scripts_per_user = 1 + rng.poisson(3, n_users)
    owner = np.repeat(np.arange(n_users), scripts_per_user)
    n_scripts = len(owner)
    # most scripts run in the user's partition, some elsewhere
    script_partition = np.where(
        rng.random(n_scripts) < 0.8, user_partition[owner], rng.choice(len(PARTITIONS), n_scripts)
    )
    max_time = np.array([p[1] for p in PARTITIONS], float)[script_partition]
    user_mu = rng.normal(np.log(1800), 1.3, n_users)
    script_mu = np.minimum(user_mu[owner] + rng.normal(0, 0.8, n_scripts), np.log(max_time * 0.6))
    script_nodes = rng.choice([1, 1, 1, 1, 2, 2, 4, 8, 16, 32, 64], n_scripts)
    script_nodes = np.where(script_partition == 5, np.minimum(script_nodes, 2), script_nodes)
    return Population(
        user_weight=(w := rng.lognormal(0, 1.4, n_users)) / w.sum(),
        user_account=rng.integers(0, n_accounts, n_users),
        user_qos=rng.choice(["normal", "high", "standby"], n_users, p=[0.85, 0.1, 0.05]),
        user_req_factor=rng.lognormal(np.log(2.0), 0.6, n_users),
        user_sets_mem=rng.random(n_users) < 0.3,
        user_cancel=rng.beta(0.5, 20.0, n_users),
        user_array_mean=rng.choice([1.0, 2.0, 5.0, 20.0, 100.0], n_users, p=[0.4, 0.25, 0.2, 0.1, 0.05]),
        user_scripts=np.split(np.arange(n_scripts), np.cumsum(scripts_per_user)[:-1]),
        script_partition=script_partition,
        script_mu=script_mu,
        script_sigma=rng.uniform(0.2, 1.0, n_scripts),
        script_mem_mu=rng.normal(np.log(12_000), 0.8, n_scripts),
        script_nodes=script_nodes,
        script_fail=np.clip(user_fail[owner] * rng.lognormal(0, 0.8, n_scripts), 0, 0.9),
    )


def _submit_times(n: int, span_s: float, rng: np.random.Generator) -> np.ndarray:
    """Burst submission times with a working-day rhythm (seconds from the start, sorted)."""
    chosen = np.empty(0)
    while len(chosen) < n:
        t = rng.uniform(0, span_s, 2 * n)
        hour = (t / 3600) % 24
        weekday = (t // 86400) % 7 < 5
        weight = (0.35 + 0.65 * np.exp(-(((hour - 14) / 4.0) ** 2))) * np.where(weekday, 1.0, 0.45)
        chosen = np.concatenate([chosen, t[rng.random(2 * n) < weight]])
    return np.sort(np.floor(chosen[:n]))


def _round_up(values: np.ndarray, steps: np.ndarray) -> np.ndarray:
    index = np.searchsorted(steps, values, side="left")
    return steps[np.minimum(index, len(steps) - 1)]


def generate(n_jobs: int, seed: int = 0, start: str = "2019-01-01") -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """Yield (NREL-format jobs, true class probabilities) in chunks of about a million jobs."""
    if not MIN_JOBS <= n_jobs <= MAX_JOBS:
        raise InputError(f"--jobs must be between {MIN_JOBS:,} and {MAX_JOBS:,}; got {n_jobs:,}")
    rng = np.random.default_rng(seed)
    pop = make_population(n_jobs, rng)
    n_users = len(pop.user_weight)
    # bursts: one user, one script, k jobs submitted in the same second (job arrays)
    burst_user = rng.choice(n_users, n_jobs, p=pop.user_weight)
    burst_size = np.where(
        rng.random(n_jobs) < 0.6, 1, 1 + rng.geometric(1 / pop.user_array_mean[burst_user])
    )
    ends = np.cumsum(burst_size)
    n_bursts = int(np.searchsorted(ends, n_jobs)) + 1
    burst_user, burst_size = burst_user[:n_bursts], burst_size[:n_bursts].copy()
    burst_size[-1] -= ends[n_bursts - 1] - n_jobs
    burst_script = np.array([rng.choice(pop.user_scripts[u]) for u in burst_user])
    span_days = float(np.clip(n_jobs / 2500, 30, 1500))
    burst_time = _submit_times(n_bursts, span_days * 86400, rng)
    t0 = pd.Timestamp(start)
    first_id = 1_000_000

    burst_end = np.cumsum(burst_size)
    lo = 0
    while lo < n_bursts:
        hi = int(np.searchsorted(burst_end, burst_end[lo - 1] + CHUNK_JOBS if lo else CHUNK_JOBS, side="right"))
        hi = max(hi, lo + 1)
        sizes = burst_size[lo:hi]
        user = np.repeat(burst_user[lo:hi], sizes)
        script = np.repeat(burst_script[lo:hi], sizes)
        submit = np.repeat(burst_time[lo:hi], sizes)
        job_id = first_id + (burst_end[lo - 1] if lo else 0) + np.arange(len(user))
        yield _jobs(pop, user, script, submit, job_id, t0, rng)
        lo = hi


def _jobs(pop, user, script, submit, job_id, t0, rng):
    n = len(user)
    part = pop.script_partition[script]
    max_time = np.array([p[1] for p in PARTITIONS], float)[part]
    default_mem = np.array([p[2] for p in PARTITIONS], float)[part]
    mu, sigma = pop.script_mu[script], pop.script_sigma[script]
    nodes = pop.script_nodes[script]
    # requests: the user's estimate, rounded up to a round wall time, capped by the partition
    estimate = np.exp(mu) * pop.user_req_factor[user] * rng.lognormal(0, 0.25, n)
    wall_req = np.minimum(_round_up(estimate, ROUND_TIMES), max_time)
    mem_mu = pop.script_mem_mu[script]
    sets_mem = pop.user_sets_mem[user]
    mem_req = np.where(sets_mem, np.ceil(np.exp(mem_mu) * rng.lognormal(0.6, 0.35, n) / 1000) * 1000, 0.0)
    mem_limit = np.where(mem_req > 0, mem_req, default_mem)
    # exact cause probabilities
    p_cancel = pop.user_cancel[user]
    p_node = 1 - np.exp(-NODE_FAIL_PER_NODE_HOUR * nodes * np.minimum(np.exp(mu), wall_req) / 3600)
    p_oom = 1 - ndtr((np.log(mem_limit) - mem_mu) / 0.5)
    p_timeout = 1 - ndtr((np.log(wall_req) - mu) / sigma)
    p_fail = pop.script_fail[script]
    # draws
    runtime = rng.lognormal(mu, sigma)
    mem_need = rng.lognormal(mem_mu, 0.5)
    fired = np.stack(
        [
            rng.random(n) < p_cancel,
            rng.random(n) < p_node,
            mem_need > mem_limit,
            runtime > wall_req,
            rng.random(n) < p_fail,
        ]
    )
    first = np.where(fired.any(axis=0), fired.argmax(axis=0), 5)
    state = np.array(["CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "FAILED", "COMPLETED"])[first]
    capped = np.minimum(runtime, wall_req)
    run_time = np.select(
        [first == 3, first == 5], [wall_req + rng.integers(1, 90, n), runtime], capped * rng.uniform(0.02, 1.0, n)
    )
    run_time = np.maximum(np.round(run_time), 1.0)
    wait = np.round(rng.exponential(60 + 120 * nodes)) + 1
    stay = 1 - p_cancel
    keep = (1 - p_node) * (1 - p_oom)
    truth = pd.DataFrame(
        {
            "job_id": job_id,
            "p_CANCELLED": p_cancel,
            "p_NODE_FAIL": stay * p_node,
            "p_OUT_OF_MEMORY": stay * (1 - p_node) * p_oom,
            "p_TIMEOUT": stay * keep * p_timeout,
            "p_FAILED": stay * keep * (1 - p_timeout) * p_fail,
            "p_COMPLETED": stay * keep * (1 - p_timeout) * (1 - p_fail),
        }
    )
    submit_time = t0 + pd.to_timedelta(submit, unit="s")
    start_time = submit_time + pd.to_timedelta(wait, unit="s")
    gpus = np.where(part == 4, 2 * nodes, 0)
    jobs = pd.DataFrame(
        {
            "job_id": job_id,
            "user": [f"user{u:04d}" for u in user],
            "account": [f"account{a:04d}" for a in pop.user_account[user]],
            "partition": [f"partition{p + 1:03d}" for p in part],
            "qos": pop.user_qos[user],
            "wallclock_req": wall_req,
            "nodes_req": nodes,
            "processors_req": nodes * 36,
            "gpus_req": gpus,
            "mem_req": mem_req,
            "submit_time": submit_time,
            "start_time": start_time,
            "end_time": start_time + pd.to_timedelta(run_time, unit="s"),
            "run_time": run_time,
            "state": state,
            "name": [f"name{s:08d}" for s in script],
            "work_dir": [f"work_dir{s:08d}" for s in script],
            "submit_line": [f"submit_line{s:08d}" for s in script],
        }
    )
    return jobs, truth


def truth_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name.split(".")[0] + ".truth.parquet")


def write(out: str | Path, n_jobs: int, fmt: str | None = None, seed: int = 0, progress=None) -> Path:
    """Write `n_jobs` synthetic jobs to `out` in the NREL format; return the truth file's path."""
    out = Path(out)
    fmt = fmt or out.suffix.lstrip(".").lower() or "csv"
    if fmt not in FORMATS:
        raise InputError(f"unknown format '{fmt}'; expected one of {', '.join(FORMATS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    truth_file = truth_path(out)
    truth_writer = None
    writer = NrelWriter(out, fmt)
    try:
        for jobs, truth in generate(n_jobs, seed):
            writer.write(jobs)
            table = pa.Table.from_pandas(truth, preserve_index=False)
            truth_writer = truth_writer or pq.ParquetWriter(truth_file, table.schema)
            truth_writer.write_table(table)
            if progress:
                progress(len(jobs))
    finally:
        writer.close()
        if truth_writer:
            truth_writer.close()
    return truth_file


TRUTH_FOR_SCORES = ["job_id", "p_CANCELLED", "p_COMPLETED"]  # the truth columns `bayes_scores` reads


def bayes_scores(truth: pd.DataFrame) -> pd.DataFrame:
    """Per job, the true P(not COMPLETED | not CANCELLED), the Bayes-optimal P(fail) score."""
    stay = 1 - truth["p_CANCELLED"]
    return pd.DataFrame({"job_id": truth["job_id"], "p_fail": 1 - truth["p_COMPLETED"] / stay.clip(lower=1e-12)})


def describe(truth_file: Path) -> str:
    truth = pq.read_table(truth_file).to_pandas()
    means = {c.removeprefix("p_"): round(float(truth[c].mean()), 4) for c in truth.columns if c.startswith("p_")}
    return json.dumps(means)


def write_synthetic(out: Path, n: int, seed: int = 0, fmt: str | None = None, progress=None) -> Path:
    """`jobaware data synth failure`: jobs in the NREL format; returns the truth file beside them."""
    return write(out, n, fmt, seed, progress=progress)


def default_data(data_dir: Path, progress=None) -> str:
    """Synthetic NREL-format jobs, generated once under `data_dir` (the embedded default of `make run`)."""
    path = data_dir / f"synthetic_failure_{DEFAULT_SYNTH_JOBS}.parquet"
    if not path.exists():
        write(path, DEFAULT_SYNTH_JOBS, "parquet", 0, progress=progress)
    return str(path)
