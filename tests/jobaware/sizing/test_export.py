"""Training `sizing` on a site's job store: a store the Slurm collector filled with real jobs (slices of the real HPC2N
trace, which states memory asked and used, and of SDSC-SP2, which names programs and queues and has jobs cancelled
while pending), replayed as Slurm 22.05's squeue shows them, with each finished job's use as the collector keeps it
from `sacct -P` (`jobaware.adapters.slurm.usage`), gives the `sizing_jobs` rows the SWF reader gives for the same jobs."""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from jobaware import capabilities, steps
from jobaware.adapters.slurm.collector import Collector
from jobaware.adapters.slurm.usage import USAGE_FIELDS, sacct_usage
from jobaware.errors import InputError, JobawareError
from jobaware.sizing.reader import read_trace
from jobaware.sizing.schema import COLUMNS
from jobaware.store import JobKey, open_store
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import REAL, SQUEUE
from tests.jobaware.wait.test_export import zone

TEMPLATE = json.loads(SQUEUE.read_text())["jobs"][0]  # a real squeue --json record of the test cluster
HPC2N = REAL / "swf-wait" / "HPC2N-2002-2.2-cln.swf.gz"
SDSC = REAL / "swf-wait" / "SDSC-SP2-1998-4.2-cln.swf.gz"
CORES = {HPC2N: 2, SDSC: 1}  # CPUs a node
SITE_ZONE = "Europe/Stockholm"  # the collector's wall clock


def epoch(moment: pd.Timestamp) -> int:
    return int(moment.timestamp())


def never_ran(jobs: pd.DataFrame) -> pd.Series:
    """Cancelled before it ran: the trace gives it no run (or none of a second)."""
    return (jobs["status"] == "CANCELLED") & ~(jobs["run_s"] > 0)


def trace_slice(path, first: int, n: int) -> pd.DataFrame:
    """`n` real jobs of a trace from its `first`: those with a known end state, a run time unless cancelled before
    running, and a time limit Slurm can hold (whole minutes; Slurm keeps limits in minutes), each with its nodes."""
    jobs = read_trace(path)[0]
    jobs = jobs.loc[jobs["status"].notna() & ~(jobs["time_req_s"] % 60 > 0) & (jobs["run_s"].notna() | never_ran(jobs))]
    jobs = jobs.iloc[first:first + n]
    return jobs.assign(nodes=np.ceil(jobs["procs"] / CORES[path]).astype(int)).reset_index(drop=True)


def squeue(job, state: str, start: int = 0, end: int = 0) -> dict:
    """One job as Slurm 22.05's `squeue --json` lists it."""
    out = copy.deepcopy(TEMPLATE)
    limit = None if math.isnan(job.time_req_s) else int(job.time_req_s // 60)
    out.update(job_id=int(job.job_id), submit_time=epoch(job.submit_time), eligible_time=epoch(job.submit_time),
               job_state=state, state_reason="None" if state != "PENDING" else "Priority", start_time=start,
               end_time=end, cpus=int(job.procs), node_count=int(job.nodes), time_limit=limit, user_name=job.user,
               account=job.group if isinstance(job.group, str) else "", partition=job.queue if isinstance(job.queue, str) else "",
               name=job.name if isinstance(job.name, str) else "", cluster=job.cluster,
               exit_code=0 if job.status == "COMPLETED" else 256, tres_req_str=f"cpu={int(job.procs)}")
    return out


def observations(jobs: pd.DataFrame) -> list[tuple[int, dict]]:
    """(time, squeue record) of each job's state changes: pending at its submit, running at its start, its end state
    at its end; a job cancelled before it ran is cancelled while pending, a minute after its submit (squeue shows
    that moment as its start and end)."""
    seen = []
    for job, cancelled in zip(jobs.itertuples(), never_ran(jobs), strict=True):
        submit = epoch(job.submit_time)
        seen.append((submit, squeue(job, "PENDING")))
        if cancelled:
            seen.append((submit + 60, squeue(job, "CANCELLED", submit + 60, submit + 60)))
            continue
        end = epoch(job.end_time)
        start = end - int(job.run_s)
        seen.append((start, squeue(job, "RUNNING", start, start + int(np.nan_to_num(job.time_req_s)))))
        seen.append((end, squeue(job, job.status, start, end)))
    return seen


def sacct_lines(job) -> list[str]:
    """The job's lines in `sacct --allusers -P -o <the collector's fields>` (USAGE_FIELDS' order): its own (memory
    asked in all, in KiB, as AllocTRES gives it) and its steps' (`batch` on the first node, `0` across its nodes:
    the sum of its tasks' largest resident sizes, the trace's average per processor times its processors)."""
    p, n, run, exit_ = int(job.procs), int(job.nodes), int(np.nan_to_num(job.run_s)), "0:0" if job.status == "COMPLETED" else "1:0"
    asked = "" if math.isnan(job.mem_req_mb) else f",mem={round(job.mem_req_mb * 1024 * p)}K"
    limit = "UNLIMITED" if math.isnan(job.time_req_s) else str(int(job.time_req_s // 60))
    tres = f"billing={p},cpu={p}{asked},node={n}"
    state = job.status if job.status != "CANCELLED" else "CANCELLED by 0"
    fields = {"JobIDRaw": str(job.job_id), "JobID": str(job.job_id), "State": state, "ExitCode": exit_,
              "ElapsedRaw": str(run), "TimelimitRaw": limit, "TotalCPU": "00:01.000", "AllocCPUS": str(p),
              "AllocTRES": tres, "ReqTRES": tres, "MaxRSS": "", "TRESUsageInTot": "", "NNodes": str(n)}
    lines = [fields]
    if not math.isnan(job.mem_used_mb):
        used = round(job.mem_used_mb * 1024 * p)  # KiB, all tasks
        step = {**fields, "TimelimitRaw": "", "ReqTRES": "", "AllocTRES": f"cpu={p}{asked},node={n}"}
        lines.append({**step, "JobIDRaw": f"{job.job_id}.batch", "JobID": f"{job.job_id}.batch", "NNodes": "1",
                      "MaxRSS": f"{used // (2 * n)}K", "TRESUsageInTot": f"cpu=00:00:01,mem={used // (2 * n)}K"})
        lines.append({**step, "JobIDRaw": f"{job.job_id}.0", "JobID": f"{job.job_id}.0",
                      "MaxRSS": f"{used // p}K", "TRESUsageInTot": f"cpu=00:01:00,mem={used}K,vmem={2 * used}K"})
    return ["|".join(line[name] for name in USAGE_FIELDS) for line in lines]


def collect(store, jobs: pd.DataFrame, until: int, unaccounted: set[int]) -> None:
    """The collector, told of each state change up to `until` (Slurm's notices: `Collector.fetch`); then each job that
    ended by then, but the `unaccounted`, with its use as the collector keeps it from accounting's parsable lines."""
    clock = [0.0]
    slurm = Replay(**NO_ACCOUNTING)
    cluster = jobs["cluster"].iloc[0]
    collector = Collector(store, cluster, slurm, clock=lambda: clock[0])
    batches: dict[int, dict[int, dict]] = {}
    for moment, job in sorted(observations(jobs), key=lambda pair: pair[0]):
        if moment <= until:
            batches.setdefault(moment, {})[job["job_id"]] = job
    for moment in sorted(batches):
        clock[0] = float(moment)
        slurm.answers["squeue"] = json.dumps({"jobs": list(batches[moment].values())})
        collector.fetch(sorted(batches[moment]))
    ended = jobs.loc[(np.array(ended_at(jobs)) <= until) & ~jobs["job_id"].isin(unaccounted).to_numpy()]
    usage = sacct_usage("\n".join(["|".join(USAGE_FIELDS)] + sum((sacct_lines(j) for j in ended.itertuples()), [])))
    assert sorted(usage) == sorted(ended["job_id"])
    for job in ended.itertuples():
        store.put_usage(JobKey(cluster, int(job.job_id), epoch(job.submit_time)), usage[job.job_id])


def ended_at(jobs: pd.DataFrame) -> list[int]:
    return [epoch(j.submit_time) + 60 if cancelled else epoch(j.end_time)
            for j, cancelled in zip(jobs.itertuples(), never_ran(jobs), strict=True)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Two clusters in one store, collected in Stockholm: 300 real HPC2N jobs and 300 real SDSC-SP2 jobs (17 of them
    cancelled while pending), each up to the submit of its 280th (jobs still pending and running then); every 25th
    finished job without accounting's word yet."""
    uri = f"sqlite:{tmp_path_factory.mktemp('site-store')}"
    slices, expected = [], []
    with zone(SITE_ZONE), open_store(uri) as store:
        for path, first in ((HPC2N, 40_000), (SDSC, 20_000)):
            jobs = trace_slice(path, first, 300)
            until = epoch(jobs["submit_time"].iloc[279])
            unaccounted = set(jobs["job_id"].iloc[::25])
            collect(store, jobs, until, unaccounted)
            rows = (pd.Series(ended_at(jobs)) <= until) & ~jobs["job_id"].isin(unaccounted) & ~never_ran(jobs)
            slices.append(jobs)
            expected.append(jobs.loc[rows.to_numpy(), list(COLUMNS)])
    return {"uri": uri, "jobs": slices, "expected": pd.concat(expected, ignore_index=True)}


def ingested(uri: str, tmp_path) -> tuple[pd.DataFrame, dict]:
    report = steps.ingest("sizing", uri, tmp_path / "dataset")  # what the pipeline's ingest step calls
    return pd.read_parquet(tmp_path / "dataset" / "sizing_jobs.parquet"), report.as_dict()


def compared(rows: pd.DataFrame) -> pd.DataFrame:
    """sizing_jobs rows but their line, by cluster and job, times in whole seconds."""
    rows = rows.drop(columns="line").sort_values(["cluster", "job_id"]).reset_index(drop=True)
    return rows.assign(**{c: pd.to_datetime(rows[c], utc=True).dt.as_unit("s") for c in ("submit_time", "end_time")})


def test_a_store_gives_the_rows_of_the_traces_for_the_same_jobs(site, tmp_path):
    with zone(SITE_ZONE):
        rows, report = ingested(site["uri"], tmp_path)
    assert report["bad_rows"] == 0 and steps.validate(tmp_path / "dataset")["success"]
    want = site["expected"]
    assert 400 <= len(want) == len(rows)
    hpc2n, sdsc = site["jobs"]
    assert never_ran(sdsc).sum() > 10 and want["mem_used_mb"].notna().sum() > 200  # the cases are there
    assert (hpc2n["nodes"] > 1).sum() > 20 and set(want["status"]) == {"COMPLETED", "CANCELLED"}
    assert want["name"].notna().sum() > 200 and want["queue"].nunique() > 1
    got = compared(rows)
    pd.testing.assert_frame_equal(got, compared(want), check_dtype=False, check_exact=False, rtol=1e-6, atol=2e-3)
    assert rows["line"].is_monotonic_increasing  # the store's order
    # memory per CPU as the trace states it per processor, from memory per node (accounting rounds MiB to 3 places)
    assert (got["mem_used_mb"] - compared(want)["mem_used_mb"]).abs().max() < 2e-3


def test_redis_gives_the_rows_sqlite_gives(site, fresh_redis, tmp_path):
    from jobaware.store.copy import copy

    with open_store(site["uri"]) as source, open_store(fresh_redis) as target:
        copy(source, target)
    with zone(SITE_ZONE):
        tables = [ingested(uri, tmp_path / name)[0] for name, uri in (("a", site["uri"]), ("b", fresh_redis))]
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_the_gate_minimum_is_said_before_training_with_how_many_jobs_are_missing(site, tmp_path):
    with zone(SITE_ZONE):
        rows, _ = ingested(site["uri"], tmp_path)
    with pytest.raises(JobawareError) as refused:
        steps.validate_step(str(tmp_path / "dataset"), str(tmp_path / "report.json"))
    assert str(refused.value).startswith(
        f"the gate needs 1,000 test jobs with a known run time, a time asked and an earlier job of their user: the "
        f"store {site['uri']} has {len(rows)} jobs, whose test split would hold ")
    said = re.search(r"would hold ([\d,]+); about ([\d,]+) more jobs are needed \(the test split is the last 30%, by "
                     r"submit time\)$", str(refused.value))
    tested, more = (int(said.group(k).replace(",", "")) for k in (1, 2))
    assert 0 < tested < 0.3 * len(rows) and more > 1000 - tested
    assert capabilities.get("sizing").min_eval_rows == 1000
    # a store whose jobs state memory and no time limit (as HTCondor's) is judged on memory
    from jobaware.sizing.train import gate_size

    rows.assign(time_req_s=np.nan).to_parquet(tmp_path / "dataset" / "sizing_jobs.parquet")
    assert gate_size(tmp_path / "dataset", 1000, "this data").startswith(
        f"the gate needs 1,000 test jobs with a known memory use, a memory asked and an earlier job of their user: "
        f"this data has {len(rows)} jobs, whose test split would hold ")
    # a trace or store with neither asked (OSC-Clust) has nothing to size against: said so, not "more jobs"
    rows.assign(time_req_s=np.nan, mem_req_mb=np.nan).to_parquet(tmp_path / "dataset" / "sizing_jobs.parquet")
    assert gate_size(tmp_path / "dataset", 1000, "this data") == (
        f"the gate needs 1,000 test jobs with a known run time, a time asked and an earlier job of their user: this "
        f"data has {len(rows)} jobs, whose test split would hold 0; none of its jobs has a run time, a time asked and "
        "an earlier job of its user: nothing to size")


def test_jobs_that_did_not_run_to_an_accounted_end_are_no_rows_and_bad_records_are_quarantined(tmp_path):
    uri = f"sqlite:{tmp_path / 'store'}"
    base = {"user": "ann", "account": "physics", "partition": "long", "name": "sim", "processors_req": 4,
            "nodes_req": 2, "wallclock_req": 3600.0, "mem_req": 8000.0}
    usage = {"source": "sacct", "state": "COMPLETED", "elapsed_s": 540, "time_limit_s": 3600, "cpus": 4, "nodes": 2,
             "mem_req_mib": 4000.0, "mem_used_mib": 1000.0}
    t = 1_700_000_000
    with zone("UTC"), open_store(uri) as store:
        for job_id, final, row, used in [
                (1, "COMPLETED", {"start_time": t + 60, "end_time": t + 600}, usage),
                (2, "TIMEOUT", {"start_time": t + 60, "end_time": t + 3660}, {**usage, "mem_req_mib": None}),
                (3, None, {"start_time": t + 60}, None),                                  # running: no row
                (4, "COMPLETED", {"start_time": t + 60, "end_time": t + 600}, None),     # no accounting: no row
                (5, "CANCELLED", {"start_time": t + 60, "end_time": t + 60}, usage),     # cancelled pending: no row
                (6, "COMPLETED", {"start_time": t - 60, "end_time": t + 600}, usage),    # starts before its submit
                (7, "COMPLETED", {"start_time": t + 60, "end_time": t + 600}, {**usage, "elapsed_s": "9 min"}),
                (8, "COMPLETED", {"start_time": t + 60, "end_time": t + 600}, {**usage, "mem_used_mib": 1e12}),
                (9, "COMPLETED", {"start_time": t + 60, "end_time": t + 600}, ["sacct"])]:
            key = JobKey("site", job_id, t + job_id)
            store.put_job(key, {**base, "submit_time": t + job_id, **row})
            if final:
                store.put_final(key, final, "sacct")
            if used is not None:
                store.put_usage(key, used)
        rows, report = ingested(uri, tmp_path)
    assert list(rows["job_id"]) == [1, 2] and report["bad_rows"] == 4
    first = rows.iloc[0]
    assert (first["user"], first["group"], first["name"], first["queue"], first["procs"]) == ("ann", "physics", "sim",
                                                                                               "long", 4)
    assert (first["time_req_s"], first["run_s"], first["status"]) == (3600.0, 540.0, "COMPLETED")
    assert (first["mem_req_mb"], first["mem_used_mb"]) == (2000.0, 500.0)  # per node, times 2 nodes, over 4 CPUs
    assert rows.iloc[1]["status"] == "FAILED" and np.isnan(rows.iloc[1]["mem_req_mb"])  # two nodes: the row can't say
    assert report["problems"] == [
        f"{uri} job site:7:{t + 7}: field 'usage.elapsed_s': expected a run time in seconds (got '\"9 min\"')",
        f"{uri} job site:8:{t + 8}: field 'usage.mem_used_mib': more than 1,000,000,000 MB per processor "
        "(got '1000000000000.0')",
        f"{uri} job site:9:{t + 9}: field 'usage': expected what accounting said of the job's use (an object) "
        "(got '[\"sacct\"]')",
        f"{uri} job site:6:{t + 6}: field 'start_time': before its submit (got '{t - 60}')"]
    quarantine = [json.loads(line) for line in (tmp_path / "dataset" / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["file"], q["line"], q["record"]["job_id"]) for q in quarantine] == [
        (uri, 7, 7), (uri, 8, 8), (uri, 9, 9), (uri, 6, 6)]


def test_a_store_without_accounting_is_one_line(tmp_path):
    uri = f"sqlite:{tmp_path / 'store'}"
    t = 1_700_000_000
    with zone("UTC"), open_store(uri) as store:
        key = JobKey("site", 1, t)
        store.put_job(key, {"user": "ann", "submit_time": t, "start_time": t + 1, "end_time": t + 9})
        store.put_final(key, "COMPLETED", "observed")
        with pytest.raises(InputError, match=rf"^{uri}: none of its 1 jobs ended with accounting's word on its use"):
            steps.ingest("sizing", uri, tmp_path / "dataset")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_pipeline_trains_on_a_store_and_a_store_too_small_is_refused_before_training(site, tmp_path):
    """`jobaware pipeline run sizing --input sqlite:STORE` through the CLI (kfp.local): 4,500 real HPC2N jobs collected
    with their use train and register a model; the 600-job site store stops at validation, before training, saying
    how many more jobs the gate needs."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    jobs = trace_slice(HPC2N, 60_000, 4500)
    large = f"sqlite:{tmp_path / 'large'}"
    with zone(SITE_ZONE), open_store(large) as store:
        collect(store, jobs, epoch(jobs["submit_time"].iloc[-1]), set())
    env = {**os.environ, "JOBAWARE_HOME": str(tmp_path / "home"), "TZ": SITE_ZONE}
    env.pop("MLFLOW_TRACKING_URI", None)
    said = {}
    for uri in (site["uri"], large):
        done = subprocess.run([str(Path(sys.executable).with_name("jobaware")), "pipeline", "run", "sizing", "--input",
                               uri, "--param", "max_iter=20"], capture_output=True, text=True, env=env, timeout=840,
                              check=False)
        said[uri] = (done.returncode, done.stdout + done.stderr)
    code, small = said[site["uri"]]
    assert code == 1 and "✓ ingest" in small and "✗ validate" in small and "✓ train" not in small, small
    assert small.strip().splitlines()[-1].startswith(
        f"the gate needs 1,000 test jobs with a known run time, a time asked and an earlier job of their user: the "
        f"store {site['uri']} has {len(site['expected'])} jobs")
    code, trained = said[large]
    assert code == 0 and "✓ train" in trained and "jobaware-sizing version 1 (champion)" in trained, trained
