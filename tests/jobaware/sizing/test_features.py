import numpy as np
import pandas as pd

from jobaware.sizing.features import FEATURES, build_features, live_features


def _assert_same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=True)


def test_changing_later_jobs_changes_no_earlier_feature(generated_jobs):
    jobs = generated_jobs.iloc[:2000].reset_index(drop=True)
    cut = jobs["submit_time"].iloc[1000]
    later = (jobs["submit_time"] > cut).to_numpy()
    changed = jobs.copy()
    changed.loc[later, "run_s"] = changed.loc[later, "run_s"] * 3 + 1
    changed.loc[later, "mem_used_mb"] = 1.0
    changed.loc[later, "end_time"] = changed.loc[later, "submit_time"] + pd.Timedelta(seconds=1)
    changed.loc[later, "time_req_s"] = 60.0
    before, after = build_features(jobs)[0], build_features(changed)[0]
    _assert_same(before.loc[~later], after.loc[~later])
    assert not before.loc[later].equals(after.loc[later])  # the change did reach the later jobs


def test_a_jobs_own_use_never_reaches_its_features(generated_jobs):
    jobs = generated_jobs.iloc[:1500].reset_index(drop=True)
    changed = jobs.copy()
    changed.loc[1200, ["run_s", "mem_used_mb"]] = [1.0, 1.0]
    changed.loc[1200, "end_time"] = changed.loc[1200, "submit_time"]  # it even ends the second it was submitted
    _assert_same(build_features(jobs)[0].loc[[1200]], build_features(changed)[0].loc[[1200]])


def _job(job_id, submit, end=None, run=None, user="u", asked=600.0):
    return {"job_id": job_id, "user": user, "group": "g", "name": "exe1", "queue": "q", "procs": 4.0,
            "time_req_s": asked, "mem_req_mb": 100.0, "submit_time": pd.Timestamp(submit, unit="s", tz="UTC"),
            "end_time": None if end is None else pd.Timestamp(end, unit="s", tz="UTC"), "run_s": run,
            "mem_used_mb": None if run is None else 50.0}


def test_only_jobs_that_ended_strictly_before_the_submit_second_count():
    jobs = pd.DataFrame([_job(1, 0, 300, 300.0), _job(2, 300), _job(3, 301)])
    features = build_features(jobs)[0]
    assert features.loc[1, "user_n"] == 0 and np.isnan(features.loc[1, "user_last"])
    assert features.loc[2, "user_n"] == np.log1p(1) and features.loc[2, "user_last"] == np.log1p(300)
    assert features.loc[2, "shape_recent_max"] == np.log1p(300) and features.loc[2, "user_since_h"] == 1 / 3600


def test_tsafrir_and_the_recent_floor_are_over_the_last_two_ended_jobs():
    jobs = pd.DataFrame([_job(1, 0, 100, 100.0), _job(2, 1, 201, 200.0), _job(3, 2, 402, 400.0), _job(4, 1000)])
    row = build_features(jobs)[0].loc[3]
    assert np.isclose(np.expm1(row["user_tef"]), 300) and np.isclose(np.expm1(row["user_recent_max"]), 400)
    assert np.isclose(np.expm1(row["user_max"]), 400) and row["user_n"] == np.log1p(3)


def test_a_live_job_sees_the_same_history_as_the_walk(generated_jobs):
    jobs = generated_jobs.iloc[:800].reset_index(drop=True)
    after = jobs["end_time"].max() + pd.Timedelta(hours=1)
    asked = jobs.iloc[[10, 20, 30]].assign(submit_time=after, end_time=pd.NaT, run_s=np.nan, mem_used_mb=np.nan)
    walked = build_features(pd.concat([jobs, asked], ignore_index=True))[0].iloc[-3:]
    _, states = build_features(jobs)
    live = live_features(asked.reset_index(drop=True), states)
    _assert_same(walked[list(FEATURES)], live[list(FEATURES)])
