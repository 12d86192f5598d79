import numpy as np
import pandas as pd
import pytest

from jobaware.errors import JobawareError
from jobaware.sizing.bundle import NO_HISTORY, NO_TIME_ASKED
from jobaware.sizing.train import score, train_in_memory, write_eval


def test_the_under_estimation_rate_is_the_one_stated(trained):
    _, evaluation = trained
    model = evaluation.metrics["model"]
    assert model["jobs"] > 1000
    assert 0.03 <= model["under_rate"] <= 0.07, model
    assert 0.0 <= model["mem_under_rate"] <= 0.07, model


def test_the_model_beats_every_baseline_at_about_the_same_rate(trained):
    _, evaluation = trained
    metrics = evaluation.metrics
    assert set(metrics) == {"model", "request", "tsafrir", "user_p95"}
    for name in ("request", "tsafrir", "user_p95"):
        assert metrics[name]["jobs"] == metrics["model"]["jobs"]  # judged on the same jobs
        assert metrics["model"]["median_ratio"] < metrics[name]["median_ratio"], name
        assert metrics["model"]["quantile_loss"] < metrics[name]["quantile_loss"], name
    # generated users over-ask: the recommendations give back a good share of what was asked
    assert metrics["model"]["median_ratio"] < 0.8 and metrics["model"]["released_share"] > 0.2


def test_a_recommendation_is_never_below_what_similar_jobs_of_the_user_recently_needed_nor_above_the_request(
        trained, generated_jobs):
    bundle, _ = trained
    jobs = generated_jobs.iloc[3000:3600].reset_index(drop=True)
    recommended = bundle.recommend(jobs)
    features = bundle.features(jobs)
    floor = np.expm1(np.fmax(features["shape_recent_max"], features["program_recent_max"]))
    has = np.isfinite(floor) & recommended["time_s"].notna()
    asked = recommended["time_asked_s"][has]
    assert has.sum() > 300 and (recommended["time_s"][has] >= np.fmin(floor[has], asked)).all()
    assert (recommended["time_s"][has] <= asked).all() and (recommended["time_s"][has] < asked).mean() > 0.3
    memory = recommended["mem_per_cpu_mb"].notna()
    assert memory.sum() > 300 and (recommended["mem_per_cpu_mb"] <= recommended["mem_asked_per_cpu_mb"])[memory].all()


def test_no_history_and_no_request_get_a_clear_answer_not_a_number(trained):
    bundle, _ = trained
    asked = pd.DataFrame({"job_id": [1, 2, 3], "user": ["nobody-seen", "user1", "user1"],
                          "time_req_s": [3600.0, None, 3600.0], "procs": [4.0, 4.0, 4.0],
                          "submit_time": pd.Timestamp("2030-01-01", tz="UTC")})
    answer = bundle.recommend(asked)
    assert answer["note"].tolist()[:2] == [NO_HISTORY, NO_TIME_ASKED] and answer["time_s"][:2].isna().all()
    assert answer["time_s"][2] > 0 and answer["note"][2] is None and (answer["coverage"] == 0.95).all()


def test_the_gate_score_is_the_quantile_loss_of_the_stored_evaluation(trained, tmp_path):
    bundle, evaluation = trained
    write_eval(evaluation, tmp_path / "eval")
    loss, rows = score(bundle, tmp_path / "eval")
    assert rows > 1000 and 0 < loss < evaluation.metrics["request"]["quantile_loss"]


def test_a_trace_without_requested_times_is_sized_on_memory_and_one_with_neither_refused_in_one_line(generated_jobs):
    bundle, _ = train_in_memory(generated_jobs.assign(time_req_s=np.nan), {"max_iter": 5})
    assert set(bundle.models) == {"mem"}
    with pytest.raises(JobawareError, match="sizing needs at least 100"):
        train_in_memory(generated_jobs.assign(time_req_s=np.nan, mem_req_mb=np.nan), {"max_iter": 5})


def test_jobs_that_state_memory_and_no_time_limit_are_sized_and_judged_on_memory():
    """HTCondor jobs (the real IceCube log) state no time limit: a memory model alone, its quantile loss the gate's."""
    from jobaware.sizing.reader import read_event_log
    from tests.jobaware.sizing.test_reader import COSMIC

    jobs = read_event_log(COSMIC)[0]
    bundle, evaluation = train_in_memory(jobs, {"max_iter": 20})
    model = evaluation.metrics["model"]
    assert set(bundle.models) == {"mem"} and model["quantile_loss"] == model["mem_quantile_loss"]
    assert model["mem_jobs"] > 100 and 0 < model["mem_median_ratio"] < 0.5 and model["mem_under_rate"] <= 0.1
    answer = bundle.recommend(jobs.tail(3).drop(columns=["end_time"]))
    assert answer["time_s"].isna().all() and (answer["mem_per_cpu_mb"] < answer["mem_asked_per_cpu_mb"]).all()
    with pytest.raises(JobawareError, match="training jobs with a known run_s and time_req_s"):
        train_in_memory(jobs.assign(mem_req_mb=float("nan")))


def test_the_gate_scores_the_resource_of_the_evaluation_data_not_of_the_bundle(trained, tmp_path):
    """A memory-only bundle (HTCondor's) on evaluation data judged on run time scores nothing (NaN, 0 rows): the gate
    never sets one resource's loss against the other's."""
    from jobaware.sizing.reader import read_event_log
    from tests.jobaware.sizing.test_reader import COSMIC

    _, evaluation = trained
    write_eval(evaluation, tmp_path / "time")
    memory_only, memory_evaluation = train_in_memory(read_event_log(COSMIC)[0], {"max_iter": 20})
    loss, rows = score(memory_only, tmp_path / "time")
    assert np.isnan(loss) and rows == 0
    write_eval(memory_evaluation, tmp_path / "memory")
    loss, rows = score(memory_only, tmp_path / "memory")
    assert rows > 100 and loss == pytest.approx(memory_evaluation.metrics["model"]["quantile_loss"], rel=0.2)
