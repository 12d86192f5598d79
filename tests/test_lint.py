"""The committed ruff configuration (pyproject.toml) holds for the whole tree."""

import subprocess
import sys

from tests.conftest import ROOT


def test_ruff_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
