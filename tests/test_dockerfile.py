import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_runs_as_non_root_with_cpu_torch_on_a_chosen_base():
    text = (ROOT / "Dockerfile").read_text()
    assert "USER 10001:10001" in text and "torch==2.13.0+cpu" in text and "download.pytorch.org/whl/cpu" in text
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in text and text.count("FROM ${BASE_IMAGE}") == 2
    final = text.split("FROM ${BASE_IMAGE}\n")[1]  # the final stage: the build's venv, no compiler, no pip
    assert "COPY --from=build /opt/venv /opt/venv" in final and "pip install" not in final
    assert "HEALTHCHECK" in final and "NUMBA_CACHE_DIR=/tmp/" in final  # numba's cache off a read-only root
