"""The search space: YAML -> seeded trials; the best trial by the validation metric."""

from __future__ import annotations

import math

import pytest

from jobaware.errors import JobawareError
from jobaware.hold.sweep import DEFAULT_SPACE, trials
from jobaware.hold.train import best_trial


def test_the_default_space_gives_its_trials_the_same_way_every_time():
    first, again = trials(), trials(DEFAULT_SPACE)
    assert first == again and len(first) == 3
    for trial in first:
        assert trial["network"] == "lstm" and trial["j"] in (8, 16) and 0.001 <= trial["learning_rate"] <= 0.01
        assert set(trial) == {"network", "j", "m", "timeframe_len", "layers", "hidden_size", "learning_rate",
                              "batch_size", "epochs", "patience"}


def test_seeds_ranges_and_grids():
    space = {"seed": 1, "trials": 20, "space": {"timeframe_len": {"low": 60, "high": 400, "step": 20},
                                                "hidden_size": [16, 32, 64], "dropout": {"low": 0.0, "high": 0.5}}}
    drawn = trials(space)
    assert all(t["timeframe_len"] % 20 == 0 and 60 <= t["timeframe_len"] <= 400 for t in drawn)
    assert all(isinstance(t["timeframe_len"], int) and isinstance(t["dropout"], float) for t in drawn)
    assert trials({**space, "seed": 2}) != drawn
    grid = trials({"method": "grid", "trials": 5, "space": {"j": [4, 8], "m": [10, 20, 30]}})
    assert grid == [{"j": 4, "m": 10}, {"j": 4, "m": 20}, {"j": 4, "m": 30}, {"j": 8, "m": 10}, {"j": 8, "m": 20}]


@pytest.mark.parametrize("space, words", [
    ({"space": {"depth": [1]}}, "unknown parameter"),
    ({"space": {"epochs": [2.5]}}, "trial 0: .*epochs"),
    ({"space": {"j": []}}, "space.j: expected a list of choices"),
    ({"method": "grid", "space": {"learning_rate": {"low": 0.1, "high": 0.2}}}, "grid needs lists"),
    ({"space": {"learning_rate": {"low": 0, "high": 0.1, "log": True}}}, "low > 0"),
    ("j: [1, 2", "not YAML"),
    ("- 1\n- 2\n", "expected a mapping"),
])
def test_bad_spaces_are_refused_with_where(space, words):
    with pytest.raises(JobawareError, match=words):
        trials(space)


def test_the_best_trial_has_the_highest_validation_metric():
    results = [{"validation_primary": 0.4}, {"validation_primary": math.nan}, {"validation_primary": 0.7},
               {"validation_primary": 0.7}]
    assert best_trial(results) == 2
    with pytest.raises(JobawareError, match="no trial"):
        best_trial([{"validation_primary": math.nan}])
