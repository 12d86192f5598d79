import numpy as np
import pandas as pd
import pytest

from jobaware.failure.features import FEATURES, build_features, job_class_keys
from jobaware.failure.reader import read_jobs
from jobaware.failure.reader.slurm import parse_request
from tests.conftest import KTH


@pytest.fixture(scope="module")
def jobs(synthetic):
    table, _ = read_jobs(synthetic[0])
    return table.iloc[:6000].reset_index(drop=True)


@pytest.fixture(scope="module")
def many_jobs(synthetic):
    return read_jobs(synthetic[0])[0]


def assert_same(a: pd.DataFrame, b: pd.DataFrame, exact: bool = False) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False, check_exact=exact)


def test_changing_later_jobs_changes_no_earlier_feature(jobs):
    cut = jobs["submit_time"].quantile(0.5)
    later = jobs["submit_time"] > cut
    changed = jobs.copy()
    rng = np.random.default_rng(0)
    changed.loc[later, "state"] = rng.choice(["COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL"], later.sum())
    changed.loc[later, "run_time"] = changed.loc[later, "run_time"] * 3
    changed.loc[later, "end_time"] = changed.loc[later, "end_time"] + pd.Timedelta(hours=5)
    changed.loc[later, "wallclock_req"] = 60.0
    changed.loc[later, "user"] = "someone_else"
    before, after = build_features(jobs), build_features(changed)
    assert_same(before.loc[~later], after.loc[~later])
    assert not before.loc[later].equals(after.loc[later])  # the change did reach the later jobs


def test_a_jobs_own_outcome_never_reaches_its_features(jobs):
    changed = jobs.copy()
    i = 4000
    changed.loc[i, ["state", "run_time"]] = ["OUT_OF_MEMORY", 1.0]
    changed.loc[i, "end_time"] = changed.loc[i, "start_time"] + pd.Timedelta(seconds=1)
    changed.loc[i, "start_time"] = changed.loc[i, "submit_time"]
    assert_same(build_features(jobs).loc[[i]], build_features(changed).loc[[i]])


def test_only_jobs_that_ended_strictly_before_submit_count():
    base = {"user": "u", "account": "a", "partition": "p", "qos": "q", "wallclock_req": 600.0, "nodes_req": 1,
            "processors_req": 1, "gpus_req": 0, "mem_req": 0.0, "name": "n", "work_dir": "w", "submit_line": "s"}
    t = pd.Timestamp("2020-01-01 10:00:00")
    frame = pd.DataFrame([
        {**base, "job_id": 1, "submit_time": t, "start_time": t, "end_time": t + pd.Timedelta(minutes=5), "run_time": 300.0, "state": "FAILED"},
        {**base, "job_id": 2, "submit_time": t + pd.Timedelta(minutes=5), "state": "PENDING"},
        {**base, "job_id": 3, "submit_time": t + pd.Timedelta(minutes=5, seconds=1), "state": "PENDING"},
    ])
    from jobaware.jobtable.common import to_canonical_dtypes

    features = build_features(to_canonical_dtypes(frame))
    assert list(features["user_n"]) == [0.0, 0.0, 1.0]  # job 1 ended at job 2's submit second: not before it
    assert features.loc[2, "user_last_failed"] == 1.0 and features.loc[2, "user_streak"] == 1.0
    assert features.loc[2, "user_since_fail_h"] == pytest.approx(1 / 3600)


def test_jobs_cancelled_before_they_started_feed_no_history():
    """Held test jobs cancelled as sacct shows them (no start) and as squeue does (start = end) did no work; a job
    cancelled while it ran did."""
    base = {"user": "u", "account": "a", "partition": "p", "qos": "q", "wallclock_req": 600.0, "nodes_req": 1,
            "processors_req": 1, "gpus_req": 0, "mem_req": 0.0, "name": "n", "work_dir": "w", "submit_line": "s"}
    t, minute = pd.Timestamp("2020-01-01 10:00:00"), pd.Timedelta(minutes=1)
    held = [{**base, "job_id": i, "submit_time": t, "start_time": start, "end_time": t + minute, "run_time": None,
             "state": "CANCELLED"} for i, start in ((1, None), (2, t + minute))]
    ran = {**base, "job_id": 3, "submit_time": t, "start_time": t, "end_time": t + minute, "run_time": 60.0,
           "state": "CANCELLED"}
    later = {**base, "job_id": 4, "submit_time": t + 2 * minute, "state": "PENDING"}
    from jobaware.jobtable.common import to_canonical_dtypes

    only_held = build_features(to_canonical_dtypes(pd.DataFrame([*held, later])))
    assert only_held.iloc[-1]["user_n"] == 0.0 and only_held.iloc[-1]["cluster_n"] == 0.0
    with_ran = build_features(to_canonical_dtypes(pd.DataFrame([*held, ran, later])))
    assert with_ran.iloc[-1]["user_n"] == 1.0 and with_ran.iloc[-1]["user_cancel_rate"] == pytest.approx(1.5 / 2)


def test_squeue_record_and_canonical_record_give_the_same_features():
    squeue = {"job_id": 7, "user_name": "alice", "account": "acct", "partition": "debug", "qos": "normal",
              "job_state": "PENDING", "time_limit": 30, "cpus": 4, "node_count": 1, "memory_per_node": 2000,
              "submit_time": 1700000000, "start_time": 0, "end_time": 0, "name": "sim", "tres_req_str": "cpu=4"}
    live = parse_request([squeue]).frame()
    canonical = parse_request([{"job_id": 7, "user": "alice", "account": "acct", "partition": "debug",
                                     "qos": "normal", "wallclock_req": 1800.0, "processors_req": 4, "nodes_req": 1,
                                     "mem_req": 2000.0, "gpus_req": 0, "name": "sim",
                                     "submit_time": str(live["submit_time"].iloc[0]), "state": "PENDING"}]).frame()
    assert_same(build_features(live), build_features(canonical))


def test_swf_post_run_fields_never_reach_features():
    jobs, _ = read_jobs(KTH)
    jobs = jobs.iloc[:3000]
    blind = jobs.copy()
    # wipe wait, run time and status: a job's own features must not move
    blind["state"] = "COMPLETED"
    blind["start_time"] = blind["submit_time"]
    blind["run_time"] = 1.0
    blind["end_time"] = blind["submit_time"] + pd.Timedelta(days=10_000)  # no job ends before any submit
    own = build_features(blind)
    history = ("user_", "account_", "name_", "qos_", "partition_", "job_class_", "cluster_")
    request_only = [f for f in FEATURES if not f.startswith(history) or f.startswith("user_submits")]
    assert_same(build_features(jobs)[request_only], own[request_only])
    assert (own["user_n"] == 0).all()  # with no job ended, there is no history at all


def test_the_serving_path_equals_the_batch_featurizer_before_inside_and_after_the_history(many_jobs):
    """Thousands of unended jobs at submit times before, inside and after the bundled history, one request:
    the online features (array lookups, submission log) equal build_features' feature by feature, exactly."""
    from jobaware.failure.bundle import FailureBundle

    jobs = many_jobs
    history = FailureBundle.history_tail(jobs.iloc[:8000])
    asked = jobs.iloc[8000:11000].copy().reset_index(drop=True)
    start, end = history["submit_time"].min(), history["end_time"].max()
    rng = np.random.default_rng(5)
    offsets = rng.uniform(-0.1, 1.2, len(asked)) * (end - start).total_seconds()
    asked["submit_time"] = (start + pd.to_timedelta(offsets.round(), unit="s")).astype("datetime64[s]")
    asked.loc[::7, "submit_time"] = asked["submit_time"].iloc[0]  # bursts: many jobs in one second
    asked.loc[::11, "submit_time"] = history["end_time"].iloc[::11].to_numpy()[: len(asked.loc[::11])]  # at an end
    asked[["start_time", "end_time", "run_time", "state"]] = None
    asked["user"] = jobs["user"].sample(len(asked), replace=True, random_state=1).to_numpy()  # users with history
    asked["job_id"] = np.arange(10**8, 10**8 + len(asked))
    bundle = FailureBundle(model=None, history=history)
    fast = bundle.features(asked)
    assert_same(fast, build_features(asked, history), exact=True)
    assert (fast["user_n"] == 0).any() and (fast["user_n"] > 100).any() and (fast["burst_size"] > 5).any()


def test_a_request_counts_its_own_submissions_and_changes_no_later_answer(jobs):
    """A request's jobs count among its user's submissions, once each, as in training; what it names is never kept:
    a later request (any caller's) is answered as if it had not come (a caller could otherwise add submissions to
    any user's counts)."""
    from jobaware.failure.bundle import FailureBundle

    history = FailureBundle.history_tail(jobs.iloc[:3000])
    after = history["submit_time"].max() + pd.Timedelta(hours=2)
    asked = jobs.iloc[3000:3003].copy().reset_index(drop=True)
    asked[["start_time", "end_time", "run_time", "state"]] = None
    asked["user"], asked["submit_time"] = "newcomer", after
    asked["job_id"] = [10**9, 10**9 + 1, 10**9 + 2]
    bundle = FailureBundle(model=None, history=history)
    alone = bundle.features(asked.iloc[[2]])
    first = bundle.features(asked.iloc[:2])
    again = bundle.features(asked.iloc[[0, 0, 1]])  # a job named twice is one submission
    assert first["user_submits_1h"].tolist() == [2.0, 2.0] and again["burst_size"].tolist() == [2.0, 2.0, 2.0]
    assert_same(bundle.features(asked.iloc[[2]]), alone, exact=True)  # the two before left nothing behind
    both = bundle.features(asked.iloc[[0, 2]])
    assert both["user_submits_24h"].tolist() == [2.0, 2.0]
    assert_same(both, build_features(asked.iloc[[0, 2]], history), exact=True)


def test_the_submission_log_forgets_old_jobs_but_never_counts_a_recent_one_twice(monkeypatch):
    from jobaware.failure import online
    from jobaware.jobtable.common import JobColumns

    monkeypatch.setattr(online, "MAX_SUBMISSIONS", 3)

    def submitted(ids, day):
        return JobColumns.from_frame(pd.DataFrame(
            {"job_id": ids, "user": "u", "submit_time": pd.Timestamp("2020-01-01") + pd.Timedelta(days=day)}))

    log = online.SubmitLog(submitted([1, 2], 0))
    log.add(submitted([3, 4], 10))  # four jobs, more than three: those of day 0 are more than 8 days old, forgotten
    log.add(submitted([3], 10))  # listed again: still counted once
    assert set(log.seen) == {3, 4}
    assert log.counts(submitted([3], 10))[0].tolist() == [2.0, 2.0, 2.0]  # a logged job asked about: not twice
    assert log.counts(submitted([5], 10))[0].tolist() == [3.0, 3.0, 3.0]  # a new one counts, for itself alone
    assert set(log.seen) == {3, 4}


def test_featurizing_a_file_window_by_window_equals_featurizing_it_in_memory(many_jobs, tmp_path):
    """A shuffled table over many windows: jobs running across windows, bursts at a window's edge, long gaps;
    the windowed features (carried entity states and submissions) equal the in-memory ones exactly."""
    from jobaware.failure.train import featurize, featurize_file

    jobs = many_jobs.sort_values("submit_time", kind="stable").reset_index(drop=True)
    jobs.loc[1495:1510, "submit_time"] = jobs.loc[1500, "submit_time"]  # a burst where a window would be cut
    jobs.loc[1495:1510, "user"] = jobs.loc[1500, "user"]
    jobs.loc[::97, "end_time"] = jobs.loc[::97, "end_time"] + pd.Timedelta(days=3)  # ends many windows later
    jobs.loc[5, "end_time"] = jobs.loc[5, "submit_time"] - pd.Timedelta(hours=1)  # a record ending before its submit
    later = jobs.index >= 12000
    jobs.loc[later, "submit_time"] += pd.Timedelta(days=30)  # a month without jobs
    jobs.loc[later, ["start_time", "end_time"]] += pd.Timedelta(days=30)
    source = tmp_path / "jobs.parquet"
    shuffled = jobs.sample(frac=1.0, random_state=3)  # file order is not submit order
    shuffled.to_parquet(source, row_group_size=2000)
    out = tmp_path / "features.parquet"
    train_rows = featurize_file(source, out, window=1500)
    expected = featurize(shuffled)
    windowed = pd.read_parquet(out)
    assert train_rows == (expected["split"] == "train").sum() and pq_row_groups(out) >= 10
    assert_same(windowed, expected, exact=True)
    assert (expected["user_n"] > 1000).any() and (expected["burst_size"] >= 16).any()


def pq_row_groups(path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).num_row_groups


def test_job_class_keys_spell_each_request_one_way():
    nan = float("nan")
    keys = job_class_keys(["u1", "u1", "u1", None, "u2"], [4.0, 4.0, nan, 4.0, -0.0], [3600.0, 3600.0, 60.5, 1.0, nan])
    assert keys == ["u1|4x3600.0", "u1|4x3600.0", "u1|?x60.5", None, "u2|0x?"]
    assert job_class_keys(["u"], [0.0], [-0.0]) == job_class_keys(["u"], [0.0], [0.0]) == ["u|0x0.0"]
