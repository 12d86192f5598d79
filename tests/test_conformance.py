"""The conformance suite: every registered capability passes it by registering, nothing else.

Per capability: the compiled pipeline equals its golden YAML; bad parameters are refused; a small real
kfp.local run logs, registers and promotes; promote, rollback and the gate behave (registry outage,
undefined metric, too little evaluation data); a failed contract stops validation; the service answers
400, 413 and 503 as the shared base promises.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import httpx
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from harness.ports import stop
from jobaware import capabilities, config, contracts, gate, steps, tracking
from jobaware.errors import ContractError, JobawareError
from tests.conftest import ROOT, free_port, wait_for
from tests.fuzzing import examples, fuzz_example, fuzz_service

KEYS = capabilities.keys()


def _normalised(text: str) -> list:
    """Parsed IR YAML (pipeline and platform spec) with the image replaced: a developer's JOBAWARE_IMAGE changes nothing."""
    from jobaware.components import IMAGE

    return list(yaml.safe_load_all(text.replace(IMAGE, "<image>")))


@pytest.mark.parametrize("name", [*KEYS, "all"])
def test_compiled_pipeline_equals_its_golden_yaml(name, tmp_path):
    from kfp import compiler

    from jobaware.pipelines.runner import pipeline

    compiled = tmp_path / f"{name}.yaml"
    compiler.Compiler().compile(pipeline(name), str(compiled))
    golden = ROOT / "jobaware" / "pipelines" / "golden" / f"{name}.yaml"
    assert _normalised(compiled.read_text()) == _normalised(golden.read_text()), (
        f"{name} changed: recompile with `jobaware pipeline compile --output pipelines/golden --overwrite` and review the diff")


@pytest.mark.parametrize("key", KEYS)
def test_every_mlflow_step_reads_the_tracking_uri_and_user_from_the_secret_and_is_labelled_for_mlflow(key):
    """MLflow's NetworkPolicy lets in the pipeline steps' pods by these labels (tests/test_k8s.py checks the policy
    against them), and MLflow's authentication wants the admin user, from the same Secret as the URI."""
    from jobaware.pipelines.common import TRACKED_POD_LABELS

    golden = yaml.safe_load_all((ROOT / "jobaware" / "pipelines" / "golden" / f"{key}.yaml").read_text())
    spec, platform = list(golden)
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    commands = {name: " ".join(e["container"]["command"]) for name, e in spec["deploymentSpec"]["executors"].items()}
    tracked = {name for name, args in commands.items() if "use_tracking(" in args}
    assert tracked, "no step of the pipeline talks to MLflow?"
    for name in tracked:
        (secret,) = executors[name]["secretAsEnv"]
        assert secret["secretName"] == "jobaware-mlflow"
        assert secret["keyToEnv"] == [{"envVar": "MLFLOW_TRACKING_URI", "secretKey": "tracking_uri"},
                                      {"envVar": "MLFLOW_TRACKING_USERNAME", "secretKey": "username"},
                                      {"envVar": "MLFLOW_TRACKING_PASSWORD", "secretKey": "password"}]
        assert executors[name]["podMetadata"]["labels"] == TRACKED_POD_LABELS


def _bad_values(capability) -> list[tuple[str, object]]:
    """For each parameter: a value of the wrong kind (a fraction for a count, NaN for a number)."""
    bad = []
    for name, field in capability.params.model_fields.items():
        if field.annotation is int:
            bad.append((name, 2.7))
        elif field.annotation is float:
            bad.append((name, float("nan")))
        elif typing.get_origin(field.annotation) is typing.Literal:
            bad.append((name, "no-such-choice"))
    return bad


@pytest.mark.parametrize("key", KEYS)
def test_bad_parameters_are_refused_naming_the_parameter(key):
    capability = capabilities.get(key)
    assert capability.check_params({}) == capability.params().model_dump()
    with pytest.raises(JobawareError, match=f"parameters of {key}: no_such_parameter: unknown parameter"):
        capability.check_params({"no_such_parameter": 1})
    cases = _bad_values(capability)
    assert cases, "the parameter model declares no typed parameter"
    for name, value in cases:
        with pytest.raises(JobawareError, match=rf"parameters of {key}: {name}: .*got {value!r}"):
            capability.check_params({name: value})


# ---------------------------------------------------------------- a small real run per capability


_RUNS: dict[str, str] = {}


def smoke_version(key: str, home: Path, tmp: Path) -> str:
    """Run the capability's pipeline once (kfp.local) on small generated data; the version it registered."""
    if key not in _RUNS:
        from jobaware.pipelines.runner import run_local

        capability = capabilities.get(key)
        records, params = capability.smoke
        data = tmp / f"{key}-smoke"
        capability.synth(data, records, seed=5, fmt=None, progress=None)
        outputs = run_local(key, {"data": str(data), "params": json.dumps(params),
                                  "tracking_uri": config.tracking_uri()}, home / "kfp")
        _RUNS[key] = outputs["Output"]
    return _RUNS[key]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("key", KEYS)
def test_a_small_run_logs_registers_promotes_and_rolls_back(key, in_home, tmp_path_factory):
    capability = capabilities.get(key)
    version = smoke_version(key, in_home, tmp_path_factory.mktemp(key))
    rows = {r["version"]: r for r in tracking.list_models() if r["model"] == capability.model_name}
    assert rows[version]["aliases"] == "challenger,champion"
    assert rows[version]["metric"] == capability.primary_metric and rows[version]["score"]
    _, client = tracking.mlflow_client()
    run = client.get_run(rows[version]["run_id"])
    assert run.data.metrics["contract_success"] == 1.0 and capability.primary_metric in run.data.metrics
    assert run.data.tags[tracking.FEATURE_TAG] == capability.feature_version
    assert {a.path for a in client.list_artifacts(run.info.run_id, tracking.EVAL_DIR)}, "no evaluation data for the gate"
    assert tracking.version_metrics(key, version)["model"][capability.primary_metric] == pytest.approx(
        float(rows[version]["score"]), abs=1e-6, nan_ok=True)
    from jobaware.results import metrics_rows

    trivial = capability.trivial_baselines
    assert set(trivial) & set(tracking.version_metrics(key, version)), f"no trivial baseline ({' or '.join(trivial)})"
    assert metrics_rows(capability, tracking.version_metrics(key, version))[0][0]["model"] == "model"

    # a second version from the same run: the gate compares the two on the same data and passes a tie
    second = tracking.register(key, rows[version]["run_id"])
    decision = gate.promote(key, second)
    assert decision["promoted"] and decision["champion"] == second, decision["reason"]
    assert decision["candidate_score"] == pytest.approx(decision["champion_score"], nan_ok=True)
    assert gate.rollback(key)["champion"] == version
    assert tracking.champion_version(key) == version
    with pytest.raises(JobawareError, match="no earlier champion"):
        gate.rollback(key)
    actions = client.search_runs([tracking.experiment_id(key)], "tags.`jobaware.action` = 'rollback'")
    assert len(actions) == 1
    from tests.jobaware.test_registry_read import assert_both_ways_read_the_same

    assert_both_ways_read_the_same(key, [version, second])


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("key", KEYS)
def test_the_gate_moves_nothing_under_a_registry_outage(key, in_home, tmp_path_factory):
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    version = smoke_version(key, in_home, tmp_path_factory.mktemp(key))
    _, client = tracking.mlflow_client()
    candidate = tracking.register(key, client.get_model_version(capabilities.get(key).model_name, version).run_id)
    before = tracking.champion_version(key)

    def outage(*args, **kwargs):
        raise MlflowException("connection reset by peer", error_code="INTERNAL_ERROR")

    with pytest.MonkeyPatch.context() as patch:  # its own patch: undoing it keeps the fixture's JOBAWARE_HOME
        patch.setattr(MlflowClient, "get_model_version_by_alias", outage)
        with pytest.raises(tracking.RegistryError, match="could not read alias 'champion'.*connection reset"):
            gate.promote(key, candidate)
    assert tracking.champion_version(key) == before


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("key", KEYS)
def test_the_gate_refuses_an_undefined_metric_and_too_little_evaluation_data(key, in_home, tmp_path_factory):
    capability = capabilities.get(key)
    version = smoke_version(key, in_home, tmp_path_factory.mktemp(key))
    _, client = tracking.mlflow_client()
    run_id = client.get_model_version(capability.model_name, version).run_id
    champion = tracking.champion_version(key)

    candidate = tracking.register(key, run_id)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(capability.score, "resolve", lambda: lambda bundle, folder: (float("nan"), 10**6))
        decision = gate.promote(key, candidate)
        assert not decision["promoted"] and "is undefined" in decision["reason"]
        assert tracking.champion_version(key) == champion

        patch.setattr(capability.score, "resolve", lambda: lambda bundle, folder: (1.0, 3))
        decision = gate.promote(key, candidate)
        assert not decision["promoted"] and f"has 3 rows; the gate needs at least {capability.min_eval_rows:,}" in decision["reason"]
        assert gate.last_promotion(key, candidate)["reason"] == decision["reason"][:490]
        forced = gate.promote(key, candidate, force=True)
        assert forced["promoted"] and forced["forced"]
    gate.rollback(key)
    assert tracking.champion_version(key) == champion


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("key", KEYS)
def test_a_failed_contract_stops_validation(key, tmp_path):
    capability = capabilities.get(key)
    records, _ = capability.smoke
    data = tmp_path / f"{key}-data"
    capability.synth(data, min(records, 2000), seed=6, fmt=None, progress=None)
    dataset = tmp_path / "dataset"
    steps.ingest(key, str(data), dataset)
    assert steps.validate(dataset)["success"]
    broken = 0
    for table in dataset.glob("*.parquet"):
        suite = json.loads((ROOT / "jobaware" / "data_contracts" / f"{table.stem}.json").read_text())
        required = [e["kwargs"]["column"] for e in suite["expectations"] if e["type"] == "expect_column_values_to_not_be_null"]
        if required:
            frame = pd.read_parquet(table)
            frame[required[0]] = frame[required[0]].astype("object")
            frame.loc[0, required[0]] = None
            frame.to_parquet(table)
            broken += 1
    assert broken, "no table has a required column"
    with pytest.raises(ContractError, match="expect_column_values_to_not_be_null"):
        steps.validate_step(str(dataset), str(tmp_path / "report.json"))
    assert not json.loads((tmp_path / "report.json").read_text())["success"]


# ---------------------------------------------------------------- the services
def _serve(key: str, home: Path, log: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    env = {**os.environ, "JOBAWARE_HOME": str(home), "JOBAWARE_MAX_BODY_BYTES": "100000"}
    env.pop("MLFLOW_TRACKING_URI", None)
    process = subprocess.Popen([str(Path(sys.executable).with_name("jobaware")), "serve", key, "--port", str(port)],
                               stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return f"http://127.0.0.1:{port}", process


ANY_SERVICE_REFUSES = (r"^request body too large",)  # what every service may refuse a valid body for


def _service_module(key: str):
    """The slice's service module: its route functions, bodies, limits and UNSTATABLE (why a body valid by the OpenAPI
    document may still be refused) and VALID_ANSWERED (the least share of such bodies answered)."""
    import importlib

    return importlib.import_module(capabilities.get(key).predict_file.target.partition(":")[0])


@pytest.mark.slow
@pytest.mark.timeout(max(900, examples(30) * 4))  # `make fuzz` runs long
@pytest.mark.parametrize("key", KEYS)
def test_the_service_answers_400_413_and_follows_the_champion(key, conformance_home, tmp_path_factory, tmp_path):
    capability = capabilities.get(key)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOBAWARE_HOME", str(conformance_home))
        version = smoke_version(key, conformance_home, tmp_path_factory.mktemp(key))
        assert tracking.champion_version(key) == version
    url, process = _serve(key, conformance_home, tmp_path / "serve.log")
    try:
        wait_for(f"{url}/readyz", 180, process)
        route, example = capability.example
        good = httpx.post(f"{url}{route}", json=example, timeout=60)
        assert good.status_code == 200, good.text
        assert version in good.text
        # the smoke champion was trained on generated data, and its answer says so (issue 25)
        assert good.json()["fit"][0].startswith(f"model version {version} was trained on synthetic data"), good.text
        broken = httpx.post(f"{url}{route}", content=b"{nope", headers={"content-type": "application/json"}, timeout=30)
        assert broken.status_code == 400 and broken.json() == {"error": broken.json()["error"], "field": None}
        wrong = httpx.post(f"{url}{route}", json={**example, "no_such_field": 1}, timeout=30)
        assert wrong.status_code == 400 and wrong.json() == {"error": "no_such_field: unknown field",
                                                             "field": "no_such_field"}, wrong.text
        form = httpx.post(f"{url}{route}", data={"secret-form-field": "x"}, timeout=30)
        assert form.status_code == 415 and "secret-form-field" not in form.text and set(form.json()) == {"error", "field"}
        huge = httpx.post(f"{url}{route}", content=b" " * 200_000, headers={"content-type": "application/json"}, timeout=30)
        assert huge.status_code == 413 and huge.json() == {"error": "request body too large: the limit is 100,000 bytes",
                                                           "field": None}
        docs = httpx.get(f"{url}/docs", timeout=30)
        assert docs.status_code == 200 and "./docs.json" in docs.text and "https://" not in docs.text
        fuzzed_schema = fuzz_service(key, url, examples(30))
        for fuzzed in (fuzzed_schema,  # Schemathesis over the service's own OpenAPI document
                       fuzz_example(key, url, route, example, examples(30))):  # its own example, values made extreme
            print(fuzzed.line())
            assert fuzzed.calls and not fuzzed.failures, "\n".join(fuzzed.failures)
        # each OpenAPI document describes its body exactly: a body valid by it is answered, or refused for what
        # JSON Schema cannot state
        service = _service_module(key)
        unstatable = (*getattr(service, "UNSTATABLE", ()), *ANY_SERVICE_REFUSES)
        unstated = [why for why in fuzzed_schema.refused_valid
                    if not any(re.search(pattern, why) for pattern in unstatable)]
        assert not unstated, f"bodies valid by the OpenAPI document refused: {unstated}"
        assert fuzzed_schema.answered_valid() >= getattr(service, "VALID_ANSWERED", 0.0), fuzzed_schema.line()
        assert httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    finally:
        stop(process)
    assert process.poll() is not None


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", KEYS)
def test_the_service_answers_503_while_no_champion_exists(key, tmp_path):
    empty = tmp_path / "empty-home"
    url, process = _serve(key, empty, tmp_path / "serve.log")
    try:
        wait_for(f"{url}/livez", 180, process)
        assert httpx.get(f"{url}/readyz", timeout=5).status_code == 503
        route, example = capabilities.get(key).example
        answer = httpx.post(f"{url}{route}", json=example, timeout=30)
        assert answer.status_code == 503 and answer.json() == {
            "error": f"no champion model of jobaware-{key} yet; run `jobaware pipeline run {key}`", "field": None}
    finally:
        stop(process)
    assert not empty.exists() or not (empty / "mlflow.db").exists(), "a reading service created a store"


@pytest.mark.parametrize("key", KEYS)
def test_a_contract_judges_arrow_text_as_it_judges_python_text(key, tmp_path):
    """The contracts runner hands Great Expectations text columns as they are read (Arrow-backed strings): the
    report, failures and examples included, is the one the same table gives as Python objects."""
    capability = capabilities.get(key)
    data = tmp_path / f"{key}-data"
    capability.synth(data, min(capability.smoke[0], 1000), seed=7, fmt=None, progress=None)
    steps.ingest(key, str(data), tmp_path / "dataset")
    for table in (tmp_path / "dataset").glob("*.parquet"):
        frame = pq.read_table(table).to_pandas(types_mapper=contracts._types)  # as validate_parquet reads it
        suite = json.loads((ROOT / "jobaware" / "data_contracts" / f"{table.stem}.json").read_text())
        for item in suite["expectations"]:  # break each text check once, in its own row
            column = item["kwargs"].get("column")
            if column in frame and pd.api.types.is_string_dtype(frame[column]) and item["type"] != "expect_column_values_to_not_be_null":
                frame.loc[len(frame) % 7, column] = "#bad value#"
        frame.loc[1, frame.columns[1]] = None
        as_arrow = contracts.validate_frames([frame], table.stem)
        as_objects = contracts.validate_frames([frame.astype({c: object for c in frame.columns if pd.api.types.is_string_dtype(frame[c])})], table.stem)
        assert as_arrow == as_objects and not as_arrow["success"]


HEAVY = ("torch", "sklearn", "bentoml", "kfp", "mlflow", "pandas", "great_expectations")


def test_reading_the_registry_and_starting_the_cli_import_no_model_code():
    """The registry's first promise: listing the capabilities (and so `jobaware --help`) loads no model code."""
    probe = ("import sys; from jobaware import capabilities; capabilities.registry(); import jobaware.cli; "
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert loaded.stdout.strip() == "[]", f"imported at start: {loaded.stdout.strip()}"


@pytest.mark.parametrize("key", KEYS)
def test_every_slice_keeps_its_registration_constants_in_capability_py(key):
    """The gate's constants and the feature version live in the registration, read without importing the slice."""
    capability = capabilities.get(key)
    module = sys.modules[f"jobaware.{key}.capability"]
    assert module.FEATURE_VERSION == capability.feature_version
    assert capability.min_eval_rows > 0 and capability.primary_metric



# ---------------------------------------------------------------- one layout for every slice, by role
ROLES = ("capability.py", "params.py", "schema.py", "synth.py", "train.py", "bundle.py", "service.py")
OPTIONAL_ROLES = ("features.py", "steps.py", "commands.py", "card.py", "accuracy.py")  # ..., a card part, its accuracy
READERS = ("reader.py", "reader")  # the reader role: a module or a package
# registry reference -> the role module and function it must name
ROLE_REFS = {"synth": "synth:write_synthetic", "default_data": "synth:default_data", "signature": "bundle:signature",
             "input_example": "bundle:input_example", "score": "train:score", "predict_file": "service:predict_file",
             "train": "train:train", "commands": "commands:register"}


def _top_level(path: Path) -> tuple[set[str], dict[str, list[str]]]:
    """The module-level function names of a file, and its classes with the names of their bases."""
    tree = ast.parse(path.read_text())
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in n.bases]
               for n in tree.body if isinstance(n, ast.ClassDef)}
    return functions, classes


@pytest.mark.parametrize("key", KEYS)
def test_every_slice_has_the_same_files_for_the_same_roles(key):
    """Every slice keeps each role in the module named for it (docs/architecture.md): the registry's references
    name those modules, no role function is defined elsewhere, steps.py holds only the KFP steps its components
    call, and the bundle and evaluation are the platform's types."""
    slice_dir = ROOT / "jobaware" / key
    missing = [role for role in ROLES if not (slice_dir / role).is_file()]
    assert not missing, f"jobaware/{key}/ lacks {missing}"
    readers = [r for r in READERS if (slice_dir / r).exists()]
    assert len(readers) == 1, f"jobaware/{key}/: expected one reader module or package, found {readers}"
    capability = capabilities.get(key)
    assert capability.params.__module__ == f"jobaware.{key}.params"
    assert capability.ingest.target.startswith(f"jobaware.{key}.{readers[0].removesuffix('.py')}")
    for field, role in ROLE_REFS.items():
        ref = getattr(capability, field)
        if ref is not None:
            assert ref.target == f"jobaware.{key}.{role}", f"{key}: {field} is {ref.target}, not in its role module"

    if capability.card is not None:  # the card part's functions live in the slice's card.py, its accuracy on live
        refs = {name: ref for name, ref in vars(capability.card).items() if isinstance(ref, capabilities.Ref)}
        accuracy = refs.pop("accuracy", None)  # jobs in accuracy.py
        assert refs and all(ref.target.startswith(f"jobaware.{key}.card:") for ref in refs.values()), f"{key}: {refs}"
        assert accuracy is None or accuracy.target == f"jobaware.{key}.accuracy:accuracy_report", f"{key}: {accuracy}"
        for ref in [*refs.values(), *[accuracy] * (accuracy is not None)]:
            ref.resolve()

    modules = {path: _top_level(path) for path in sorted(slice_dir.rglob("*.py"))}
    for path, (functions, _) in modules.items():
        for role in ROLE_REFS.values():
            module, function = role.split(":")
            if function in functions and path != slice_dir / f"{module}.py":
                pytest.fail(f"jobaware/{key}/{path.relative_to(slice_dir)} defines {function}, a role of {module}.py")
    assert "Bundle" in sum(modules[slice_dir / "bundle.py"][1].values(), []), f"{key}: no Bundle subclass in bundle.py"
    assert "Evaluation" in sum(modules[slice_dir / "train.py"][1].values(), []), f"{key}: no Evaluation subclass in train.py"

    if (slice_dir / "steps.py").is_file():
        component = ROOT / "jobaware" / "components" / f"{key}.py"
        called = set(re.findall(rf"from jobaware\.{key}\.steps import (\w+)", component.read_text())) if component.is_file() else set()
        public = {f for f in modules[slice_dir / "steps.py"][0] if not f.startswith("_")}
        assert public and public == called and all(f.endswith("_step") for f in public), (
            f"jobaware/{key}/steps.py: {sorted(public)}, but its components call {sorted(called)}")

# ---------------------------------------------------------------- the CLI contract
# Each capability's real sample (a small slice where the sample is large) and a file that is not its data.
REAL_SAMPLES = {
    "failure": ROOT / "jobaware" / "data" / "real" / "nrel" / "eagle_sample_jobs.csv",
    "hold": ROOT / "jobaware" / "data" / "real" / "condor" / "htcondor_test_condor.log",
    "similarity": ROOT / "jobaware" / "data" / "real" / "mistral" / "dkrz_mistral_job_codings_binary.csv",
    "resource": ROOT / "jobaware" / "data" / "real" / "scripts",
    "wait": ROOT / "jobaware" / "data" / "real" / "swf" / "KTH-SP2-1996-2.1-cln.swf",
}
SENTINEL = b"an existing file that a refused command must leave as it is\n"


def _real_sample(key: str, tmp: Path) -> Path:
    """The capability's real sample: listed above, else the data its registration trains on by default (`make run`'s,
    a real file where the slice defaults to one)."""
    if key not in REAL_SAMPLES:
        return Path(capabilities.get(key).default_data(tmp, None))
    sample = REAL_SAMPLES[key]
    if key == "similarity":  # 70,000 real jobs: the first 150 answer as well
        small = tmp / "mistral" / sample.name
        small.parent.mkdir()
        small.write_text("\n".join(sample.read_text().splitlines()[:151]) + "\n")
        return small.parent  # a folder: sources are expanded as everywhere else
    return sample


def _cli(args: list, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("jobaware")), *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600, check=False)


def _no_crash(name: str, result: subprocess.CompletedProcess) -> None:
    text = result.stdout + result.stderr
    assert "unexpected" not in text and "Traceback" not in text, f"{name}: {text[-2000:]}"


def _refused_in_one_line(name: str, result: subprocess.CompletedProcess, code: int = 1) -> None:
    """Exit `code` (1 bad input, 2 usage: README, "The command contract") with one `error:` line."""
    _no_crash(name, result)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code and len(lines) == 1 and lines[0].startswith("error: "), (
        f"{name}: exit {result.returncode}, stderr {result.stderr[-2000:]!r}")


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("key", KEYS)
def test_every_key_taking_command_keeps_the_cli_contract(key, in_home, tmp_path_factory, tmp_path):
    """On the capability's real sample and on a wrong file, through the real CLI: exit 0 on good input, exit 1
    with one line on bad input, never "unexpected" or a traceback, and an existing output file untouched by a
    refused command."""
    from concurrent.futures import ThreadPoolExecutor

    version = smoke_version(key, in_home, tmp_path_factory.mktemp(key))
    real = _real_sample(key, tmp_path)
    wrong = tmp_path / "wrong.csv"
    wrong.write_bytes(b"not data of any capability\n\x00\x01\x02 [/bold] [red]\n")
    kept = {name: tmp_path / name for name in ("synth.out", "predict.out", "compile.out")}
    for path in kept.values():
        path.write_bytes(SENTINEL)
    out = tmp_path / "predictions.jsonl"
    env = {**os.environ, "JOBAWARE_HOME": str(in_home), "COLUMNS": "200"}
    env.pop("MLFLOW_TRACKING_URI", None)
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    cases = {
        "validate real": ["data", "validate", key, "--input", real],
        "validate wrong": ["data", "validate", key, "--input", wrong],
        "synth refused": ["data", "synth", key, "--jobs", 0, "--output", kept["synth.out"], "--overwrite"],
        "predict real": ["predict", key, "--input", real, "--output", out],
        "predict stdout": ["predict", key, "--input", real, "--output", "-"],
        "predict wrong": ["predict", key, "--input", wrong if key != "resource" else tmp_path / "none", "--output",
                          kept["predict.out"], "--overwrite"],
        "pipeline budget": ["pipeline", "run", key, "--budget", -1],
        "pipeline param": ["pipeline", "run", key, "--param", "no_such_parameter=1"],
        "models show": ["models", "show", key, version, "--json"],
        "promote forced": ["models", "promote", key, version, "--force", "--json"],
        "serve taken port": ["serve", key, "--port", taken.getsockname()[1]],
    }
    try:
        with ThreadPoolExecutor(3) as pool:
            results = dict(zip(cases, pool.map(lambda args: _cli(args, env), cases.values()), strict=True))
    finally:
        taken.close()

    for name in ("validate real", "predict real", "predict stdout", "models show", "promote forced"):
        _no_crash(name, results[name])
        assert results[name].returncode == 0, f"{name}: {results[name].stderr[-2000:]}"
    _no_crash("validate wrong", results["validate wrong"])
    assert results["validate wrong"].returncode == 1
    for name in ("predict wrong", "serve taken port"):
        _refused_in_one_line(name, results[name])
    for name in ("synth refused", "pipeline budget", "pipeline param"):  # a wrong value on the command line
        _refused_in_one_line(name, results[name], code=2)
    for path in kept.values():
        assert path.read_bytes() == SENTINEL, f"{path.name} was touched by a refused command"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "a temporary file was left behind"

    written = [json.loads(line) for line in out.read_text().splitlines()]
    piped = [json.loads(line) for line in results["predict stdout"].stdout.splitlines()]
    assert written == piped and all(row["model_version"] == version for row in written)
    assert written or key == "hold"  # the real hold sample ends with no hold standing: nothing to decide
    assert f"wrote {len(written):,} predictions to {out}" in results["predict real"].stdout
    if key != "resource":  # resource always trains on the real scripts beside the generated ones
        assert "was trained on synthetic data; this input is real data" in results["predict real"].stderr
    assert "Invalid value for '--budget'" in results["pipeline budget"].stderr
    assert "(valid: " in results["pipeline param"].stderr
    shown = json.loads(results["models show"].stdout)
    assert shown["version"] == version and shown["trained_on"]["kind"] == "synthetic" and shown["metrics"]
    assert isinstance(shown["score"], float) and shown["params"]
    forced = json.loads(results["promote forced"].stdout)
    assert forced["promoted"] and forced["candidate_score"] == pytest.approx(shown["score"])


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_registry_commands_answer_for_every_capability(in_home, tmp_path_factory, tmp_path):
    """`capabilities`, `models list`, `runs list|show` and `pipeline compile` over the session's registry."""
    versions = {key: smoke_version(key, in_home, tmp_path_factory.mktemp(key)) for key in KEYS}
    env = {**os.environ, "JOBAWARE_HOME": str(in_home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    listed = _cli(["capabilities", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    for row in json.loads(listed.stdout):
        assert row["formats"] and row["champion"] and row["trained_on"].startswith("synthetic"), row
    models = _cli(["models", "list", "--json"], env)
    rows = json.loads(models.stdout)
    assert {r["model"] for r in rows} == {f"jobaware-{k}" for k in KEYS}
    assert all(isinstance(r["score"], float) for r in rows if r["version"] in versions.values()), rows
    runs = _cli(["runs", "list", "--json", "--limit", 50], env)
    run_id = next(r["run_id"] for r in json.loads(runs.stdout) if r["kind"] == "training")
    shown = _cli(["runs", "show", run_id, "--json"], env)
    assert json.loads(shown.stdout)["run_id"] == run_id and "fit" in json.loads(shown.stdout)["artifacts"]
    _refused_in_one_line("runs show unknown", _cli(["runs", "show", "no-such-run"], env))
    folder_taken = tmp_path / "compiled"
    folder_taken.write_bytes(SENTINEL)
    _refused_in_one_line("compile onto a file", _cli(["pipeline", "compile", "--output", folder_taken], env))
    assert folder_taken.read_bytes() == SENTINEL
