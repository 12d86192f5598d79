"""A command that needs an extra the install lacks says which, in one line (jobaware.extras): run here with the
extra's packages made absent (their modules unimportable, their distributions unknown to the metadata), in a real
process; tests/test_install.py runs the light install itself."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

from jobaware import extras
from tests.conftest import NREL_CSV, ROOT

# the CLI with some distributions absent: their top-level modules are None in sys.modules (an import raises
# ModuleNotFoundError, as in an install without them) and jobaware.extras finds no metadata for them
ABSENT = """
import sys
from importlib import metadata
absent = set(sys.argv[1].split(","))
for module in sys.argv[2].split(","):
    sys.modules[module] = None
from jobaware import extras
real = extras.installed
extras.installed = lambda name: name not in absent and real(name)
from jobaware.cli import main
sys.argv = ["jobaware", *sys.argv[3:]]
main()
"""


def without(distributions: list[str], modules: list[str], *args, tmp_path) -> subprocess.CompletedProcess:
    env = {"JOBAWARE_HOME": str(tmp_path / "home"), "JOBAWARE_CONFIG": "/nonexistent", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", ABSENT, ",".join(distributions), ",".join(modules), *map(str, args)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def one_line(result: subprocess.CompletedProcess, extra: str) -> None:
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [f"error: this command needs jobaware[{extra}]: pip install "
                                                  f"'jobaware[{extra}]'"], result.stderr
    assert "Traceback" not in result.stderr


def test_the_extras_are_pyprojects_and_all_holds_every_one():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras.ORDER) <= set(declared)
    assert declared["all"] == ["jobaware[reports,htcondor,kafka,train,serve]"]
    found = extras.extras()
    assert found["serve"] >= {"bentoml", "mlflow", "torch"} and "kfp" not in found["serve"]
    assert found["train"] >= {"kfp", "mlflow", "great-expectations", "torch"} and "bentoml" not in found["train"]
    assert found["htcondor"] == {"htcondor"} and found["reports"] == {"scikit-learn", "matplotlib"}


def test_a_missing_package_is_named_by_the_extra_that_brings_it(monkeypatch):
    monkeypatch.setattr(extras, "installed", lambda name: name not in {"kfp", "htcondor", "scikit-learn", "bentoml"})
    assert extras.for_module("kfp.dsl") == "train"
    assert extras.for_module("htcondor2") == "htcondor"
    assert extras.for_module("joblib") == "train"  # comes with scikit-learn, which train brings before reports
    assert extras.for_module("uvicorn") == "serve"
    assert extras.for_module("numpy") is None  # installed: a module missing inside it is another fault
    assert extras.for_module("no_such_package") is None


def test_serve_without_the_serve_extra_is_one_line_before_anything_starts(tmp_path):
    one_line(without(["bentoml"], ["bentoml"], "serve", "failure", tmp_path=tmp_path), "serve")
    assert not (tmp_path / "home").exists()


def test_demo_names_both_extras_it_needs(tmp_path):
    one_line(without(["torch"], ["torch"], "demo", tmp_path=tmp_path), "train,serve")


def test_the_pipelines_and_the_contracts_need_train(tmp_path):
    one_line(without(["kfp"], ["kfp"], "pipeline", "compile", "--output", tmp_path / "out", tmp_path=tmp_path),
             "train")
    one_line(without(["great-expectations"], ["great_expectations"], "data", "validate", "failure", "--input",
                     NREL_CSV, tmp_path=tmp_path), "train")


def test_a_package_missing_at_import_is_named_by_its_extra_in_text_and_json(tmp_path):
    """predict and classify declare nothing: the import of MLflow fails where the model is loaded, and the command
    contract names the extra that brings it."""
    one_line(without(["mlflow"], ["mlflow"], "predict", "failure", "--input", NREL_CSV, "--output",
                     tmp_path / "p.jsonl", tmp_path=tmp_path), "train")
    script = tmp_path / "job.py"
    script.write_text("import numpy\nprint(numpy.ones(3).sum())\n")
    answer = without(["mlflow"], ["mlflow"], "resource", "classify", script, "--json", tmp_path=tmp_path)
    assert answer.returncode == 1
    assert json.loads(answer.stdout) == {"error": "this command needs jobaware[train]: pip install 'jobaware[train]'",
                                         "exit_code": 1}


def test_the_html_page_of_report_jobs_needs_reports(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    from jobaware.store import open_store

    with open_store(f"sqlite:{store / 'jobs.db'}"):
        pass
    one_line(without(["matplotlib"], ["matplotlib"], "report", "jobs", "--store", f"sqlite:{store / 'jobs.db'}",
                     "--html", tmp_path / "page.html", tmp_path=tmp_path), "reports")
