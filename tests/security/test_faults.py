"""Whole under faults: a full standard output, a full disk, a kill, two writers at once. Each case ends with one line
and exit 1, and leaves nothing half-written behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def jobaware(*args, env=None, stdout=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([JOBAWARE, *map(str, args)], stdout=stdout if stdout is not None else subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ---------------------------------------------------------------- a full standard output
@pytest.fixture(scope="module")
def empty_registry(tmp_path_factory) -> Path:
    """A JOBAWARE_HOME whose MLflow store exists and holds no model."""
    home = tmp_path_factory.mktemp("home")
    subprocess.run([sys.executable, "-c", "from jobaware import tracking; tracking.experiment_id('failure')"],
                   check=True, env={**os.environ, "JOBAWARE_HOME": str(home)}, timeout=300)
    return home


@pytest.mark.parametrize("args", [("capabilities", "--json"), ("capabilities",), ("models", "list", "--json"),
                                  ("models", "list", "--json", "--no-such-option"), ("models", "show", "failure", "9",
                                                                                     "--json")])
def test_a_full_stdout_ends_with_exit_1_and_one_line_on_stderr(args, empty_registry, monkeypatch):
    """`> /dev/full`: the answer (or, with --json, the JSON error) cannot be written. Before, the JSON error failed on
    the same stdout inside the error handler: a traceback, and at exit another one."""
    monkeypatch.setenv("JOBAWARE_HOME", str(empty_registry))
    with open("/dev/full", "w") as full:
        result = jobaware(*args, stdout=full)
    assert result.returncode == (2 if "--no-such-option" in args else 1), result.stderr
    assert "standard output: No space left on device" in one_error_line(result)
    assert "Traceback" not in result.stderr

