"""The operating threshold: chosen on the validation period by its objective, figures at it, registered with the
model and loaded back."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

from jobaware.failure.evaluate import metrics
from jobaware.failure.operating import at_threshold, choose_threshold, expected_calibration_error
from jobaware.failure.reader import read_jobs
from jobaware.failure.schema import OUTCOMES
from tests.conftest import KTH

P_FAIL = np.array([0.9, 0.8, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1])
FAILED = np.array([1, 1, 0, 1, 0, 0, 1, 0], dtype=bool)


def test_the_f1_objective_takes_the_threshold_of_the_best_failed_class_f1():
    # flagging down to 0.9, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1 gives F1 2/5, 4/7, 6/8, 6/9, 6/10, 8/11, 8/12
    chosen = choose_threshold(FAILED, P_FAIL, "f1", 0.05)
    assert chosen["threshold"] == 0.6 and chosen["objective"] == "f1" and chosen["validation_rows"] == 8
    assert chosen["validation_fail_f1"] == 0.75 and chosen["validation_accuracy"] == 0.75
    assert chosen["validation_fail_precision"] == chosen["validation_fail_recall"] == 0.75
    assert chosen["validation_false_alarm_rate"] == 0.25 and chosen["validation_fail_share"] == 0.5


@pytest.mark.parametrize(("budget", "threshold", "recall"), [
    (0.5, 0.4, 0.75),   # the lowest threshold with at most 2 of the 4 completed jobs flagged
    (0.25, 0.6, 0.75),  # 0.8 and 0.6 both flag one completed job: the lower catches more failures
    (0.2, 0.9, 0.25),   # none of the completed jobs may be flagged
])
def test_the_false_alarm_objective_catches_the_most_failures_within_the_budget(budget, threshold, recall):
    chosen = choose_threshold(FAILED, P_FAIL, "false_alarm", budget)
    assert chosen["threshold"] == threshold and chosen["max_false_alarm_rate"] == budget
    assert chosen["validation_fail_recall"] == recall and chosen["validation_false_alarm_rate"] <= budget


def test_a_budget_no_threshold_meets_flags_nothing_and_one_kind_of_job_gives_no_threshold():
    chosen = choose_threshold(np.array([False, True]), np.array([0.9, 0.5]), "false_alarm", 0.1)
    assert chosen["threshold"] > 0.9 and chosen["validation_fail_recall"] == 0.0
    assert chosen["validation_false_alarm_rate"] == 0.0
    none = choose_threshold(np.zeros(5, dtype=bool), np.linspace(0, 1, 5), "f1", 0.05)
    assert none["threshold"] is None and none["reason"] == "the validation period holds no failed job"
    assert choose_threshold(np.zeros(0, dtype=bool), np.zeros(0), "f1", 0.05)["reason"] == \
        "the validation period holds no job"


def test_the_figures_at_the_threshold_and_the_calibration_error_on_a_hand_made_case():
    labels = pd.Series(np.where(FAILED, "TIMEOUT", "COMPLETED"))
    proba = pd.DataFrame({f"p_{c}": 0.0 for c in OUTCOMES}, index=labels.index)
    proba["p_COMPLETED"], proba["p_TIMEOUT"], proba["p_fail"] = 1 - P_FAIL, P_FAIL, P_FAIL
    m = metrics(labels, proba, threshold=0.5)
    flagged = P_FAIL >= 0.5  # 4 flagged, 3 of them failed; 1 failure missed; 3 of 4 completed jobs not flagged
    assert (m["accuracy"], m["fail_precision"], m["fail_recall"], m["fail_f1"], m["false_alarm_rate"]) == \
        (0.75, 0.75, 0.75, 0.75, 0.25)
    assert m["accuracy"] == accuracy_score(FAILED, flagged) and m["fail_f1"] == f1_score(FAILED, flagged)
    assert m["fail_precision"] == precision_score(FAILED, flagged) and m["fail_recall"] == recall_score(FAILED, flagged)
    # ten equal-width bins: 0.1-0.2 holds 0.1 (completed), 0.2-0.3 holds 0.2 (failed), 0.8-0.9 holds 0.8, 0.8 (one
    # failed), 0.9-1 holds 0.9 (failed) ...
    gaps = [abs(0 - 0.1), abs(1 - 0.2), abs(0 - 0.3), abs(0 - 0.4), abs(1 - 0.6), abs(1 - 1.6), abs(1 - 0.9)]
    assert m["ece"] == pytest.approx(sum(gaps) / 8)
    assert expected_calibration_error(np.array([0, 0, 1, 1]), np.array([0.05, 0.15, 0.15, 1.0])) == \
        pytest.approx((0.05 + 0.7 + 0.0) / 4)
    assert at_threshold(FAILED, P_FAIL, 0.95) == {"accuracy": 0.5, "fail_precision": 0.0, "fail_recall": 0.0,
                                                  "fail_f1": 0.0, "false_alarm_rate": 0.0}


def _flipped_after(jobs: pd.DataFrame, cut: pd.Timestamp) -> pd.DataFrame:
    """The jobs with every outcome submitted at or after `cut` turned round (completed <-> failed)."""
    later = jobs["submit_time"] >= cut
    flipped = jobs.copy()
    flipped.loc[later, "state"] = np.where(jobs.loc[later, "state"] == "COMPLETED", "FAILED", "COMPLETED")
    return flipped


def test_the_threshold_is_chosen_on_the_validation_period_never_on_the_test_period():
    from jobaware.failure.model import time_split
    from jobaware.failure.train import featurize, fit

    jobs = read_jobs(KTH)[0].iloc[:6000]
    table, flipped = featurize(jobs), featurize(_flipped_after(jobs, time_split(jobs, 0.3).cut))
    test = table["split"] == "test"
    assert (flipped["split"] == table["split"]).all() and (flipped["label"] != table["label"])[test].all()
    params = {"max_iter": 20}
    bundle, again = fit(table, jobs.iloc[:0], params), fit(flipped, jobs.iloc[:0], params)
    assert bundle.threshold is not None and 0 < bundle.threshold < 1 and bundle.model.operating["objective"] == "f1"
    assert again.model.operating == bundle.model.operating  # the same threshold and validation figures
    budget = fit(table, jobs.iloc[:0], {**params, "threshold_objective": "false_alarm", "max_false_alarm_rate": 0.02})
    assert budget.threshold > bundle.threshold and budget.model.operating["validation_false_alarm_rate"] <= 0.02


def test_the_threshold_is_registered_with_the_model_and_loaded_back(champion, synthetic):
    from jobaware import tracking

    bundle, version = tracking.load_bundle("failure", champion)
    operating = bundle.model.operating
    assert operating["objective"] == "f1" and 0 < bundle.threshold < 1
    _, client = tracking.mlflow_client()
    registered = client.get_model_version("jobaware-failure", version)
    tags = {k.removeprefix(tracking.OPERATING_TAG): v for k, v in registered.tags.items()
            if k.startswith(tracking.OPERATING_TAG)}
    assert tags == {k: str(v) for k, v in operating.items()} and float(tags["threshold"]) == bundle.threshold
    run = client.get_run(registered.run_id).data.metrics
    assert run["operating_threshold"] == run["threshold"] == bundle.threshold  # chosen at fit, used at evaluation
    assert run["validation_fail_f1"] == operating["validation_fail_f1"] and {"accuracy", "fail_f1", "ece"} <= set(run)
    jobs = read_jobs(synthetic[0])[0].tail(200).assign(end_time=pd.NaT)
    answer = bundle.predict(jobs)
    assert (answer["threshold"] == bundle.threshold).all()
    assert (answer["likely_fail"] == (answer["p_fail"] >= bundle.threshold)).all() and answer["likely_fail"].any()
