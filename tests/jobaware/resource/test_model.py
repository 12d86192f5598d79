import numpy as np
import pytest

from jobaware.resource.features import extract
from jobaware.resource.model import MajorityModel, RichModel, SeedSVM, does_work
from jobaware.resource.parsing import parse_script
from jobaware.resource.reader import read_scripts
from jobaware.resource.schema import BINDING
from jobaware.resource.synth import generate


def analyse(source):
    return extract(parse_script(source.encode() if isinstance(source, str) else source))


@pytest.fixture(scope="module")
def generated_python():
    records = [r for r in generate(400, seed=11, kinds=("python",)) if r["class"] in BINDING and not r["not_a_job"]]
    return [analyse(r["content"]) for r in records], np.array([r["class"] for r in records], dtype=object)


@pytest.mark.parametrize("source, works", [
    ("", False), ("Non", False), ("CONFIG = {'a': 1}\n", False), ("def f():\n    return 1\n", False),
    ("x = [i for i in y]\n", True), ("for i in x:\n    pass\n", True), ("print(1)\n", True),
    ("#!/bin/bash\n#SBATCH -n 1\nexport A=1\nmodule load x\n", False), ("#!/bin/bash\ncp a b\n", True),
])
def test_the_other_rule(source, works):
    assert does_work(analyse(source)) is works


def test_rich_model_separates_generated_classes_and_explains_itself(generated_python):
    features, classes = generated_python
    model = RichModel(seed=0).fit(features[:250], classes[:250])
    proba = model.predict_proba(features[250:])
    assert proba.shape == (len(features) - 250, 4) and np.allclose(proba.sum(axis=1), 1)
    accuracy = (np.array(BINDING, dtype=object)[proba.argmax(axis=1)] == classes[250:]).mean()
    assert accuracy > 0.9
    top = model.top_features(features[250:260], k=3)
    assert all(0 < len(t) <= 3 and all(item["weight"] > 0 for item in t) for t in top)
    assert all(t[i]["weight"] >= t[i + 1]["weight"] for t in top for i in range(len(t) - 1))


def test_seed_svm_uses_the_five_counts_only_and_decides(generated_python):
    features, classes = generated_python
    svm = SeedSVM().fit(features, classes)
    proba = svm.predict_proba(features[:20])
    assert set(np.unique(proba)) <= {0.0, 1.0} and (proba.sum(axis=1) == 1).all()
    moved = [type(f)(**{**f.__dict__, "rich": {}, "tokens": []}) for f in features[:20]]
    assert np.array_equal(svm.predict_proba(moved), proba)


def test_majority_predicts_the_largest_class_with_its_share():
    features = [analyse("x()\n")] * 4
    model = MajorityModel().fit(features, np.array(["cpu", "cpu", "cpu", "io"], dtype=object))
    assert model.predict_proba(features[:1]).tolist() == [[0.75, 0.0, 0.0, 0.25]]


def test_models_train_on_real_scripts_with_sample_weights():
    table, _, _ = read_scripts(["jobaware/data/real/scripts"])
    table = table[table["usable"] & table["class"].isin(BINDING)]
    features = [analyse(c) for c in table["content"]]
    classes = table["class"].to_numpy(dtype=object)
    weights = np.where(classes == "io", 0.5, 1.0)
    model = RichModel().fit(features, classes, weights)
    assert model.predict_proba(features).shape == (len(features), 4)
