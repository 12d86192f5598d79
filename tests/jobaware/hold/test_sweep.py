"""The search space: YAML -> seeded trials; the best trial by the validation metric."""

from __future__ import annotations

import math

import pytest

from jobaware.errors import JobawareError
from jobaware.hold.sweep import DEFAULT_SPACE, trials
from jobaware.hold.train import best_trial


def test_the_default_space_gives_its_trials_the_same_way_every_time():
    first, again = trials(), trials(DEFAULT_SPACE)
    assert first == again and len(first) == 1  # one trial by default: make run stays cheap
    for trial in first:
        assert trial["network"] == "lstm" and trial["j"] in (8, 16) and 0.001 <= trial["learning_rate"] <= 0.01
        assert set(trial) == {"network", "j", "m", "timeframe_len", "layers", "hidden_size", "learning_rate",
                              "batch_size", "epochs"}


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


@pytest.mark.timeout(600)
def test_each_trial_is_a_run_nested_under_the_sweep_and_the_best_is_recorded(dataset, tmp_path, monkeypatch):
    import json

    from jobaware import tracking
    from jobaware.hold.steps import best_step, sweep_step, trial_step
    from tests.jobaware.hold.conftest import SMALL

    monkeypatch.setenv("JOBAWARE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    space = "method: grid\ntrials: 2\nspace:\n  hidden_size: [4, 8]\n"
    pinned = {k: v for k, v in SMALL.items() if k != "hidden_size"} | {"epochs": 1}
    trials = sweep_step(json.dumps(pinned), space)
    outcomes = [json.loads(trial_step(str(dataset), t)) for t in reversed(trials)]  # finishing in any order
    best = json.loads(best_step([json.dumps(o) for o in outcomes]))

    _, client = tracking.mlflow_client()
    sweep_run = client.get_run(outcomes[0]["sweep_run"])
    children = client.search_runs([tracking.experiment_id("hold")],
                                  f"tags.`mlflow.parentRunId` = '{sweep_run.info.run_id}'")
    assert sorted(r.data.tags["jobaware.trial"] for r in children) == ["0", "1"]
    assert {r.data.params["hidden_size"] for r in children} == {"4", "8"}
    assert all("validation_primary" in r.data.metrics and r.info.status == "FINISHED" for r in children)
    scores = {int(r.data.tags["jobaware.trial"]): r.data.metrics["validation_primary"] for r in children}
    chosen = max(scores, key=lambda n: (scores[n], -n))
    assert sweep_run.info.status == "FINISHED" and sweep_run.data.params["best_trial"] == str(chosen)
    assert best["hidden_size"] == (4, 8)[chosen] and best["epochs"] == 1
