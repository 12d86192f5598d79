import pytest

from jobaware.resource.pairing import plan


def job(identifier, label, **probabilities):
    probabilities = probabilities or {label: 1.0}
    return {"id": identifier, "class": label, "probabilities": probabilities}


def test_different_resources_share_a_node_same_resource_kept_apart():
    hints = plan([job("a", "cpu"), job("b", "cpu"), job("c", "io"), job("d", "mem")])
    assert [p["jobs"] for p in hints["keep_apart"]] == [["a", "b"]]
    # a matching: each job at most once, most certain pairs first, earlier jobs first on ties
    assert [p["jobs"] for p in hints["share_node"]] == [["a", "c"], ["b", "d"]]
    assert hints["unpaired"] == [] and hints["keep_apart_truncated"] is False


def test_uncertain_classes_use_probabilities():
    unsure = job("u", "cpu", cpu=0.55, mem=0.45)
    hints = plan([unsure, job("m", "mem")], threshold=0.5)
    assert hints["share_node"] == [{"jobs": ["u", "m"], "classes": ["cpu", "mem"], "p_different": 0.55}]
    assert plan([unsure, job("m", "mem")], threshold=0.6)["share_node"] == []
    assert plan([unsure, job("m", "mem")], threshold=0.4)["keep_apart"][0]["p_same"] == pytest.approx(0.45)


def test_other_and_not_a_job_take_part_in_no_pair():
    hints = plan([job("x", "other"), job("y", "not_a_job"), job("z", "cpu")])
    assert hints["share_node"] == hints["keep_apart"] == []
    assert [u["id"] for u in hints["unpaired"]] == ["x", "y"]


def test_keep_apart_is_capped():
    hints = plan([job(str(i), "io") for i in range(30)], max_pairs=10)
    assert len(hints["keep_apart"]) == 10 and hints["keep_apart_truncated"] is True
