import numpy as np
import pytest

from jobaware.resource.features import extract
from jobaware.resource.parsing import parse_script
from jobaware.resource.schema import BINDING
from jobaware.resource.sequence import SequenceModel
from jobaware.resource.synth import generate


@pytest.fixture(scope="module")
def data():
    records = [r for r in generate(300, seed=21, kinds=("python",)) if r["class"] in BINDING and not r["not_a_job"]]
    features = [extract(parse_script(r["content"])) for r in records]
    return features, np.array([r["class"] for r in records], dtype=object)


@pytest.mark.parametrize("architecture", ["cnn", "gru"])
def test_learns_from_token_sequences_alone(data, architecture):
    features, classes = data
    cut = 180
    model = SequenceModel(seed=1, architecture=architecture, max_epochs=8, max_len=256, embedding_dim=16,
                          hidden_size=16).fit(features[:cut], classes[:cut])
    proba = model.predict_proba(features[cut:])
    assert proba.shape == (len(features) - cut, 4) and np.allclose(proba.sum(axis=1), 1, atol=1e-5)
    accuracy = (np.array(BINDING, dtype=object)[proba.argmax(axis=1)] == classes[cut:]).mean()
    assert accuracy > 0.6  # four classes: chance is about 0.3


def test_seeded_and_batch_independent(data):
    features, classes = data
    settings = dict(seed=4, max_epochs=2, max_len=128, embedding_dim=8, hidden_size=8)
    first = SequenceModel(**settings).fit(features[:60], classes[:60])
    second = SequenceModel(**settings).fit(features[:60], classes[:60])
    batch = first.predict_proba(features[60:70])
    assert np.array_equal(batch, second.predict_proba(features[60:70]))
    assert np.allclose(batch[3], first.predict_proba([features[63]])[0])


def test_weighs_tokens_and_ignores_zero_weight_rows(data):
    features, classes = data
    model = SequenceModel(seed=0, max_epochs=2, max_len=128, embedding_dim=8, hidden_size=8)
    model.fit(features[:60], classes[:60], np.r_[np.ones(30), np.zeros(30)])
    top = model.top_features(features[60:63], k=4)
    assert all(0 < len(t) <= 4 and all(item["feature"].startswith("token:") for item in t) for t in top)
    empty = extract(parse_script(b""))
    assert model.predict_proba([empty]).shape == (1, 4)
