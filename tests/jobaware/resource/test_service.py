import base64
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobaware.bodies import parse_body
from jobaware.errors import InputError, TooLargeError
from jobaware.resource.service import Limits, classify_files, predict_file, request_models, scripts_of
from tests.jobaware.resource.conftest import SCRIPTS, classify_request, pairing_request

SMALL = Limits(max_scripts=3, max_script_bytes=2048, max_total_bytes=4096, max_jobs=4)


def parse_classify(payload, limits=SMALL):
    return scripts_of(parse_body(request_models(limits)[0], payload), limits)


def _finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def test_one_script_or_a_batch_text_or_base64(trained):
    bundle, _ = trained
    one = classify_request({"name": "a.py", "text": "import requests\nrequests.get('http://x')\n"}, bundle, "3")
    assert one["model_version"] == "3" and len(one["results"]) == 1
    result = one["results"][0]
    assert set(result) == {"name", "class", "probabilities", "top_features", "parse_status", "parse_detail", "kind",
                           "not_a_job", "not_a_job_reason", "n_bytes", "complete", "decode_errors"}
    assert result["name"] == "a.py" and result["n_bytes"] == 41 and result["parse_status"] == "ok"
    assert one["fit"] == []  # no training profile given
    trained_on = {"kind": "real", "tables": {"labelled_scripts": {"rows": 200, "columns": {"n_bytes": [200, 350, 700]}}}}
    assert classify_request({"text": "x = 1\n" * 50}, bundle, "3", trained=trained_on)["fit"] == []
    assert classify_request({"text": "x = 1\n"}, bundle, "3", trained=trained_on)["fit"] == [
        "n_bytes: 1 of 1 outside the training range 200..700"]
    latin1 = base64.b64encode("# café\nfor line in open('x'):\n    print(line)\n".encode("latin-1")).decode()
    batch = classify_request({"scripts": [{"text": "x = 1\n"}, {"name": "b", "base64": latin1}], "top": 2},
                             bundle)
    first, second = batch["results"]
    assert first["class"] == "other" and second["decode_errors"] is True and len(second["top_features"]) <= 2
    assert _finite(batch) and json.loads(json.dumps(batch, allow_nan=False)) == batch


@pytest.mark.parametrize("payload, message", [
    ([], r"^body: expected an object, got list"),
    ({"scripts": "x"}, r"^scripts: input should be a valid list, got 'x'"),
    ({"scripts": []}, r"^scripts: list should have at least 1 item"),
    ({"scripts": [{"text": "x"}, 3]}, r"^scripts\[1\]: input should be a valid dictionary"),
    ({"scripts": [{"text": "x"}, {"name": "b"}]}, r"^scripts\[1\]: give exactly one of 'text' or 'base64'"),
    ({"scripts": [{"text": "x", "base64": "eA=="}]}, r"^scripts\[0\]: give exactly one"),
    ({"scripts": [{"text": 5}]}, r"^scripts\[0\].text: input should be a valid string, got 5"),
    ({"scripts": [{"base64": "not base64!"}]}, r"^scripts\[0\].base64: not valid base64"),
    ({"scripts": [{"text": "x", "mode": 1}]}, r"^scripts\[0\].mode: unknown field"),
    ({"text": "x", "extra": 1}, r"^extra: unknown field"),
    ({"text": "x", "name": ["a"]}, r"^name: expected a string of at most 128 characters or an integer"),
    ({"text": "x", "top": 1.5}, r"^top: input should be a valid integer, got 1.5"),
    ({"text": "x", "top": 99}, r"^top: input should be less than or equal to 20, got 99"),
])
def test_bad_requests_name_the_json_path(payload, message):
    with pytest.raises(InputError, match=message):
        parse_classify(payload, SMALL)


@pytest.mark.parametrize("payload, message", [
    ({"scripts": [{"text": "x"}] * 4}, r"^scripts: list should have at most 3 items"),
    ({"text": "x" * 3000}, r"^text: string should have at most 2048 characters"),
    ({"text": "é" * 1500}, r"^text: 3,000 bytes; at most 2,048"),
    ({"base64": base64.b64encode(b"x" * 3000).decode()}, r"^base64: string should have at most 2732 characters"),
    ({"scripts": [{"text": "x" * 2000}] * 3}, r"^scripts\[2\]: request over 4,096 bytes"),
])
def test_size_limits_are_413(payload, message):
    with pytest.raises(TooLargeError, match=message):
        parse_classify(payload, SMALL)


def test_pairing_from_classes_and_scripts(trained):
    bundle, _ = trained
    answer = pairing_request({"jobs": [
        {"id": 1, "class": "cpu"}, {"id": "b", "class": "io"}, {"id": 3, "class": "cpu"},
        {"id": "srv", "text": "while True:\n    pass\n"}, {"id": "s", "text": "Non"}]}, bundle, "2")
    jobs = {j["id"]: j for j in answer["jobs"]}
    assert jobs["1"]["source"] == "given" and jobs["srv"]["source"] == "classified"
    assert {u["id"]: u["reason"] for u in answer["unpaired"]} == {"srv": "never ends by design",
                                                                  "s": "no binding resource"}
    assert answer["keep_apart"] == [{"jobs": ["1", "3"], "classes": ["cpu", "cpu"], "p_same": 1.0}]
    assert answer["share_node"][0] == {"jobs": ["1", "b"], "classes": ["cpu", "io"], "p_different": 1.0}
    assert answer["model_version"] == "2" and _finite(answer)
    given_only = pairing_request({"jobs": [{"id": 1, "class": "mem"}, {"id": 2, "class": "network"}]})
    assert given_only["model_version"] is None and len(given_only["share_node"]) == 1


@pytest.mark.parametrize("payload, message", [
    ({"jobs": [{"id": 1, "class": "cpu"}]}, r"^jobs: list should have at least 2 items"),
    ({"jobs": [{"id": 1, "class": "cpu"}, {"id": 1, "class": "io"}]}, r"^jobs\[1\].id: duplicate of jobs\[0\].id"),
    ({"jobs": [{"id": 1, "class": "gpu"}, {"id": 2, "class": "io"}]}, r"^jobs\[0\].class: input should be 'cpu', "),
    ({"jobs": [{"id": 1.5, "class": "cpu"}, {"id": 2, "class": "io"}]},
     r"^jobs\[0\].id: expected a string of at most 128 characters or an integer"),
    ({"jobs": [{"id": 1, "class": "cpu", "text": "x"}, {"id": 2, "class": "io"}]}, r"^jobs\[0\]: give one of 'class' or a script"),
    ({"jobs": [{"id": 1, "class": "cpu"}, {"id": 2, "class": "io"}], "threshold": 2}, r"^threshold: input should be less"),
    ({"jobs": [{"id": 1, "text": "x"}, {"id": 2, "class": "io"}]}, r"^jobs: scripts given but no model"),
])
def test_bad_pairing_requests(payload, message):
    with pytest.raises(InputError, match=message):
        pairing_request(payload, None, limits=SMALL)
    with pytest.raises(TooLargeError, match=r"^jobs: list should have at most 4 items"):
        pairing_request({"jobs": [{"id": i, "class": "cpu"} for i in range(5)]}, None, limits=SMALL)


def test_classify_files_on_the_real_scripts(trained):
    bundle, _ = trained
    paths = sorted((SCRIPTS / "files").glob("*.txt"))
    model = lambda: (bundle, "1")  # noqa: E731
    rows = classify_files(paths, model)
    assert len(rows) == 134 and all(set(r) == {"file", "status", "class", "probabilities"} for r in rows)
    assert all(r["status"] == "classified" for r in rows)  # the empty ones too: a script, of class `other`
    by_name = {r["file"].rsplit("/", 1)[-1]: r for r in rows}
    assert by_name["udpserver.py.txt"]["class"] == "not_a_job" and by_name["18.py.txt"]["class"] == "other"
    assert all(set(r["probabilities"]) == {"cpu", "mem", "network", "io", "other"} for r in rows)
    detailed = classify_files(paths[:2], model, detail=True)
    assert {"parse_status", "top_features"} <= set(detailed[0])
    with pytest.raises(InputError, match="nowhere.py: no such file"):
        classify_files(["nowhere.py"], model)
    assert len(classify_files([SCRIPTS / "files"], model)) == 134  # a folder: every script in it


def test_classify_files_gives_each_file_its_status(trained, tmp_path):
    """An empty or a binary script among good ones is one row of the answer: the empty one a script (of class
    `other`, as the labelled real scripts hold them), the binary one not read and why; issue 51 found the whole
    command refused for one empty file."""
    bundle, _ = trained
    (tmp_path / "a.py").write_text("import numpy\nx = numpy.ones((4000, 4000)) @ numpy.ones((4000, 4000))\n")
    (tmp_path / "b.sh").write_text("#!/bin/bash\n#SBATCH --mem=4G\nsrun ./simulate\n")
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "noise.sh").write_bytes(bytes(range(256)) * 12)
    rows = classify_files([tmp_path], lambda: (bundle, "1"))
    by_name = {Path(r["file"]).name: r for r in rows}
    assert list(by_name) == ["a.py", "b.sh", "empty.py", "noise.sh"]
    assert by_name["empty.py"]["status"] == "classified" and by_name["empty.py"]["class"] == "other"
    assert by_name["noise.sh"]["class"] is None and by_name["noise.sh"]["status"].startswith(
        "not read: binary data, not text")
    assert all(by_name[name]["status"] == "classified" for name in ("a.py", "b.sh"))


def test_classify_files_leaves_out_what_is_no_script_and_refuses_when_nothing_is(tmp_path):
    """Random bytes are no script of class `other` (issue 36): a binary file is left out with its reason, and when no
    file is a script nothing is classified and no model is loaded."""
    import random

    (tmp_path / "random.sh").write_bytes(random.Random(1).randbytes(3000))
    (tmp_path / "random2.sh").write_bytes(random.Random(2).randbytes(3000))
    loaded = []
    with pytest.raises(InputError, match=r"no script read \(2 not a script\)"):
        classify_files([tmp_path], lambda: loaded.append(1))
    assert not loaded
    (tmp_path / "job.sh").write_text("#!/bin/bash\nsrun ./a.out\n")
    with pytest.raises(InputError, match="binary data, not text"):
        predict_file([str(tmp_path / "random.sh")], tmp_path / "out.jsonl", lambda: loaded.append(1))
    assert not loaded and not (tmp_path / "out.jsonl").exists()


def test_predict_file_writes_json_lines(trained, tmp_path):
    bundle, _ = trained
    summary = predict_file([str(SCRIPTS)], tmp_path / "out.jsonl", lambda: (bundle, "5"))
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert summary.predictions == len(lines) == 134 and 0 < summary.counts["agreement_with_labels"] <= 1
    assert lines[0]["model_version"] == "5" and "label" in lines[0]
    one = predict_file([str(SCRIPTS / "files" / "p1.py.txt")], tmp_path / "one.jsonl", lambda: (bundle, "5"))
    assert one.predictions == 1


_KEYS = st.sampled_from(["scripts", "text", "base64", "name", "top", "jobs", "id", "class", "threshold", "other"])
_PAYLOADS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
    | st.sampled_from(["cpu", "io", "eA==", "not_a_job", "import os\nos.listdir('.')\n"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=16)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_PAYLOADS)
def test_any_payload_is_answered_or_refused_with_an_input_error(trained, payload):
    bundle, _ = trained
    for handler in (classify_request, pairing_request):
        try:
            answer = handler(payload, bundle, "1", SMALL)
        except InputError as error:
            assert str(error) and "\n" not in str(error)
        else:
            assert _finite(answer) and json.dumps(answer, allow_nan=False)


def test_the_request_models_state_the_rules_across_their_fields():
    """The rules across fields are stated in the schemas too (what the OpenAPI document shows): a body they call
    invalid is refused naming the field."""
    from jsonschema_rs import Draft4Validator

    from jobaware.bodies import openapi_schema

    limits = Limits()
    classify, pairing = (openapi_schema(model) for model in request_models(limits))

    def parse_pairing(payload):
        return parse_body(request_models(limits)[1], payload)

    for schema, parse, body, words in [
        (classify, parse_classify, {"name": "a"}, "text: give exactly one of 'text' or 'base64'"),
        (classify, parse_classify, {"text": "x", "base64": "eA=="}, "text: give exactly one"),
        (classify, parse_classify, {"scripts": [{"text": "x"}], "text": "y"}, "text: give one script or a list"),
        (classify, parse_classify, {"base64": "eA="}, "base64: not valid base64"),
        (pairing, parse_pairing, {"jobs": [{"id": "a", "class": "cpu", "text": "x"}, {"id": "b", "class": "io"}]},
         r"jobs\[0\]: give one of 'class' or a script"),
        (pairing, parse_pairing, {"jobs": [{"class": "cpu"}, {"id": "b", "class": "io"}]}, r"jobs\[0\]\.id: field required"),
    ]:
        assert not Draft4Validator(schema).is_valid(body), body
        with pytest.raises(InputError, match=words):
            parse(body)
