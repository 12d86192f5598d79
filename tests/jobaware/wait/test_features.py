"""Features are known at submit: nothing that happens after a job's submit reaches them, and the serving path
(a queue snapshot) computes what the sweep over the trace computes."""

import numpy as np
import pandas as pd
import pytest

from jobaware.wait.features import HISTORY, RECENT, STATE, Snapshot, order, snapshot_features, sweep


def _features(jobs):
    features, _ = sweep(jobs)
    return features.assign(job_id=order(jobs)["job_id"].to_numpy()).set_index("job_id")


@pytest.mark.parametrize("position", [500, 1500, 2600])
def test_changing_anything_after_a_jobs_submit_changes_none_of_its_features(kth_head, position):
    jobs = order(kth_head)
    t = jobs["submit_time"].iloc[position]
    before = _features(jobs)
    rng = np.random.default_rng(position)
    changed = jobs.copy()
    later = (changed["submit_time"] > t).to_numpy()  # later submissions: other requests, other waits
    changed.loc[later, "processors_req"] = rng.integers(1, 100, later.sum())
    changed.loc[later, "wallclock_req"] = rng.integers(60, 86_400, later.sum()).astype(float)
    changed.loc[later, "user"] = "someone-else"
    shift = pd.to_timedelta(rng.integers(1, 50_000, len(changed)), unit="s")
    starts_later = (changed["start_time"] > t).to_numpy()  # later starts (the job's own included): later still
    changed.loc[starts_later, "start_time"] += shift[starts_later]
    changed.loc[starts_later, "end_time"] += shift[starts_later]
    ends_later = (changed["end_time"] > t).to_numpy() & ~starts_later  # later ends: later still
    changed.loc[ends_later, "end_time"] += shift[ends_later]
    changed["wait_s"] = (changed["start_time"] - changed["submit_time"]).dt.total_seconds()
    assert later.sum() > 300 and starts_later.sum() > later.sum() and ends_later.sum() > 0
    after = _features(changed)
    known = jobs["job_id"][jobs["submit_time"] <= t]
    pd.testing.assert_frame_equal(before.loc[known], after.loc[known])
    assert not before.drop(index=known).equals(after.drop(index=known))  # the change did reach later jobs


def test_a_wait_enters_history_only_once_its_job_has_started():
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    jobs = pd.DataFrame({
        "cluster": "c", "cluster_procs": 8, "timezone": "UTC", "job_id": [1, 2, 3], "user": ["a", "a", "a"],
        "group": None, "queue": "q", "partition": None, "processors_req": [8, 8, 1], "wallclock_req": 3600.0,
        "mem_req": None, "submit_time": [t0, t0 + pd.Timedelta(1, "s"), t0 + pd.Timedelta(600, "s")],
        "start_time": [t0, t0 + pd.Timedelta(3000, "s"), t0 + pd.Timedelta(3600, "s")],
        "end_time": [t0 + pd.Timedelta(3000, "s"), t0 + pd.Timedelta(3600, "s"), t0 + pd.Timedelta(3700, "s")],
        "wait_s": [0.0, 2999.0, 3000.0], "run_s": 100.0, "status": "COMPLETED", "line": [1, 2, 3]})
    features = _features(jobs)
    # at job 3's submit, job 1 (wait 0) has started, job 2 (wait 2,999 s) has not: only a 0 wait is known
    assert features.loc[3, "user_last"] == pytest.approx(np.log(60.0)) and features.loc[3, "user_n"] == pytest.approx(np.log(2))
    assert features.loc[3, "pend_n"] == 1 and features.loc[3, "busy"] == 1.0 and features.loc[3, "free"] == 0.0
    # job 1 is taken to run to its requested hour: 3,000 s after job 3 is submitted
    assert features.loc[3, "until_fit"] == pytest.approx(np.log(3600 - 600 + 60.0))
    assert features.loc[1, "pend_n"] == 0 and np.isnan(features.loc[1, "user_fast"])


def _snapshot_at(jobs: pd.DataFrame, position: int) -> tuple[pd.DataFrame, Snapshot, pd.DataFrame]:
    """The queue as the sweep sees it at the submit of the job at `position` of `order(jobs)`."""
    jobs = order(jobs)
    t = jobs["submit_time"].iloc[position]
    before = np.arange(len(jobs)) < position
    started = jobs["start_time"] < t
    running = jobs[started & (jobs["end_time"] >= t) & (jobs["end_time"] > jobs["start_time"])]
    pending = jobs[before & ~started & jobs["start_time"].notna()]
    snapshot = Snapshot(time=t.timestamp(), capacity=float(jobs["cluster_procs"].iloc[0]), timezone="Europe/Stockholm",
                        cluster=jobs["cluster"].iloc[0], running=running, pending=pending)
    return jobs.iloc[[position]], snapshot, jobs[started]


@pytest.mark.parametrize("position", [700, 1900, 2999])
def test_a_snapshot_of_the_queue_gives_the_features_the_sweep_gives(kth_head, position):
    """The service's path: the queue at a job's submit as a scheduler would show it, and the history of the jobs
    started before it, give that job the sweep's features exactly."""
    job, snapshot, started = _snapshot_at(kth_head, position)
    _, history = sweep(started)
    served = snapshot_features(job, snapshot, history)
    swept = _features(kth_head).loc[job["job_id"]]
    assert len(snapshot.running) > 0 and len(snapshot.pending) > 0
    queue = list(STATE) + list(HISTORY) + list(RECENT)
    np.testing.assert_allclose(served[queue].to_numpy(), swept[queue].to_numpy())
    np.testing.assert_allclose(served[["hour", "log2_procs", "log_req"]].to_numpy(),
                               swept[["hour", "log2_procs", "log_req"]].to_numpy())


def test_a_pending_job_sees_only_the_jobs_ahead_of_it(kth_head):
    job, snapshot, started = _snapshot_at(kth_head, 1900)
    _, history = sweep(started)
    second = snapshot.pending.iloc[[1]]
    features = snapshot_features(second, snapshot, history)
    assert features["pend_n"].iloc[0] == 1  # the first pending job alone is ahead of the second
    new = snapshot_features(job, snapshot, history)
    assert new["pend_n"].iloc[0] == len(snapshot.pending)


def test_a_cluster_without_a_stated_size_takes_the_most_asked_so_far(kth_head):
    from jobaware.wait.features import capacities

    jobs = order(kth_head).assign(cluster_procs=None)
    jobs["cluster_procs"] = jobs["cluster_procs"].astype("float64")
    seen = capacities(jobs)
    assert (np.diff(seen) >= 0).all() and seen[-1] == jobs["processors_req"].max()


def _trace(work: dict, start: np.ndarray, capacity: int) -> pd.DataFrame:
    """queue_jobs rows of a simulated workload."""
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    n = len(start)
    return pd.DataFrame({
        "cluster": "c", "cluster_procs": capacity, "timezone": "UTC", "job_id": np.arange(n),
        "user": [f"u{u}" for u in work["user"]], "group": None, "queue": "q", "partition": None,
        "processors_req": work["procs"].astype(float), "wallclock_req": work["req"], "mem_req": None,
        "submit_time": t0 + pd.to_timedelta(work["submit"], unit="s"),
        "start_time": t0 + pd.to_timedelta(start, unit="s"),
        "end_time": t0 + pd.to_timedelta(start + work["run"], unit="s"), "wait_s": start - work["submit"],
        "run_s": work["run"], "status": "COMPLETED", "line": np.arange(1, n + 1)})


def test_the_easy_estimate_is_the_start_easy_backfilling_gives_when_no_later_job_comes():
    """Every job running exactly its requested time, and the job the last one submitted: the estimate at its submit
    is the start that an EASY scheduler (the generator's, written independently) gives it."""
    from jobaware.wait.synth import _workload, simulate

    work = _workload(1200, np.random.default_rng(5))
    work["run"] = work["req"].copy()
    checked = 0
    for last in (150, 400, 700, 1000, 1199):
        prefix = {name: values[: last + 1] for name, values in work.items()}
        start = simulate(prefix)
        features, _ = sweep(_trace(prefix, start, 128))
        row = features.iloc[np.flatnonzero(order(_trace(prefix, start, 128))["job_id"] == last)[0]]
        if row["pend_n"] == 0 or row["pend_n"] >= 256:
            continue  # nothing to simulate, or more jobs ahead than the estimate plays
        assert np.exp(row["until_easy"]) - 60 == pytest.approx(start[last] - prefix["submit"][last], abs=1e-6)
        checked += 1
    assert checked >= 3


def test_recent_waits_are_those_of_jobs_started_in_the_hour_and_the_day_before_the_submit():
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    second = lambda s: t0 + pd.Timedelta(s, "s")  # noqa: E731
    # asked about: job 5, submitted at 90,000 s. Job 1 started more than a day before, job 2 within the day
    # (at once), job 3 within the hour (after 600 s); job 4 starts in the same second as job 5 is submitted: unseen
    submit = [0, 50_000, 87_000, 89_000, 90_000]
    start = [10, 50_000, 87_600, 90_000, 90_100]
    jobs = pd.DataFrame({
        "cluster": "c", "cluster_procs": 8, "timezone": "UTC", "job_id": [1, 2, 3, 4, 5], "user": "a",
        "group": None, "queue": "q", "partition": None, "processors_req": 1.0, "wallclock_req": 60.0,
        "mem_req": None, "submit_time": [second(s) for s in submit], "start_time": [second(s) for s in start],
        "end_time": [second(s + 30) for s in start], "wait_s": np.subtract(start, submit).astype(float),
        "run_s": 30.0, "status": "COMPLETED", "line": [1, 2, 3, 4, 5]})
    features = _features(jobs)
    assert features.loc[5, "recent_hour"] == pytest.approx(np.log(600 + 60.0))
    assert features.loc[5, "recent_hour_n"] == pytest.approx(np.log(2))
    assert features.loc[5, "recent_day"] == pytest.approx((np.log(60.0) + np.log(600 + 60.0)) / 2)
    assert features.loc[5, "recent_day_quick"] == pytest.approx(0.5)
    assert np.isnan(features.loc[1, "recent_day"]) and features.loc[1, "recent_hour_n"] == 0
