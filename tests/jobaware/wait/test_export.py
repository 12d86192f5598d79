"""Training `wait` on a site's job store: a store that the Slurm collector filled with real jobs (a slice of the real KTH
trace, replayed as Slurm 22.05's squeue shows them) gives the queue_jobs rows, and the features, that the trace gives
for the same jobs."""

from __future__ import annotations

import copy
import json
import time
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

from jobaware import capabilities, steps
from jobaware.adapters.slurm.collector import Collector
from jobaware.errors import JobawareError
from jobaware.store import JobKey, open_store
from jobaware.wait.features import STATE, order, sweep
from jobaware.wait.reader import read_trace
from jobaware.wait.schema import COLUMNS, TIME_COLUMNS, complete
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import KTH, SQUEUE

CLUSTER = "KTH-SP2-1996-2.1-cln"
TEMPLATE = json.loads(SQUEUE.read_text())["jobs"][0]  # a real squeue --json record of the test cluster
DST_END = pd.Timestamp("1996-10-27 01:00", tz="UTC")  # Stockholm's clocks went back an hour


@contextmanager
def zone(name: str):
    """This process's wall clock (libc's and tzlocal's) in `name` for a while."""
    import os

    import tzlocal

    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    tzlocal.reload_localzone()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
        tzlocal.reload_localzone()


def epoch(moment: pd.Timestamp) -> int:
    return int(moment.timestamp())


def record(job, state: str, reason: str = "None", start: int = 0, end: int = 0) -> dict:
    """One job as Slurm 22.05's `squeue --json` lists it."""
    out = copy.deepcopy(TEMPLATE)
    out.update(job_id=int(job.job_id), submit_time=epoch(job.submit_time), eligible_time=epoch(job.submit_time),
               job_state=state, state_reason=reason, start_time=start, end_time=end, cpus=int(job.processors_req),
               node_count=int(job.processors_req), time_limit=int(job.wallclock_req // 60), user_name=job.user,
               account=job.group, partition="", cluster=CLUSTER, priority=1000 if state == "PENDING" else 0,
               exit_code=0 if job.status == "COMPLETED" else 256, tres_req_str=f"cpu={int(job.processors_req)}")
    return out


def observations(jobs: pd.DataFrame, cancelled: set[int], held: int) -> list[tuple[int, dict]]:
    """(time, squeue record) of each job's state changes: pending at its submit, running at its start, its end
    state at its end; the `cancelled` jobs (and `held`, held by its user) are cancelled while pending at their
    start in the trace, which squeue shows with that moment as start and end."""
    seen = []
    for job in jobs.itertuples():
        submit, start, end = epoch(job.submit_time), epoch(job.start_time), epoch(job.end_time)
        seen.append((submit, record(job, "PENDING", "JobHeldUser" if job.job_id == held else "Priority")))
        if job.job_id in cancelled or job.job_id == held:
            seen.append((start, record(job, "CANCELLED", start=start, end=start)))
            continue
        seen.append((start, record(job, "RUNNING", start=start, end=start + int(job.wallclock_req))))
        seen.append((end, record(job, job.status, start=start, end=end)))
    return seen


def fill(store, seen: list[tuple[int, dict]], until: int, every: int = 0) -> None:
    """The collector, told of each state change (Slurm's notices: `Collector.fetch`), or polling every `every` seconds
    for the jobs that changed meanwhile, up to `until`; a job changing twice in one poll is seen as it is last."""
    clock = [0.0]
    slurm = Replay(**NO_ACCOUNTING)
    collector = Collector(store, CLUSTER, slurm, clock=lambda: clock[0])
    batches: dict[int, dict[int, dict]] = {}
    for moment, job in sorted(seen, key=lambda pair: pair[0]):
        if moment <= until:
            batches.setdefault(moment - moment % every if every else moment, {})[job["job_id"]] = job
    for moment in sorted(batches):
        clock[0] = float(moment)
        slurm.answers["squeue"] = json.dumps({"jobs": list(batches[moment].values())})
        collector.fetch(sorted(batches[moment]))


@pytest.fixture(scope="module")
def kth_store(tmp_path_factory):
    """600 real KTH jobs across Stockholm's change from summer time, collected in Stockholm up to the submit of the
    500th (jobs still pending and running then); six of them cancelled while pending, one held and cancelled."""
    jobs = read_trace(KTH)[0]
    first = int((jobs["submit_time"] < DST_END).sum()) - 300
    jobs = jobs.iloc[first:first + 600].reset_index(drop=True)
    waited = jobs.index[(jobs["wait_s"] > 0) & (jobs.index < 480)]
    cancelled = set(jobs.loc[waited[::40][:6], "job_id"])
    held = int(jobs.loc[waited[3], "job_id"])
    until = epoch(jobs["submit_time"].iloc[499])
    uri = f"sqlite:{tmp_path_factory.mktemp('kth-store')}"
    with zone("Europe/Stockholm"), open_store(uri) as store:
        fill(store, observations(jobs, cancelled, held), until)
    return {"uri": uri, "jobs": jobs, "cancelled": cancelled, "held": held, "until": until}


def expected_rows(jobs: pd.DataFrame, cancelled: set[int], held: int, until: int | None = None) -> pd.DataFrame:
    """The trace's rows as a Slurm store holds them: no cluster size; a job cancelled while pending (at its start in
    the trace) has no start or wait and leaves the queue when cancelled; a held one never is in it. With `until`, as
    the store knows them then: the jobs submitted by then, the open ones running or pending until then, no status."""
    rows = jobs.assign(cluster_procs=np.nan)
    cancel = rows["start_time"].copy()
    gone = rows["job_id"].isin(cancelled | {held}).to_numpy()
    is_held = (rows["job_id"] == held).to_numpy()
    rows.loc[gone, "end_time"] = cancel[gone]
    rows.loc[is_held, "end_time"] = pd.NaT
    rows.loc[gone, "start_time"] = pd.NaT
    rows.loc[gone, ["wait_s", "run_s"]] = np.nan
    rows.loc[gone, "status"] = "CANCELLED"
    if until is None:
        return rows
    now = pd.Timestamp(until, unit="s", tz="UTC")
    known = (rows["submit_time"] <= now).to_numpy()
    rows, cancel, gone, is_held = rows.loc[known].copy(), cancel[known], gone[known], is_held[known]
    pending = np.where(gone, cancel > now, rows["start_time"] > now)
    running = ~gone & (rows["start_time"] <= now).to_numpy() & (rows["end_time"] > now).to_numpy()
    rows.loc[pending, "start_time"] = pd.NaT
    rows.loc[pending, "end_time"] = now
    rows.loc[pending & is_held, "end_time"] = pd.NaT
    rows.loc[pending, "wait_s"] = np.nan
    rows.loc[running, "end_time"] = now
    rows.loc[pending | running, "run_s"] = np.nan
    rows.loc[pending | running, "status"] = None
    return rows


def ingested(uri: str, tmp_path) -> tuple[pd.DataFrame, dict]:
    report = steps.ingest("wait", uri, tmp_path / "dataset")  # what the pipeline's ingest step calls
    return pd.read_parquet(tmp_path / "dataset" / "queue_jobs.parquet"), report.as_dict()


COMPARED = [c for c in COLUMNS if c != "line"]


def compared(rows: pd.DataFrame) -> pd.DataFrame:
    """queue_jobs rows but their line, times in whole seconds."""
    rows = complete(rows)[COMPARED]
    return rows.assign(**{c: rows[c].dt.as_unit("s") for c in TIME_COLUMNS})


def test_a_store_gives_the_rows_and_features_of_the_trace_for_the_same_jobs(kth_store, tmp_path):
    jobs, until = kth_store["jobs"], kth_store["until"]
    with zone("Europe/Stockholm"):
        rows, report = ingested(kth_store["uri"], tmp_path)
    assert report["bad_rows"] == 0 and len(rows) >= 500
    assert steps.validate(tmp_path / "dataset")["success"]
    assert rows["submit_time"].min() < DST_END < rows["submit_time"].max()
    assert set(rows["timezone"]) == {"Europe/Stockholm"} == set(jobs["timezone"])
    want = expected_rows(jobs, kth_store["cancelled"], kth_store["held"], until)
    assert want["status"].isna().sum() > 20 and want["start_time"].isna().sum() > 10  # open jobs: running and pending
    got = complete(rows)
    pd.testing.assert_frame_equal(compared(got), compared(want), check_dtype=False)
    assert got["line"].is_monotonic_increasing  # the store's order is the trace's
    # each job's features (its queue, the histories, the recent waits at its submit) are those the whole slice
    # gives, futures included: what the store could not know yet changes nothing
    features, _ = sweep(order(got))
    whole = order(complete(expected_rows(jobs, kth_store["cancelled"], kth_store["held"])))
    every, _ = sweep(whole)
    pd.testing.assert_frame_equal(features, every.iloc[:len(rows)], check_exact=False, rtol=1e-12)


def test_a_job_cancelled_while_pending_held_its_place_in_the_queue(kth_store):
    """It was in the queue until cancelled, as a job that started then would have been; a held one never was; and
    neither gives a wait to learn from or to remember."""
    jobs, cancelled, held = kth_store["jobs"], kth_store["cancelled"], kth_store["held"]
    as_stored = complete(expected_rows(jobs, cancelled, held))
    started_then = as_stored.copy()  # the same jobs starting at their cancellation and ending at once
    gone = started_then["job_id"].isin(cancelled)
    started_then.loc[gone, "start_time"] = started_then.loc[gone, "end_time"]
    started_then = complete(started_then.assign(wait_s=np.nan))
    never_in = as_stored.copy()
    never_in.loc[gone, "end_time"] = pd.NaT
    stored, _ = sweep(order(as_stored))
    pd.testing.assert_frame_equal(stored[list(STATE)], sweep(order(started_then))[0][list(STATE)])
    assert (stored["pend_n"] != sweep(order(never_in))[0]["pend_n"]).sum() > 10
    assert as_stored.loc[as_stored["job_id"].isin(cancelled | {held}), "wait_s"].isna().all()


# jobs kept out of the queue for a while (the seconds after their submit when they became eligible) and how
DELAYED = {1955: (30_000, "BeginTime"),   # --begin: squeue gives the begin time from the submit on
           2046: (340_000, "Dependency"),  # its dependency ended after Stockholm's clocks went back
           2113: (230_000, "JobHeldUser"),  # held by its user, released after the change
           2396: (4_800, "Dependency")}    # eligible, still pending when the store is read


def delayed(jobs: pd.DataFrame, seen: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """The observations with the DELAYED jobs kept out: pending at their submit for their reason (a begin time given
    as squeue's eligible time; a dependency or a hold with none, squeue's 0), then, but for the begin time, pending
    for Priority once eligible."""
    out = []
    for moment, job in seen:
        if job["job_id"] in DELAYED and job["job_state"] == "PENDING":
            after, reason = DELAYED[job["job_id"]]
            eligible = job["submit_time"] + after
            out.append((moment, {**job, "state_reason": reason,
                                 "eligible_time": eligible if reason == "BeginTime" else 0}))
            if reason != "BeginTime":
                out.append((eligible, {**job, "eligible_time": eligible}))
            continue
        out.append((moment, job))
    return out


def eligible_from(jobs: pd.DataFrame) -> pd.DataFrame:
    """The trace's jobs with the DELAYED ones submitted when they became eligible, waiting from then."""
    jobs = jobs.copy()
    for job_id, (after, _) in DELAYED.items():
        k = jobs.index[jobs["job_id"] == job_id][0]
        jobs.loc[k, "submit_time"] += pd.Timedelta(seconds=after)
        jobs.loc[k, "wait_s"] -= after
    return jobs


def test_a_job_kept_out_by_a_begin_time_a_dependency_or_a_hold_waits_from_its_eligible_time(kth_store, tmp_path):
    """Its row enters the queue when it became eligible: its wait trains from then, and the jobs submitted before then
    do not count it pending; the features are still those the whole slice gives, futures included."""
    jobs, cancelled, held, until = (kth_store[k] for k in ("jobs", "cancelled", "held", "until"))
    uri = f"sqlite:{tmp_path / 'delayed'}"
    with zone("Europe/Stockholm"):
        with open_store(uri) as store:
            fill(store, delayed(jobs, observations(jobs, cancelled, held)), until)
        rows, report = ingested(uri, tmp_path / "rows")
    assert report["bad_rows"] == 0
    moved = eligible_from(jobs)
    ids = jobs.set_index("job_id")
    assert not set(DELAYED) & (cancelled | {held})
    assert ids.loc[2046, "submit_time"] < DST_END < ids.loc[2046, "submit_time"] + pd.Timedelta(seconds=340_000)
    assert ids.loc[2396, "start_time"] > pd.Timestamp(until, unit="s", tz="UTC")  # still pending then
    got = complete(rows)
    pd.testing.assert_frame_equal(compared(got), compared(expected_rows(moved, cancelled, held, until)),
                                  check_dtype=False)
    by_id = got.set_index("job_id")
    assert (by_id.loc[[1955, 2046, 2113], "wait_s"].to_numpy()
            == (ids.loc[[1955, 2046, 2113], "wait_s"] - [30_000, 340_000, 230_000]).to_numpy()).all()
    features, _ = sweep(order(got))
    every, _ = sweep(order(complete(expected_rows(moved, cancelled, held))))
    pd.testing.assert_frame_equal(features, every.iloc[:len(rows)], check_exact=False, rtol=1e-12)
    # as the export read before: pending from their submit; every job submitted meanwhile counted them ahead
    before = got.copy()
    for job_id, (after, _) in DELAYED.items():
        k = before.index[before["job_id"] == job_id][0]
        before.loc[k, "submit_time"] -= pd.Timedelta(seconds=after)
        before.loc[k, "wait_s"] += after
    old, _ = sweep(order(before))
    new = features.assign(job_id=order(got)["job_id"].to_numpy()).set_index("job_id")
    old = old.assign(job_id=order(before)["job_id"].to_numpy()).set_index("job_id")
    submit = by_id["submit_time"]
    kept_out = sum(((submit > submit[d] - pd.Timedelta(seconds=after)) & (submit < submit[d])).astype(int)
                   for d, (after, _) in DELAYED.items())
    others = [job_id for job_id in submit.index if job_id not in DELAYED]
    assert (kept_out[others] > 0).sum() > 50
    pd.testing.assert_series_equal(new.loc[others, "pend_n"], old.loc[others, "pend_n"] - kept_out[others],
                                   check_dtype=False, check_names=False)


def test_a_store_without_eligible_times_gives_the_rows_it_gave_before(kth_store, tmp_path):
    """The collector kept no eligible time (squeue's 0, or a store from before it kept them): each job waits from its
    submit, as the store whose eligible times are the submits gives."""
    jobs = kth_store["jobs"]
    seen = [(moment, {**job, "eligible_time": 0}) for moment, job in
            observations(jobs, kth_store["cancelled"], kth_store["held"])]
    uri = f"sqlite:{tmp_path / 'none'}"
    with zone("Europe/Stockholm"):
        with open_store(uri) as store:
            fill(store, seen, kth_store["until"])
            assert not any("eligible_time" in record["row"] for record in store.records())
        tables = [ingested(u, tmp_path / name)[0] for name, u in (("a", kth_store["uri"]), ("b", uri))]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    pd.testing.assert_frame_equal(compared(complete(tables[1])), compared(expected_rows(
        jobs, kth_store["cancelled"], kth_store["held"], kth_store["until"])), check_dtype=False)


def test_an_eligible_time_before_the_submit_after_the_start_or_unreadable(tmp_path):
    """Only an eligible time between the submit and the moment the job left the queue moves its entry; one that
    cannot be read quarantines the record."""
    uri = f"sqlite:{tmp_path / 'store'}"
    base = {"user": "ann", "account": "physics", "partition": "long", "processors_req": 4, "nodes_req": 1,
            "wallclock_req": 3600.0, "state": "COMPLETED", "reason": "Priority"}
    t = 1_700_000_000
    with zone("UTC"), open_store(uri) as store:
        for job_id, row, final in [
                (1, {"eligible_time": t + 30, "start_time": t + 60, "end_time": t + 600}, "COMPLETED"),
                (2, {"eligible_time": t - 60, "start_time": t + 60, "end_time": t + 600}, "COMPLETED"),
                (3, {"eligible_time": t + 90, "start_time": t + 60, "end_time": t + 600}, "COMPLETED"),
                (4, {"eligible_time": t + 60, "start_time": t + 60, "end_time": t + 600}, "COMPLETED"),
                (5, {"start_time": t + 60, "end_time": t + 600}, "COMPLETED"),
                (6, {"eligible_time": t + 20, "start_time": t + 50, "end_time": t + 50, "state": "CANCELLED"},
                 "CANCELLED"),                                                  # cancelled while pending
                (7, {"eligible_time": t + 20, "reason": "BeginTime", "start_time": t + 50, "end_time": t + 50,
                     "state": "CANCELLED"}, "CANCELLED"),                       # held, then cancelled: never in it
                (8, {"eligible_time": "soon", "start_time": t + 60, "end_time": t + 600}, "COMPLETED")]:
            key = JobKey("site", job_id, t)
            store.put_job(key, {**base, "submit_time": t, **row})
            store.put_final(key, final, "sacct")
        rows, report = ingested(uri, tmp_path)
    rows = rows.set_index("job_id")
    entered = (rows["submit_time"] - pd.Timestamp(t, unit="s", tz="UTC")).dt.total_seconds()
    assert entered.to_dict() == {1: 30, 2: 0, 3: 0, 4: 60, 5: 0, 6: 20, 7: 0}
    assert rows["wait_s"].to_dict() == pytest.approx({1: 30, 2: 60, 3: 60, 4: 0, 5: 60, 6: np.nan, 7: np.nan},
                                                     nan_ok=True)
    assert rows.loc[6, "end_time"] == pd.Timestamp(t + 50, unit="s", tz="UTC") and pd.isna(rows.loc[7, "end_time"])
    assert report["bad_rows"] == 1 and report["problems"] == [
        f"{uri} job site:8:{t}: field 'eligible_time': expected epoch seconds between 1970 and 2100 (got '\"soon\"')"]


def test_redis_gives_the_same_rows_as_sqlite(kth_store, fresh_redis, tmp_path):
    jobs = kth_store["jobs"]
    with zone("Europe/Stockholm"):
        with open_store(fresh_redis) as store:
            fill(store, observations(jobs, kth_store["cancelled"], kth_store["held"]), kth_store["until"])
        tables = [ingested(uri, tmp_path / name)[0] for name, uri in (("a", kth_store["uri"]), ("b", fresh_redis))]
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_read_in_another_zone_each_job_keeps_its_submit_s_offset(kth_store, tmp_path):
    jobs = kth_store["jobs"].set_index("job_id")
    with zone("UTC"):
        rows, _ = ingested(kth_store["uri"], tmp_path)
    assert set(rows["timezone"]) == {"UTC+01:00", "UTC+02:00"}
    rows = rows.set_index("job_id")
    assert (rows["submit_time"] == jobs.loc[rows.index, "submit_time"]).all()
    started = rows["start_time"].notna() & rows["status"].notna()
    same_side = (rows["submit_time"] < DST_END) == (rows["start_time"] < DST_END)
    exact = started & same_side
    assert (rows.loc[exact, "start_time"] == jobs.loc[rows.index[exact], "start_time"]).all()
    across = started & ~same_side
    assert across.any() and ((rows.loc[across, "start_time"] - jobs.loc[rows.index[across], "start_time"])
                             == -pd.Timedelta(hours=1)).all()  # taken at summer time: an hour early


def test_the_gate_minimum_is_said_before_training_with_how_many_jobs_are_missing(kth_store, tmp_path):
    from jobaware.wait.params import check_params
    from jobaware.wait.train import split

    with zone("Europe/Stockholm"):
        rows, _ = ingested(kth_store["uri"], tmp_path)
    with pytest.raises(JobawareError) as refused:
        steps.validate_step(str(tmp_path / "dataset"), str(tmp_path / "report.json"))
    tested = int(split(order(complete(rows)), check_params({}))[2].sum())
    needed = int(np.ceil(500 / (rows["wait_s"].notna().mean() * 0.3))) - len(rows)
    assert str(refused.value) == (
        f"the gate needs 500 test jobs with a known wait: the store {kth_store['uri']} has {len(rows)} jobs, whose test "
        f"split would hold {tested}; about {needed:,} more jobs are needed (the test split is the last 30%, by submit time; "
        "a job's wait is known once it starts)")
    assert capabilities.get("wait").min_eval_rows == 500 and tested < 500


def test_bad_records_are_quarantined_with_their_store_job_and_reason(tmp_path):
    uri = f"sqlite:{tmp_path / 'store'}"
    base = {"user": "ann", "account": "physics", "partition": "long", "processors_req": 4, "nodes_req": 1,
            "wallclock_req": 3600.0, "mem_req": 4000.0, "state": "COMPLETED"}
    t = 1_700_000_000
    with zone("UTC"), open_store(uri) as store:
        for job_id, submit, row in [
                (1, t, {"start_time": t + 60, "end_time": t + 600}),
                (2, t + 1, {"start_time": t - 60, "end_time": t + 600}),         # starts before its submit
                (3, t + 2, {"start_time": t + 60, "end_time": t + 30}),          # ends before its start
                (4, t + 3, {"processors_req": 0, "start_time": t + 9, "end_time": t + 99}),
                (5, t + 4, {"wallclock_req": "1h", "start_time": t + 9, "end_time": t + 99}),
                (1, t + 5, {"start_time": t + 60, "end_time": t + 600})]:       # job id 1 again (a reset)
            key = JobKey("site", job_id, submit)
            store.put_job(key, {**base, "submit_time": submit, **row})
            store.put_final(key, "COMPLETED", "sacct")
        rows, report = ingested(uri, tmp_path)
    assert list(rows["job_id"]) == [1] and report["bad_rows"] == 5
    assert rows["mem_req"].iloc[0] == 4000.0 and rows["queue"].iloc[0] == "long" and rows["group"].iloc[0] == "physics"
    assert report["problems"] == [
        f"{uri} job site:4:{t + 3}: field 'processors_req': expected at least 1 processor (got '0')",
        f"{uri} job site:5:{t + 4}: field 'wallclock_req': expected a time limit in seconds (got '\"1h\"')",
        f"{uri} job site:2:{t + 1}: field 'start_time': before its submit (got '{t - 60}')",
        f"{uri} job site:3:{t + 2}: field 'end_time': before its start (got '{t + 30}')",
        f"{uri} job site:1:{t + 5}: field 'job_id': seen before on this cluster (Slurm reused it after a reset or a "
        "wrap); the earlier job is kept (got '1')"]
    quarantine = [json.loads(line) for line in (tmp_path / "dataset" / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["file"], q["line"], q["record"]["job_id"]) for q in quarantine] == [
        (uri, 4, 4), (uri, 5, 5), (uri, 2, 2), (uri, 3, 3), (uri, 6, 1)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_pipeline_trains_on_a_store_and_a_store_too_small_is_refused_before_training(tmp_path):
    """`jobaware pipeline run wait --input sqlite:STORE` end to end (kfp.local): 2,200 real KTH jobs collected by polling
    every ten minutes train and register a model; 600 are refused at validation, saying how many more are needed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    jobs = read_trace(KTH)[0].iloc[:2400].reset_index(drop=True)
    seen = observations(jobs, set(), -1)
    env = {**os.environ, "JOBAWARE_HOME": str(tmp_path / "home"), "TZ": "Europe/Stockholm"}
    env.pop("MLFLOW_TRACKING_URI", None)
    results = {}
    for size in (600, 2200):
        uri = f"sqlite:{tmp_path / f'store{size}'}"
        with zone("Europe/Stockholm"), open_store(uri) as store:
            fill(store, seen, epoch(jobs["submit_time"].iloc[size - 1]), every=600)
        results[size] = subprocess.run(
            [str(Path(sys.executable).with_name("jobaware")), "pipeline", "run", "wait", "--input", uri, "--param",
             "max_iter=20"], capture_output=True, text=True, env=env, timeout=840, check=False)
    small, large = (results[size].stdout + results[size].stderr for size in (600, 2200))
    assert results[600].returncode == 1 and "✗ validate" in small and "✓ train" not in small
    assert small.strip().splitlines()[-1].startswith(
        f"the gate needs 500 test jobs with a known wait: the store sqlite:{tmp_path / 'store600'} has 600 jobs")
    assert results[2200].returncode == 0, large
    assert "✓ train" in large and "jobaware-wait version 1 (champion)" in large


def test_an_empty_store_is_one_line(tmp_path):
    from jobaware.errors import InputError

    uri = f"sqlite:{tmp_path / 'store'}"
    with open_store(uri) as store:
        store.put_checkpoint(CLUSTER, {})
    with pytest.raises(InputError, match=rf"^{uri}: the job store holds no jobs$"):
        steps.ingest("wait", uri, tmp_path / "dataset")
