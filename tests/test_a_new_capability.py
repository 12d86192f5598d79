"""A capability joins by registering: a throw-away sixth one, written as a new capability is (its slice with its
registration and card part, its service table, its pipeline; nothing else), is found by the CLI, the pipeline
compiler, the service table, the Kubernetes manifests, the job card (`jobaware card` and the card gateway) and the
conformance suite, with no other edit; with its card part it has `jobaware sixth JOBID` beside its own commands.

The slice lives in a temporary folder put on the packages' paths (`jobaware`, `jobaware.serving`, `jobaware.pipelines`) by a
`sitecustomize` of the child processes, so the project's own tree is left as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from harness.ports import free_port, stop, wait_for
from jobaware import capabilities
from tests.conftest import ROOT, SQUEUE
from tests.loopback import JsonServer

KEY = "sixth"
FILES = {
    f"jobaware/{KEY}/__init__.py": '"""A throw-away capability of tests/test_a_new_capability.py."""\n',
    f"jobaware/{KEY}/params.py": """
        from pydantic import BaseModel, ConfigDict, Field


        class Params(BaseModel):
            model_config = ConfigDict(extra="forbid", strict=True)
            factor: int = Field(2, ge=1)
        """,
    f"jobaware/{KEY}/capability.py": """
        from jobaware.capabilities import Capability, CardPart, Ref
        from jobaware.sixth.params import Params

        FEATURE_VERSION = "1"

        CAPABILITY = Capability(
            key="sixth", question="how much is twice this number?", params=Params, primary_metric="error",
            higher_is_better=False, min_eval_rows=1, feature_version=FEATURE_VERSION,
            ingest=Ref("jobaware.sixth.reader:ingest"), synth=Ref("jobaware.sixth.synth:write_synthetic"),
            default_data=Ref("jobaware.sixth.synth:default_data"), signature=Ref("jobaware.sixth.bundle:signature"),
            input_example=Ref("jobaware.sixth.bundle:input_example"), score=Ref("jobaware.sixth.train:score"),
            predict_file=Ref("jobaware.sixth.service:predict_file"), train=Ref("jobaware.sixth.train:train"),
            service="jobaware.serving.sixth:SixthService", pipeline="jobaware.pipelines.sixth:sixth_pipeline",
            example=("/double", {"n": 21}), smoke=(10, {}), commands=Ref("jobaware.sixth.commands:register"),
            card=CardPart(answer=Ref("jobaware.sixth.card:answer"), shown=Ref("jobaware.sixth.card:shown"),
                          words=Ref("jobaware.sixth.card:words")))
        """,
    f"jobaware/{KEY}/card.py": """
        from jobaware.card import NotApplicable


        def answer(context: dict, ask) -> dict:
            if context.get("job_id") is None:
                raise NotApplicable("no job id")
            doubled = ask.post("/double", {"n": context["job_id"]})
            return {"double": doubled["double"], "model_version": doubled["model_version"]}


        def shown(part: dict) -> str:
            return f"twice the id is {part['double']}"


        def words(part: dict, history: dict) -> str | None:
            return f"twice {part['double']}" if part["status"] == "ok" else None
        """,
    f"jobaware/{KEY}/service.py": """
        from pydantic import Field
        from pydantic_settings import SettingsConfigDict

        from jobaware.bodies import Body, Limits as BaseLimits
        from jobaware.model import Served


        class Limits(BaseLimits):
            model_config = SettingsConfigDict(env_prefix="JOBAWARE_SIXTH_")
            max_n: int = Field(1000, ge=1)


        LIMITS = Limits.load()


        class DoubleRequest(Body):
            n: int = Field(ge=0, le=LIMITS.max_n, description="a number")


        def double(body: DoubleRequest, model: Served, limits: Limits = LIMITS) -> dict:
            \"\"\"Twice the number.\"\"\"
            return {"model_version": model.version, "fit": model.fit(), "double": model.bundle.factor * body.n}


        def predict_file(inputs, output, bundle, version, progress=None):
            raise NotImplementedError
        """,
    f"jobaware/{KEY}/commands.py": """
        import typer


        def register(group: typer.Typer, root: typer.Typer) -> None:
            @group.command("hello")
            def hello() -> None:
                \"\"\"Say hello from the sixth capability.\"\"\"
                print("hello from sixth")
        """,
    f"jobaware/serving/{KEY}.py": """
        from jobaware.sixth import service as sixth
        from jobaware.serving.base import Route, service

        SixthService = service("sixth", "Twice a number.", sixth.LIMITS,
                               Route("/double", sixth.DoubleRequest, sixth.double), key="sixth")
        """,
    f"jobaware/pipelines/{KEY}.py": """
        from jobaware.pipelines.common import one_step_pipeline

        sixth_pipeline = one_step_pipeline("sixth", "Twice a number: ingest, validate, train, register, promote")
        """,
    "site/sitecustomize.py": """
        import os

        import jobaware
        import jobaware.pipelines
        import jobaware.serving

        extra = os.environ["JOBAWARE_TEST_EXTRA"]
        for package in (jobaware, jobaware.serving, jobaware.pipelines):
            package.__path__.append(os.path.join(extra, *package.__name__.split(".")))
        """,
}

# What the sixth capability must be found in, each checked in the child process: the place and the proof.
PROBE = """
import json, tempfile
from pathlib import Path

found = {}
from jobaware import capabilities
found["registry"] = capabilities.keys()

from kfp import compiler
from jobaware.pipelines.runner import names, pipeline
out = Path(tempfile.mkdtemp()) / "sixth.yaml"
compiler.Compiler().compile(pipeline("sixth"), str(out))
found["pipeline compiled"] = "jobaware-sixth" in out.read_text()
import inspect
from jobaware.pipelines.all import Versions, all_pipeline
found["pipeline all"] = "sixth_data" in inspect.signature(all_pipeline.pipeline_func).parameters and "sixth" in Versions._fields
found["pipeline names"] = "sixth" in names()

import importlib
module, _, name = capabilities.get("sixth").service.partition(":")
service = getattr(importlib.import_module(module), name)
document = service.openapi_spec.asdict()
found["service"] = [service.name, sorted(document["paths"]), sorted(service.apis)]

from jobaware import manifests
rendered = manifests.rendered()
found["k8s"] = ["base/sixth.yaml" in rendered, "- sixth.yaml" in rendered["base/kustomization.yaml"],
                "JOBAWARE_SIXTH_URL" in rendered["base/card.yaml"],
                all("jobaware-sixth" in rendered[f"overlays/{o}/services.yaml"] for o in manifests.OVERLAYS)]

from jobaware import card, config
import os
os.environ["JOBAWARE_SIXTH_URL"] = "http://sixth.invalid"
found["card"] = ["sixth" in card.declared(),
                 card.service_urls().get("sixth") == config.service_url("sixth") == "http://sixth.invalid"]
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def extra(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sixth")
    for path, text in FILES.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(textwrap.dedent(text).lstrip())
    return folder


def environment(extra: Path, home: Path, **more: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{extra / 'site'}{os.pathsep}{ROOT}", "JOBAWARE_TEST_EXTRA": str(extra),
           "JOBAWARE_HOME": str(home), "COLUMNS": "200", **more}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def run(extra: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, env=environment(extra, home, **env), cwd=ROOT,
                          timeout=600, check=False)


def test_a_sixth_capability_is_found_everywhere_by_registering(extra, tmp_path):
    python, jobaware = sys.executable, str(Path(sys.executable).with_name("jobaware"))
    probe = run(extra, tmp_path, python, "-c", PROBE)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["registry"] == sorted([*capabilities.keys(), KEY])  # by name, beside the project's own
    assert found["pipeline compiled"] and found["pipeline all"] and found["pipeline names"]
    assert found["service"] == ["jobaware-sixth", ["/double", "/healthz", "/livez", "/metrics", "/readyz"], ["double"]]
    assert found["k8s"] == [True, True, True, True]
    assert found["card"] == [True, True]

    # the CLI: its command group, its key where a command takes one, its own commands
    usage = run(extra, tmp_path, jobaware, "--help")
    assert usage.returncode == 0 and "sixth" in usage.stdout and "how much is twice this number" in usage.stdout.lower()
    assert f"capability: {', '.join(sorted([*capabilities.keys(), KEY]))}" in " ".join(
        run(extra, tmp_path, jobaware, "predict", "--help").stdout.split())
    assert run(extra, tmp_path, jobaware, "sixth", "hello").stdout.strip() == "hello from sixth"
    predicted = run(extra, tmp_path, jobaware, "predict", KEY, "--input", str(extra / "none.csv"), "--output", "-")
    assert predicted.returncode != 0 and "unknown capability" not in predicted.stderr
    assert "jobaware-sixth" in predicted.stderr or "sixth" in predicted.stderr, predicted.stderr[-2000:]

    # the conformance suite: every parametrised check runs for it too
    collected = run(extra, tmp_path, python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                    "tests/test_conformance.py", "-k", KEY)
    ids = [line for line in collected.stdout.splitlines() if f"[{KEY}]" in line]
    assert len(ids) >= 10, collected.stdout[-3000:]
    assert any("test_the_service_answers_400_413_and_follows_the_champion[sixth]" in i for i in ids)
    assert any("test_compiled_pipeline_equals_its_golden_yaml[sixth]" in i for i in ids)


def doubled(method: str, path: str, body) -> tuple[int, object]:
    """The sixth capability's service as its card part asks it (no champion of it is trained here)."""
    if path != "/double":
        return 404, {"error": f"not found: {method} {path}", "field": None}
    return 200, {"model_version": "1", "fit": {}, "double": 2 * body["n"]}


def test_a_sixth_capability_has_its_part_in_the_job_card(extra, tmp_path):
    """`jobaware card` (over a recorded squeue: job 3 is pending) and the card gateway (`bentoml serve`) both ask the
    sixth service through its registered card part; the other parts' services are down and say so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in {"squeue": f"cat {SQUEUE}", "scontrol": "echo '#!/bin/bash'; echo 'python train.py'"}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{text}\n")
        (bin_dir / name).chmod(0o755)
    down = f"http://127.0.0.1:{free_port()}"
    with JsonServer(doubled) as sixth:
        urls = {f"JOBAWARE_{key.upper()}_URL": down for key in capabilities.keys()}
        urls["JOBAWARE_SIXTH_URL"] = sixth.url
        shown = run(extra, tmp_path, str(Path(sys.executable).with_name("jobaware")), "card", "3", "--json",
                    PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **urls)
        assert shown.returncode == 0, shown.stderr[-3000:]
        answer = json.loads(shown.stdout)
        assert answer["parts"][KEY] == {"status": "ok", "reason": None, "double": 6, "model_version": "1"}
        assert answer["parts"]["failure"]["status"] == "unavailable" and KEY not in answer["missing"]
        assert answer["short"].endswith("twice 6")
        # `jobaware sixth JOBID`, beside its own `jobaware sixth hello`: the line `jobaware card JOBID --part sixth` prints
        lines = [run(extra, tmp_path, str(Path(sys.executable).with_name("jobaware")), *args,
                     PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **urls)
                 for args in (("sixth", "3"), ("card", "3", "--part", KEY))]
        assert [line.returncode for line in lines] == [0, 0], lines[0].stderr[-2000:]
        assert lines[0].stdout == lines[1].stdout == "job 3: sixth: twice the id is 6; model 1\n"

        port = free_port()
        gateway = subprocess.Popen([str(Path(sys.executable).with_name("bentoml")), "serve", "jobaware.serving.card:CardService",
                                    "--port", str(port)], stdout=open(tmp_path / "card.log", "wb"),
                                   stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
                                   env=environment(extra, tmp_path, BENTOML_HOME=str(tmp_path / "bentoml"), **urls))
        try:
            wait_for(f"http://127.0.0.1:{port}/readyz", 180, gateway)
            record = json.loads(SQUEUE.read_text())["jobs"][2]
            card = httpx.post(f"http://127.0.0.1:{port}/card", json={"job_id": 21, "job": record}, timeout=60)
            assert card.status_code == 200, card.text
            assert card.json()["parts"][KEY] == {"status": "ok", "reason": None, "double": 42, "model_version": "1"}
            assert card.json()["short"].endswith("twice 42")
        finally:
            stop(gateway)
    assert [request[1] for request in sixth.requests] == ["/double"] * 4
