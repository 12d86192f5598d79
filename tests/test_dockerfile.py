import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_runs_as_non_root_with_cpu_torch():
    text = (ROOT / "Dockerfile").read_text()
    assert "USER 10001:10001" in text and "download.pytorch.org/whl/cpu torch==2.13.0" in text
    assert text.count("FROM ") == 2
