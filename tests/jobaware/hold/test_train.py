"""Training and evaluation: real holds evaluated by workflow, generated holds as extra data without leakage,
every decision-maker measured on the same holds, the served one chosen, the gate's score."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from jobaware.errors import JobawareError
from jobaware.hold import deciders as D
from jobaware.hold import outcomes
from jobaware.hold.adaptive import ADAPTIVE
from jobaware.hold.capability import MIN_EVAL_ROWS, PRIMARY_METRIC
from jobaware.hold.params import check_params
from jobaware.hold.train import fold_of, load_dataset, run_trial, score, training_set
from tests.jobaware.hold.conftest import SMALL

REPOSITORIES = {"andyPhysics/CosmicRay", "carlos-a-enriquez/bdp1_condor", "choij1589/GraphNeuralNet",
                "ilante/BDP-projcect-aws-main", "iross/MLDAG", "jantoniadis/MESAcondor", "jfrimel/stat405project",
                "silas-gross/HCal_LED_Analysis"}
DECIDERS = {"model", *D.PLAIN, *ADAPTIVE, *D.LEARNED}


def test_real_ended_holds_are_evaluated_in_folds_that_keep_each_workflow_on_one_side(real_dataset):
    data = load_dataset(real_dataset, check_params(SMALL))
    table = data.table
    evaluated = table[table["role"] == "eval"]
    assert data.real and len(evaluated) >= MIN_EVAL_ROWS
    assert not evaluated["generated"].any() and evaluated["label"].notna().all()
    assert set(evaluated["workflow"]) == REPOSITORIES  # from the workflows.csv beside the logs
    assert (table.loc[table["role"] == "extra", "generated"]).all() and (table["role"] == "extra").sum() > 100
    cv = fold_of(data, check_params(SMALL))
    assert len(np.unique(cv.folds)) == SMALL["folds"]
    assert all(len(set(cv.folds[cv.groups == g])) == 1 for g in np.unique(cv.groups))
    assert cv.weights == check_params({})["synthetic_weights"]
    alone = fold_of(data, check_params({**SMALL, "folds": 0}))  # the default: each workflow held out on its own
    assert len(np.unique(alone.folds)) == len(REPOSITORIES)
    assert all(len(set(alone.groups[alone.folds == k])) == 1 for k in np.unique(alone.folds))


def test_generated_holds_learn_only_from_the_outcomes_of_the_training_workflows(real_dataset):
    data = load_dataset(real_dataset, check_params(SMALL))
    table = data.table
    evaluated = np.flatnonzero(table["role"] == "eval")
    kept = evaluated[table["workflow"].to_numpy()[evaluated] != "silas-gross/HCal_LED_Analysis"]
    train = training_set(data, kept, 2.0)
    extra = data.rows("extra")
    assert np.array_equal(train.rows, np.r_[kept, extra])
    without = outcomes.fit(table[~table["generated"] & table["workflow"].isin(set(table["workflow"].iloc[kept]))])
    expected = without.p_release(table["hold_code"].to_numpy()[extra], table["hold_subcode"].to_numpy()[extra])
    assert np.allclose(train.target[len(kept):], expected)
    with_all = outcomes.fit(table[~table["generated"]])
    assert without.lookup(3, 0).p_release() != with_all.lookup(3, 0).p_release()  # 3/0 is HCal's alone
    real_weight, extra_weight = train.weight[:len(kept)], train.weight[len(kept):]
    assert real_weight.sum() == pytest.approx(len(kept)) and extra_weight.sum() == pytest.approx(2 * len(kept))
    by_workflow = pd.Series(real_weight).groupby(table["workflow"].to_numpy()[kept]).sum()
    assert np.allclose(by_workflow, by_workflow.iloc[0])  # every workflow weighs the same
    assert np.array_equal(training_set(data, kept, 0.0).rows, kept)


def test_every_decision_maker_is_measured_on_the_same_real_holds(real_trained, real_dataset):
    bundle, evaluation, workdir = real_trained
    m = evaluation.metrics
    assert set(m) == DECIDERS
    table = load_dataset(real_dataset, check_params(SMALL)).table
    evaluated = table[table["role"] == "eval"]
    assert {v["holds"] for v in m.values()} == {float(len(evaluated))}
    assert {v["workflows"] for v in m.values()} == {float(len(REPOSITORIES))}
    removed = (evaluated["label"] == "remove").to_numpy()
    assert m["remove_all"]["right"] == removed.sum()
    assert m["remove_all"]["grouped_accuracy"] == pytest.approx(D.grouped_accuracy(removed, evaluated["workflow"]))
    assert m["release_all"]["grouped_accuracy"] == pytest.approx(1 - m["remove_all"]["grouped_accuracy"])
    assert all(v["low"] <= v["grouped_accuracy"] <= v["high"] for v in m.values())
    assert all(v["cost_low"] <= v["cost"] <= v["cost_high"] and v["worst_accuracy"] <= v["grouped_accuracy"]
               for v in m.values())
    released = evaluated["label"] == "release"
    cost = check_params({})["wrong_remove_cost"]
    assert m["remove_all"]["pooled_cost"] == pytest.approx(cost * released.mean())  # every release a wrong removal
    assert m["release_all"]["cost"] == pytest.approx(1 - m["release_all"]["grouped_accuracy"])
    assert m["release_all"]["admissible"] == 1.0
    assert all(0 <= m[name]["roc_auc"] <= 1 for name in (*ADAPTIVE, *D.LEARNED)) and "roc_auc" not in m["remove_all"]
    assert m["model"]["margin_low"] <= m["model"]["margin"] <= m["model"]["margin_high"]
    assert m["model"]["cost_margin_low"] <= m["model"]["cost_margin"] <= m["model"]["cost_margin_high"]
    assert json.loads((workdir / "metrics.json").read_text()) == json.loads(json.dumps(m))
    assert {p.name for p in evaluation.plots} >= {"comparison.png", "roc.png", "confusion_matrix.png"}
    selection = evaluation.documents["selection"]
    assert selection["evaluated_on"] == "real" and selection["served"] == bundle.decided_by
    assert len(selection["by_workflow"]) == len(REPOSITORIES)
    hcal = next(row for row in selection["by_workflow"] if row["workflow"] == "silas-gross/HCal_LED_Analysis")
    assert (hcal["holds"], hcal["release"], hcal["release_all"], hcal["remove_all"]) == (18, 3, 3, 15)
    assert evaluation.documents["outcomes_by_code"]


def test_the_served_decision_is_never_worse_than_the_best_plain_policy_on_real_holds(real_trained):
    bundle, evaluation, _ = real_trained
    m = evaluation.metrics
    served = m[bundle.decided_by]
    best_plain = min(D.PLAIN, key=lambda n: (not m[n]["admissible"], m[n]["cost"], m[n]["worst_cost"]))
    assert served["admissible"] and served["cost"] <= m[best_plain]["cost"]
    assert served["grouped_accuracy"] >= m["release_all"]["grouped_accuracy"]
    assert evaluation.documents["selection"]["best_plain"] == best_plain
    if bundle.decided_by in D.PLAIN:  # nothing beat it: the policy serves, and says so
        assert bundle.decided_by == best_plain and "the best plain policy" in bundle.why
    if bundle.decided_by not in D.LEARNED:
        assert bundle.network_state is None and bundle.tree is None
    assert bundle.why.startswith(bundle.decided_by) and "real ended holds" in bundle.why
    assert "a wrong removal = 3 wrong releases" in bundle.why
    assert bundle.trained_on["source"] == "mixed" and bundle.trained_on["evaluated_on"] == "real"
    assert bundle.trained_on["real_holds"] >= m["model"]["holds"]


def test_the_gate_rescores_a_bundle_on_the_stored_evaluation_folder(real_trained):
    bundle, evaluation, _ = real_trained
    value, rows = score(bundle, evaluation.eval_dir)
    assert rows == evaluation.metrics["model"]["holds"] and PRIMARY_METRIC == ("cost", False)
    if bundle.decided_by in D.PLAIN:  # nothing fitted: the same as out of fold
        assert value == pytest.approx(evaluation.metrics[bundle.decided_by]["cost"])
    assert 0 <= value <= evaluation.metrics["release_all"]["cost"]


def test_generated_logs_alone_are_evaluated_on_generated_holds_by_submitter(trained):
    bundle, evaluation, _ = trained
    selection = evaluation.documents["selection"]
    assert selection["evaluated_on"] == "generated" and selection["workflows"] > 10
    assert bundle.trained_on["source"] == "synthetic" and bundle.trained_on["evaluated_on"] == "generated"
    assert set(evaluation.metrics) == DECIDERS | {"oracle"}
    m = evaluation.metrics
    assert m["oracle"]["cost"] <= min(m[n]["cost"] for n in D.PLAIN) + 0.02  # the truth decides at the threshold
    value, rows = score(bundle, evaluation.eval_dir)
    assert rows == m["model"]["holds"] and 0 <= value <= bundle.params["wrong_remove_cost"]


@pytest.mark.parametrize("network", ["gru", "conv"])
def test_other_networks_train_by_name_and_seeds_make_runs_repeat(real_dataset, network):
    params = {**SMALL, "network": network, "epochs": 2, "synthetic_weights": [0.0, 1.0]}
    first, second = run_trial(real_dataset, params), run_trial(real_dataset, params)
    assert first == {**second, "seconds": first["seconds"]}
    assert all(isinstance(v, float) for v in first.values()) and not pd.isna(first["validation_primary"])
    assert first["validation_primary"] == -first["validation_log_loss"] and first["eval_holds"] >= MIN_EVAL_ROWS


def test_one_workflow_is_too_little_to_evaluate_and_says_so(tmp_path):
    from jobaware.hold.reader import ingest
    from tests.jobaware.hold.conftest import STANDALONE

    ingest([str(STANDALONE / "metl_12634462.log")], tmp_path)
    with pytest.raises(JobawareError, match=r"cannot evaluate: 3 ended holds in 1 workflow\(s\)"):
        run_trial(tmp_path, SMALL)


@pytest.fixture(scope="module")
def cross_validated(dataset):
    """The small synthetic dataset's evaluation, cross-validated once for the tests below."""
    from jobaware.hold import train as T

    p = check_params(SMALL)
    data = load_dataset(dataset, p)
    cv = fold_of(data, p)
    feats = T.build_features(data, p, data.table["role"].to_numpy() != "")
    T.cross_validate(data, feats, cv, p, ("lstm", "gbt"))
    return p, data, cv, feats


@pytest.mark.parametrize("served", ["lstm", "gbt", "blend"])
def test_a_learned_decision_maker_is_refitted_on_all_the_data_and_serves_calibrated(cross_validated, dataset, served,
                                                                                     tmp_path):
    from jobaware.hold import train as T
    from jobaware.hold.reader import read_events

    p, data, cv, feats = cross_validated
    metrics = {name: {"grouped_accuracy": 0.5, "low": 0.4, "high": 0.6, "worst_accuracy": 0.3, "cost": 0.5,
                      "worst_cost": 0.7, "holds": 10.0, "workflows": 2.0} for name in ("model", served, "site_rule")}
    bundle, history = T._served_bundle(data, feats, cv, p, served, 0.0, metrics, "site_rule", dataset)
    assert bundle.decided_by == served and bundle.calibrator is not None
    assert (bundle.network_state is not None) == (served != "gbt") and (bundle.tree is not None) == (served != "lstm")
    assert bool(history) == (served != "gbt")
    events, _ = read_events([str(data.logs[0].events["source"].iloc[0])])
    cut = events[events["seq"] <= events.loc[events["event_code"] == 12, "seq"].iloc[40]]
    decided = bundle.predict(cut)
    assert len(decided) >= 1 and decided["decided_by"].eq(served).all() and decided["p_release"].between(0, 1).all()
    value, rows = score(bundle, T.write_eval(data, cv.rows, tmp_path / "eval"))
    remove_all = D.grouped_mean(D.costs(np.zeros(len(cv.rows), bool), cv.y, p["wrong_remove_cost"]), cv.groups)
    assert rows == len(cv.rows) and 0 <= value < remove_all / 2  # most generated holds end released
