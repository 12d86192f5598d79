"""Request handling of the service, the CLI's logic, the bundle's predict and its MLflow signature."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.similarity import service
from jobaware.similarity.bundle import SimilarityBundle, input_example, signature
from jobaware.similarity.schema import METRICS

from .conftest import REAL, job_request, similar_request

MAX_REFERENCE_SEGMENTS = service.LIMITS.max_reference_segments


def _busy_jobid(index) -> int:
    return next(j for j in index.jobids.tolist() if len(index.reference(j).coding) > 3 and index.reference(j).coding.any())


def test_similar_by_jobid(bundle):
    jobid = _busy_jobid(bundle.index)
    answer = similar_request(bundle, {"jobid": jobid, "algorithm": "q-phases", "top_k": 7})
    assert answer["algorithm"] == "q-phases" and len(answer["results"]) == 7
    assert answer["results"][0] == {"rank": 1, "jobid": jobid, "similarity": 1.0}
    similarities = [r["similarity"] for r in answer["results"]]
    assert similarities == sorted(similarities, reverse=True)
    assert sum(answer["histogram"]["counts"]) == answer["comparable"] == bundle.index.size
    assert len(answer["histogram"]["bin_edges"]) == 41
    assert answer["index_version"] == bundle.index.version
    json.dumps(answer, allow_nan=False)


def test_similar_inline_matches_by_jobid(bundle):
    jobid = _busy_jobid(bundle.index)
    job = bundle.index.job(jobid)
    by_id = similar_request(bundle, {"jobid": jobid, "algorithm": "q-lev"})
    inline = similar_request(bundle, {"coding": job["coding"], "levels": job["levels"], "algorithm": "q-lev"})
    assert inline["results"] == by_id["results"] and inline["reference"] == {"inline": ["coding", "levels"]}
    as_list = similar_request(bundle, {"coding": [int(x) for x in job["coding"].split(":")]})
    assert as_list["algorithm"] == "b-aggz" and as_list["results"][0]["similarity"] == 1.0


def test_consensus_request(bundle):
    jobid = _busy_jobid(bundle.index)
    answer = similar_request(bundle, {"jobid": jobid, "consensus": ["b-all", "q-lev"], "top_k": 20})
    assert answer["results"][0]["jobid"] == jobid
    assert answer["consensus"] == ["b-all", "q-lev"]


SEQUENCE = "expected 1 to 1,000 integers 0..{}, ':'-separated or as a list"


@pytest.mark.parametrize("payload, message", [
    ([1, 2], "body: expected an object"),
    ({"jobid": 1}, "jobid: unknown job 1"),
    ({"jobid": "abc"}, "jobid: input should be a valid integer"),
    ({"jobid": True}, "jobid: input should be a valid integer"),
    ({}, "jobid: give a jobid or an inline reference"),
    ({"jobid": 5, "coding": "1"}, "jobid: give either a jobid or an inline reference"),
    ({"coding": "1:x:3"}, f"coding: {SEQUENCE.format(511)}, got '1:x:3'"),
    ({"coding": [1, 600]}, rf"coding: {SEQUENCE.format(511)}, got \[1, 600\]"),
    ({"coding": ""}, f"coding: {SEQUENCE.format(511)}, got ''"),
    ({"coding": ":".join(["1"] * (MAX_REFERENCE_SEGMENTS + 1))}, f"coding: {SEQUENCE.format(511)}"),
    ({"coding": [1] * (MAX_REFERENCE_SEGMENTS + 1)}, f"coding: {SEQUENCE.format(511)}, got a list of 1,001 items"),
    ({"coding": "1", "algorithm": "fast"}, "algorithm: input should be 'b-all', 'b-aggz'"),
    ({"coding": "1", "top_k": 0}, "top_k: input should be greater than or equal to 1, got 0"),
    ({"coding": "1", "top_k": 10**6}, "top_k: input should be less than or equal to 1000"),
    ({"coding": "1", "colour": "red"}, "colour: unknown field"),
    ({"coding": "1", "algorithm": "q-lev"}, "levels: q-lev needs the reference's per-metric levels"),
    ({"levels": {"md_read": "1"}}, "levels.md_file_create: field required"),
    ({"levels": {**{m: "1:2" for m in METRICS}, "disk": "1"}}, "levels.disk: unknown field"),
    ({"levels": {**{m: "1:2" for m in METRICS}, "md_read": "1"}}, "levels.md_read: 1 values, md_file_create has 2"),
    ({"levels": {m: "17" for m in METRICS}}, f"levels.md_file_create: {SEQUENCE.format(16)}, got '17'"),
    ({"values": {m: [0.5, float("nan")] + [1.0] * 6 for m in METRICS}}, r"values.md_file_create\[1\]: input should be a finite number"),
    ({"values": {m: [1.0] * 3 for m in METRICS}, "algorithm": "ks"}, "values.md_file_create: list should have at least 8 items"),
    ({"coding": "1", "consensus": ["b-all", "x"]}, r"consensus\[1\]: input should be 'b-all'"),
])
def test_bad_requests_name_the_field(bundle, payload, message):
    with pytest.raises(InputError, match=f"^{message}"):
        similar_request(bundle, payload)


def test_job_request(bundle):
    jobid = int(bundle.index.jobids[0])
    answer = job_request(bundle, {"jobid": jobid})
    assert answer["jobid"] == jobid and answer["model_version"] == "1"
    with pytest.raises(InputError, match="^jobid: input should be a valid integer, got '12'"):
        job_request(bundle, {"jobid": "12"})
    with pytest.raises(InputError, match="^jobid: unknown job 7"):
        job_request(bundle, {"jobid": 7})


def test_cli_similar_on_the_real_file_and_on_a_saved_index(tmp_path, real_index):
    jobid = int(real_index.jobids[100])
    ranking = service.similar(jobid, data=[str(REAL)], algorithm="b-all", top=15)
    assert len(ranking) == 15 and set(ranking[0]) == {"jobid", "similarity"}
    keys = [(-r["similarity"], r["jobid"]) for r in ranking]
    assert keys == sorted(keys)
    saved = real_index.save(tmp_path / "index")
    assert service.similar(jobid, index=saved, algorithm="b-all", top=15) == ranking
    both = service.similar(jobid, index=saved, consensus=["b-all", "b-aggz"], top=15)
    assert {r["jobid"] for r in both} <= {r["jobid"] for r in ranking}
    with pytest.raises(InputError, match="either --data"):
        service.similar(jobid, top=3)
    with pytest.raises(InputError, match="q-native needs the quantised"):
        service.similar(jobid, index=saved, algorithm="q-native")


def test_predict_rows_signature_and_input_example(bundle):
    example = input_example(bundle)
    out = bundle.predict(example)
    assert list(out.columns) == ["query", "algorithm", "rank", "jobid", "similarity"]
    assert out.groupby("query").size().tolist() == [5] * len(example)
    assert (out.groupby("query")["rank"].apply(list) == [[1, 2, 3, 4, 5]] * len(example)).all()
    sig = signature()
    assert sig.inputs.input_names() == ["jobid", "coding", "levels", "algorithm", "top_k"]
    assert sig.outputs.input_names() == list(out.columns)
    with pytest.raises(InputError, match="row 0: jobid: unknown job 3"):
        bundle.predict(pd.DataFrame({"jobid": [3]}))
    jobid = int(example["jobid"][0])
    job = bundle.index.job(jobid)
    inline = bundle.predict(pd.DataFrame({"coding": [job["coding"]], "levels": [json.dumps(job["levels"])],
                                          "algorithm": ["q-native"]}))
    by_id = bundle.predict(pd.DataFrame({"jobid": [jobid], "algorithm": ["q-native"]}))
    pd.testing.assert_frame_equal(inline, by_id)


def test_mlflow_pyfunc_round_trip(bundle, tmp_path):
    """Saved as an MLflow pyfunc with signature and input example, loaded back, it predicts the same."""
    import joblib
    import mlflow.pyfunc

    class Model(mlflow.pyfunc.PythonModel):
        def load_context(self, context):
            self.bundle = joblib.load(context.artifacts["bundle"], mmap_mode="r")

        def predict(self, context, model_input, params=None):
            return self.bundle.predict(model_input)

    path = tmp_path / "bundle.joblib"
    joblib.dump(bundle, path)
    example = input_example(bundle)
    mlflow.pyfunc.save_model(tmp_path / "model", python_model=Model(), artifacts={"bundle": str(path)},
                             signature=signature(), input_example=example)
    loaded = mlflow.pyfunc.load_model(str(tmp_path / "model"))
    pd.testing.assert_frame_equal(loaded.predict(example), bundle.predict(example))


def test_predict_file_writes_one_line_per_query(bundle, generated, tmp_path):
    from jobaware.similarity import synth

    source = tmp_path / "queries.csv"
    lines = (generated / synth.FILES[synth.CODINGS]).read_text().splitlines()
    source.write_text("\n".join(lines[:4] + ["1:999,5"]) + "\n")
    summary = service.predict_file([str(source)], tmp_path / "out.jsonl", lambda: (bundle, "3"))
    assert summary.predictions == 3 and summary.bad_records == 1
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["query_jobid"] for r in records] == [int(line.split(",")[1]) for line in lines[1:4]]
    assert all(len(r["ranking"]) == 5 and r["model_version"] == "3" for r in records)
    assert records[0]["ranking"][0]["similarity"] == 1.0
    q_bundle = SimilarityBundle(bundle.index, "q-lev", 5, 1)
    with pytest.raises(InputError, match="needs the quantised codings"):
        service.predict_file([str(source)], tmp_path / "q.jsonl", lambda: (q_bundle, "3"))
    assert not (tmp_path / "q.jsonl").exists()  # a refused prediction leaves nothing behind
    quantised = tmp_path / "job_codings.csv"
    quantised.write_text("\n".join((generated / synth.FILES[synth.LEVELS]).read_text().splitlines()[:101]) + "\n")
    levels = service.predict_file([str(quantised)], tmp_path / "q.jsonl", lambda: (q_bundle, "3"))
    assert levels.predictions == 100


def test_the_request_model_states_its_rules(generated_index, bundle):
    """What the model's own schema (the OpenAPI document) calls valid is read, and what it calls invalid refused,
    naming the field: codings at and past their bounds, the rules across fields. Beyond the schema: a jobid must
    be in the pool, and the nine metrics of an inline reference must have as many values each (and as the coding)."""
    from jsonschema_rs import Draft4Validator

    from jobaware.bodies import openapi_schema, parse_body

    schema = openapi_schema(service.SimilarBody)
    validator = Draft4Validator(schema)

    def parse(body):
        return service.request_of(parse_body(service.SimilarBody, body), generated_index, "b-aggz", 5)

    jobid = int(generated_index.jobids[0])
    most = ":".join(["511"] * MAX_REFERENCE_SEGMENTS)
    for coding in ("0", "511", "0:256:272:0", most, [0], [511] * MAX_REFERENCE_SEGMENTS):
        assert validator.is_valid({"coding": coding}) and parse({"coding": coding})
    for coding in ("512", most + ":0", "", "1::2", "-1"):
        assert not validator.is_valid({"coding": coding}), coding
        with pytest.raises(InputError, match="^coding: expected 1 to 1,000 integers 0..511"):
            parse({"coding": coding})
    levels = {m: "0:16" for m in METRICS}
    assert validator.is_valid({"coding": "0:1", "levels": levels}) and parse({"coding": "0:1", "levels": levels})
    for body, words in [({"jobid": jobid, "coding": "0"}, "jobid: give either a jobid or an inline reference"),
                        ({"top_k": 3}, "jobid: give a jobid or an inline reference"),
                        ({"coding": "0", "levels": {**levels, "md_mod": "0:17"}}, r"levels\.md_mod: expected 1 to"),
                        ({"coding": "0", "levels": {m: "0" for m in METRICS[1:]}}, f"levels.{METRICS[0]}: field required"),
                        ({"coding": "0", "note": 1}, "note: unknown field")]:
        assert not validator.is_valid(body), body
        with pytest.raises(InputError, match=words):
            parse(body)
    values = {m: [1.0] * 8 for m in METRICS}
    for body, words in [({"levels": levels, "algorithm": "b-all"}, "coding: b-all needs the reference's binary coding"),
                        ({"coding": "0:1", "algorithm": "q-lev"}, "levels: q-lev needs the reference's per-metric levels"),
                        ({"coding": "0:1", "consensus": ["b-all", "ks"]}, "values: ks needs the reference's node values"),
                        ({"coding": "0", "values": {m: [1.0] * 7 for m in METRICS}}, f"values.{METRICS[0]}: list should have at least 8 items")]:
        assert not validator.is_valid(body), body  # the algorithm (or the consensus) needs what the body lacks
        with pytest.raises(InputError, match=words):
            similar_request(bundle, body)
    for body in ({"coding": "0:1", "levels": levels, "values": values, "consensus": list(service.ALGORITHMS)},
                 {"levels": levels, "algorithm": "q-phases"}, {"values": values, "algorithm": "ks"}):
        assert validator.is_valid(body) and "results" in similar_request(bundle, body)
