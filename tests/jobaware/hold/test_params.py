"""Training parameters are checked before anything trains."""

from __future__ import annotations

import pytest

from jobaware.errors import JobawareError
from jobaware.hold.params import Params, check_params


def test_defaults_are_complete_and_valid():
    p = check_params({})
    assert p == Params().model_dump()
    assert (p["network"], p["folds"], p["synthetic_weights"]) == ("lstm", 0, [0.0, 1.0])
    assert (p["wrong_remove_cost"], p["min_workflow_holds"]) == (3.0, 10)


@pytest.mark.parametrize("raw, words", [
    ({"epochs": 2.7}, "epochs: input should be a valid integer"),
    ({"learning_rate": -1}, "learning_rate: input should be greater than 0"),
    ({"j": 101}, "j: input should be less than or equal to 100"),
    ({"network": "transformer"}, "network: input should be 'lstm', 'gru' or 'conv'"),
    ({"bogus": 1}, "bogus: unknown parameter"),
    ({"synthetic_weights": []}, "synthetic_weights: list should have at least 1 item"),
    ({"synthetic_weights": [-1]}, r"synthetic_weights\[0\]: input should be greater than or equal to 0, got -1"),
    ({"folds": 1}, r"folds: one fold leaves nothing to train on: give 0 \(each workflow held out on its own\) or 2"),
    ({"folds": -1}, "folds: input should be greater than or equal to 0"),
    ({"wrong_remove_cost": 0}, "wrong_remove_cost: input should be greater than 0"),
    ({"epochs": "3"}, "epochs: input should be a valid integer"),
])
def test_bad_values_are_refused_with_what_was_expected(raw, words):
    with pytest.raises(JobawareError, match=words):
        check_params(raw)


def test_parameters_must_be_an_object():
    with pytest.raises(JobawareError, match="expected an object"):
        check_params([1, 2])
