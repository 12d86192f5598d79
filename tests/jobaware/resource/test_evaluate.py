import numpy as np

from jobaware.resource.evaluate import confusion, cross_validate, decide, folds, metrics
from jobaware.resource.features import extract
from jobaware.resource.model import MajorityModel
from jobaware.resource.parsing import parse_script


def test_folds_keep_groups_together_are_stratified_and_seeded():
    classes = np.array(["cpu"] * 40 + ["mem"] * 20 + ["io"] * 10 + ["other"], dtype=object)
    groups = np.array([f"g{i // 2}" for i in range(len(classes))])  # pairs of near-duplicates
    table = folds(classes, groups, n_splits=5, repeats=3, seed=7)
    assert len(table) == 3 * len(classes) and set(table["fold"]) == set(range(5))
    side = table.assign(group=groups[table["row"]]).groupby(["repeat", "group"])["fold"].nunique()
    assert (side == 1).all()
    per_fold = table.assign(c=classes[table["row"]]).query("c == 'io'").groupby(["repeat", "fold"]).size()
    assert per_fold.min() >= 1  # every fold holds io scripts
    assert table.equals(folds(classes, groups, 5, 3, 7)) and not table.equals(folds(classes, groups, 5, 3, 8))
    assert not table[table["repeat"] == 0]["fold"].reset_index(drop=True).equals(
        table[table["repeat"] == 1]["fold"].reset_index(drop=True))


def test_decide_applies_the_other_rule_and_the_abstain_threshold():
    work, nothing = extract(parse_script(b"f()\n")), extract(parse_script(b""))
    proba = np.array([[0.1, 0.2, 0.6, 0.1], [0.7, 0.1, 0.1, 0.1], [0.3, 0.3, 0.2, 0.2]])
    assert decide(proba, [work, nothing, work]).tolist() == ["network", "other", "cpu"]
    assert decide(proba, [work, work, work], abstain_threshold=0.5).tolist() == ["network", "cpu", "other"]


def test_metrics_are_macro_f1_over_the_binding_classes():
    truth = np.array(["cpu", "cpu", "mem", "io", "network", "other"], dtype=object)
    perfect = np.array([truth.copy()])
    m = metrics(truth, perfect)
    assert m["macro_f1"] == 1.0 and m["accuracy"] == 1.0 and m["n_eval"] == 6
    wrong_other = np.array([["cpu", "cpu", "mem", "io", "network", "cpu"]], dtype=object)
    assert metrics(truth, wrong_other)["f1_cpu"] < 1 and metrics(truth, wrong_other)["f1_mem"] == 1
    matrix = confusion(truth, wrong_other)
    assert matrix.loc["other", "cpu"] == 1 and int(matrix.to_numpy().sum()) == 6


def test_cross_validation_scores_held_out_rows_and_never_the_extra_rows():
    work = extract(parse_script(b"f()\n"))
    classes = np.array(["cpu"] * 12 + ["mem"] * 8, dtype=object)
    table = folds(classes, np.arange(20).astype(str), 4, 2, 0)
    extra = [work] * 50
    result = cross_validate(MajorityModel, [work] * 20, classes, table, extra,
                            np.array(["mem"] * 50, dtype=object), np.ones(50))
    assert result.predictions.shape == (2, 20) and (result.predictions == "mem").all()  # extra rows trained
    assert result.metrics["f1_cpu"] == 0.0
    unweighted = cross_validate(MajorityModel, [work] * 20, classes, table)
    assert (unweighted.predictions == "cpu").all()
    assert np.allclose(result.probabilities.sum(axis=2), 1)
