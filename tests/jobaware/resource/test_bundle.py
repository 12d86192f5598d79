import base64
import json

import joblib
import numpy as np
import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.resource.bundle import OUTPUT_COLUMNS, input_example, signature
from jobaware.resource.capability import FEATURE_VERSION


def test_predict_gives_one_row_per_script_in_the_signature_columns(trained, tmp_path):
    bundle, _ = trained
    joblib.dump(bundle, tmp_path / "bundle.joblib")
    loaded = joblib.load(tmp_path / "bundle.joblib")
    assert loaded.feature_version == FEATURE_VERSION
    out = loaded.predict(input_example(loaded))
    assert list(out.columns) == list(OUTPUT_COLUMNS) == [c.name for c in signature().outputs.inputs]
    assert out["file"].tolist() == ["solve.py", "fetch.py", "job.sbatch"]
    assert out["parse_status"].tolist() == ["ok", "ok", "shell"]
    probabilities = out[[c for c in out.columns if c.startswith("p_")]].to_numpy()
    assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-5)
    assert all(isinstance(json.loads(t), list) for t in out["top_features"])
    pd.testing.assert_frame_equal(out, bundle.predict(input_example()))
    assert [c.name for c in signature().inputs.inputs] == ["file", "text"]


def test_classes_by_rule_not_a_job_and_other(trained):
    bundle, _ = trained
    server, stub, empty, job = bundle.classify([
        "import socket\ns = socket.socket()\nwhile True:\n    s.recv(10)\n", "Non", b"",
        "import os\nos.listdir('.')\n"])
    assert server["class"] == "not_a_job" and "while True" in server["not_a_job_reason"]
    assert sum(server["probabilities"][c] for c in ("cpu", "mem", "network", "io")) == pytest.approx(1, abs=1e-5)
    assert stub["class"] == empty["class"] == "other" and stub["probabilities"]["other"] == 1.0
    assert empty["parse_status"] == "empty" and stub["parse_status"] == "ok"
    assert job["class"] in ("cpu", "mem", "network", "io") and job["probabilities"]["other"] == 0.0


def test_predict_takes_base64_and_refuses_bad_rows(trained):
    bundle, _ = trained
    frame = pd.DataFrame({"file": ["a"], "base64": [base64.b64encode(b"\x7fELF\x02\x01\x00\x00\x00binary").decode()]})
    assert bundle.predict(frame)["parse_status"].tolist() == ["binary"]
    with pytest.raises(InputError, match="row 0: base64: not valid base64"):
        bundle.predict(pd.DataFrame({"base64": ["%%%"]}))
    with pytest.raises(InputError, match="'text' or a 'base64' column"):
        bundle.predict(pd.DataFrame({"file": ["x"]}))
    with pytest.raises(InputError, match="row 0: expected a string"):
        bundle.predict(pd.DataFrame({"text": [None]}))


def test_recipe_is_an_unfitted_twin(trained):
    bundle, _ = trained
    twin = bundle.recipe()
    assert type(twin) is type(bundle.model) and not hasattr(twin, "estimator") and not hasattr(twin, "network")


def test_text_book_scripts_are_classed_by_what_they_do(trained):
    """Generated Python scripts (a few percent of the training weight) teach what the real labels leave out."""
    from jobaware.resource.synth import generate

    bundle, _ = trained
    records = [r for r in generate(200, seed=77, kinds=("python",)) if not r["not_a_job"] and r["class"] != "other"]
    answers = bundle.classify([r["content"] for r in records], top=0)
    accuracy = np.mean([r["class"] == a["class"] for r, a in zip(records, answers, strict=True)])
    assert accuracy > 0.75, accuracy
