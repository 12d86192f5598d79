"""Training and evaluation: the split, early stopping, whole-set metrics, baselines, the oracle, the gate's score."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from jobaware.errors import JobawareError
from jobaware.hold.capability import MIN_EVAL_ROWS, PRIMARY_METRIC
from jobaware.hold.params import check_params
from jobaware.hold.train import load_dataset, run_trial, score
from tests.jobaware.hold.conftest import SMALL


def test_the_split_is_time_ordered_and_uses_only_what_was_known(dataset):
    data = load_dataset(dataset, check_params(SMALL))
    table = data.table
    train, validation, test = (table[table["split"] == s] for s in ("train", "validation", "test"))
    assert len(train) > 500 and len(validation) > 100 and len(test) > MIN_EVAL_ROWS
    assert train["hold_time"].max() < validation["hold_time"].min() <= validation["hold_time"].max() < test["hold_time"].min()
    assert train["resolution_time"].max() < validation["hold_time"].min()
    assert validation["resolution_time"].max() < test["hold_time"].min()
    assert table.loc[table["label"].isna(), "split"].eq("").all()


def test_the_model_and_its_baselines_are_scored_on_the_whole_test_set(trained, dataset):
    bundle, evaluation, workdir = trained
    data = load_dataset(dataset, check_params(SMALL))
    n_test = int((data.table["split"] == "test").sum())
    assert set(evaluation.metrics) == {"model", "gbt", "policy", "majority", "oracle"}
    majority = evaluation.metrics["majority"]  # one answer always: no ranking, one of the two F1s zero
    assert majority["roc_auc"] != majority["roc_auc"] or majority["roc_auc"] == 0.5
    assert 0 in (majority["f1_remove"], majority["f1_release"])
    assert all(m["n"] == n_test for m in evaluation.metrics.values())  # every test hold, not the last batch
    model = evaluation.metrics["model"]
    assert 0 < model["f1_remove"] <= 1 and 0.5 < model["roc_auc"] <= 1
    assert model["gap_to_oracle"] == pytest.approx(evaluation.metrics["oracle"]["f1_remove"] - model["f1_remove"])
    assert evaluation.metrics["oracle"]["roc_auc"] > evaluation.metrics["policy"]["roc_auc"]
    assert json.loads((workdir / "metrics.json").read_text())["model"]["f1_remove"] == model["f1_remove"]
    assert {p.name for p in evaluation.plots} >= {"roc.png", "pr.png", "confusion_matrix.png", "training.png"}


def test_the_best_epoch_is_the_one_with_the_highest_validation_metric(trained):
    _, evaluation, _ = trained
    scores = [h["validation"] for h in evaluation.history]
    assert evaluation.metrics["model"]["best_epoch"] == int(np.argmax(scores))


def test_the_gate_rescores_a_bundle_on_the_stored_evaluation_folder(trained):
    bundle, evaluation, _ = trained
    value, rows = score(bundle, evaluation.eval_dir)
    assert rows == evaluation.metrics["model"]["n"]
    assert value == pytest.approx(evaluation.metrics["model"][PRIMARY_METRIC[0]])


@pytest.mark.parametrize("network", ["gru", "conv"])
def test_other_networks_train_by_name_and_seeds_make_runs_repeat(dataset, network):
    params = {**SMALL, "network": network, "epochs": 2}
    first, second = run_trial(dataset, params), run_trial(dataset, params)
    assert first["validation_primary"] == second["validation_primary"]
    assert first["test_f1_remove"] == second["test_f1_remove"]
    assert first["validation_primary"] == first["validation_f1_remove"]


def test_too_little_history_is_a_clear_error(tmp_path):
    from jobaware.hold.reader import ingest
    from tests.jobaware.hold.conftest import STANDALONE

    ingest([str(STANDALONE / "metl_12634379.log")], tmp_path)
    with pytest.raises(JobawareError, match="cannot train"):
        run_trial(tmp_path, SMALL)


def test_a_trial_result_is_flat_numbers(dataset, tmp_path):
    result = run_trial(dataset, {**SMALL, "epochs": 1}, workdir=tmp_path)
    assert all(isinstance(v, float) for v in result.values())
    assert (tmp_path / "tensors_train.npy").is_file()
    assert not pd.isna(result["validation_primary"])
