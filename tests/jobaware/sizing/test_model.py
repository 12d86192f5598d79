"""The allocation of the miss budget and its calibration, on jobs whose true distributions are known: 60 % of the
jobs run 5-25 % of their request (a tight history), the others anywhere up to a share of it between 0.3 and 1 (a
loose one)."""

import numpy as np
import pytest

from jobaware.errors import JobawareError
from jobaware.sizing.model import (
    HAIR,
    LARGEST_KNOB,
    LEVELS,
    MEMORY,
    TIME,
    Jobs,
    SizingModel,
    conformal_knob,
    counted_use,
    least_knob,
)
from jobaware.sizing.params import check_params

ASKED = 36_000.0


def population(n: int, seed: int, floor: float = np.nan) -> tuple[Jobs, np.ndarray]:
    """`n` jobs with each one's exact miss probability at every level and a draw of what it used; and which are
    tight."""
    rng = np.random.default_rng(seed)
    tight, top = rng.random(n) < 0.6, rng.uniform(0.3, 1.0, n)
    ratio = np.where(tight, rng.uniform(0.05, 0.25, n), rng.uniform(0.0, top))
    miss = np.where(tight[:, None], np.clip((0.25 - LEVELS) / 0.20, 0, 1), np.clip(1.0 - LEVELS / top[:, None], 0, 1))
    jobs = Jobs(miss + HAIR, np.full(n, ASKED), np.full(n, 4.0), np.full(n, floor), ratio * ASKED)
    return jobs, tight


def model(objective: str, coverage: float = 0.95, resource=TIME) -> SizingModel:
    return SizingModel(resource, coverage, check_params({"objective": objective}))


@pytest.mark.parametrize("objective", ["median", "jobs", "proc_hours"])
def test_the_rate_on_a_held_out_day_is_the_one_calibrated_for(objective):
    sizing = model(objective).calibrate(population(5000, seed=1)[0])
    day, _ = population(5000, seed=2)
    bounds, fits = sizing.recommend(day, np.ones(5000, bool))
    assert abs(np.mean(day.used > bounds) - 0.05) <= 0.01
    # the budget is not spread evenly, 5 % on every job: some are all but sure to fit, others far less
    assert np.mean(fits >= 0.999) > 0.3 and np.mean(fits <= 0.9) > 0.02
    assert np.all(fits[bounds == ASKED] == 1.0) and abs(np.mean(fits) - 0.95) < 0.03  # the trees' estimates


def test_a_tight_history_gets_a_smaller_bound_than_a_loose_one_and_none_is_above_the_request():
    sizing = model("median").calibrate(population(5000, seed=1)[0])
    day, tight = population(2000, seed=3)
    bounds, _ = sizing.recommend(day, np.ones(2000, bool))
    assert np.median(bounds[tight]) <= 0.3 * ASKED < np.median(bounds[~tight])
    assert np.all(bounds <= ASKED) and np.mean(bounds[~tight & (day.used > 0.9 * ASKED)] == ASKED) > 0.9
    # the median objective's common fraction: the smallest at least half the recent jobs can be given
    assert sizing.calibration.fraction == 0.3 and np.median(bounds / ASKED) <= 0.3


def test_the_floor_raises_a_bound_but_never_past_the_request():
    sizing = model("jobs").calibrate(population(5000, seed=1)[0])
    for floor in (0.5 * ASKED, 2 * ASKED):
        day, tight = population(1000, seed=4, floor=floor)
        bounds, _ = sizing.recommend(day, np.ones(1000, bool))
        assert np.all(bounds >= min(floor, ASKED)) and np.all(bounds <= ASKED)


def test_a_use_past_the_request_counts_for_time_up_to_the_request_and_for_memory_in_full():
    used, asked = np.array([100.0, 150.0]), np.array([120.0, 120.0])
    assert counted_use(TIME, used, asked).tolist() == [100.0, 120.0]  # past the limit: the scheduler's delay
    assert counted_use(MEMORY, used, asked).tolist() == [100.0, 150.0]
    jobs, _ = population(2000, seed=5)
    jobs.used[:] = 1.5 * ASKED  # every job used more memory than it asked: no recommendation can be met
    memory = model("jobs", resource=MEMORY).calibrate(jobs)
    assert memory.calibration.knob == LARGEST_KNOB  # every job keeps its request, never more
    assert np.all(memory.recommend(jobs, np.ones(2000, bool))[0] == ASKED)


def test_the_knob_is_the_conformal_rank_of_the_recent_scores():
    scores = np.arange(1.0, 100.0)  # 99 recent jobs
    assert conformal_knob(scores, 0.95) == 95.0  # the ceil(100 x 0.95)-th smallest
    assert conformal_knob(scores, 0.999) == LARGEST_KNOB  # beyond what 99 jobs can tell
    with pytest.raises(JobawareError, match="need at least 50"):
        conformal_knob(np.arange(10.0), 0.95)


def test_the_least_knob_is_where_the_choice_turns():
    jobs, _ = population(300, seed=6)
    sizing = model("jobs")
    cost = sizing.costs(jobs, np.nan)
    assert np.all(least_knob(cost, jobs.miss, np.full(300, 3)) == 0)  # levels 0.01-0.05: never likely enough
    for first in (7, 12):
        knob = least_knob(cost, jobs.miss, np.full(300, first))
        for factor, turned in ((0.999, False), (1.001, True)):
            chosen = len(LEVELS) - 1 - np.argmin((cost + factor * knob[:, None] * jobs.miss)[:, ::-1], axis=1)
            finite = np.isfinite(knob) & (knob > 0)
            assert finite.sum() > 100 and np.all((chosen[finite] >= first) == turned)


def test_jobs_that_all_used_the_same_share_of_their_request_are_sure_of_it():
    """HPC2N's memory: most jobs state as used all they asked; trees fitted on one class still answer."""
    import pandas as pd

    n = 200
    features = pd.DataFrame({"user_last": np.arange(n, dtype=float), "user_mem_last": np.arange(n, dtype=float),
                             "log_asked": np.linspace(1, 2, n)})
    sizing = SizingModel(MEMORY, 0.95, check_params({})).fit(features, np.full(n, 400.0), np.full(n, 400.0),
                                                            np.ones(n))
    miss = sizing.miss_probabilities(features)
    sure = np.where(LEVELS < 1.0, 1.0, 0.0) + HAIR  # more than any share below all of it, never more than all
    assert miss.shape == (n, len(LEVELS)) and np.allclose(miss, sure)
