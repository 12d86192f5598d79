"""The metrics table beside the trivial baselines, and the notes where the model does not beat them."""

from __future__ import annotations

from types import SimpleNamespace

from jobaware.capabilities import TRIVIAL_BASELINES
from jobaware.results import metrics_rows

FAILURE = SimpleNamespace(primary_metric="roc_auc", metrics_table=("roc_auc", "threshold", "accuracy", "ece"),
                          trivial_baselines=TRIVIAL_BASELINES)
WAIT = SimpleNamespace(primary_metric="within_x2", metrics_table=("within_x2", "median_abs_error_s", "coverage_95"),
                       trivial_baselines={"zero": "always 0 s", "training_median": "the training median"})


def test_the_model_comes_first_then_its_trivial_baselines_and_a_note_where_it_loses():
    metrics = {"logistic": {"roc_auc": 0.79, "ece": 0.01},
               "majority": {"roc_auc": 0.5, "threshold": 0.28, "accuracy": 0.731, "ece": 0.27},
               "model": {"roc_auc": 0.80, "threshold": 0.28, "accuracy": 0.710, "ece": 0.008}}
    rows, notes = metrics_rows(FAILURE, metrics)
    assert [r["model"] for r in rows] == ["model", "majority", "logistic"]
    assert notes == ["the model does not beat the majority baseline (always the most common answer) on accuracy "
                     "0.7100 against 0.7310"]  # not on ece (lower is better) nor on the threshold


def test_a_model_that_beats_its_baselines_has_no_note_and_a_table_without_one_says_so():
    rows, notes = metrics_rows(FAILURE, {"model": {"roc_auc": 0.8}, "random": {"roc_auc": 0.5}})
    assert len(rows) == 2 and notes == []
    assert metrics_rows(FAILURE, {"model": {"roc_auc": 0.8}, "logistic": {"roc_auc": 0.7}})[1] == [
        "no trivial baseline (majority or random) was evaluated for this version"]


def test_a_capability_names_its_own_trivial_baselines_and_lower_errors_beat_higher():
    metrics = {"model": {"within_x2": 0.40, "median_abs_error_s": 900.0, "coverage_95": 0.95},
               "bucket_median": {"within_x2": 0.45, "median_abs_error_s": 100.0},
               "zero": {"within_x2": 0.30, "median_abs_error_s": 600.0},
               "training_median": {"within_x2": 0.20, "median_abs_error_s": 1200.0, "coverage_95": 0.99}}
    rows, notes = metrics_rows(WAIT, metrics)
    assert [r["model"] for r in rows] == ["model", "zero", "training_median", "bucket_median"]
    # only the trivial ones are noted; an error is better lower; a coverage is not better higher
    assert notes == ["the model does not beat the zero baseline (always 0 s) on median_abs_error_s 900.0000 against "
                     "600.0000"]
    assert metrics_rows(WAIT, {"model": {"within_x2": 0.4}, "bucket_median": {"within_x2": 0.5}})[1] == [
        "no trivial baseline (zero or training_median) was evaluated for this version"]
