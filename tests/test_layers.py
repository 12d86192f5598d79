"""The layers of DESIGN.md hold as import contracts (`[tool.importlinter]` in pyproject.toml, `lint-imports`), and the
contracts do fail: on a copy of the tree where a slice imports another, or a service reaches past a slice's service
module, `lint-imports` names the broken contract and the import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(root)})


def test_the_layers_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the project's code (what the contracts look at) to break on purpose."""
    shutil.copytree(ROOT / "jobaware", tmp_path / "jobaware", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "data"))
    (tmp_path / "tests").mkdir()
    for name in ("__init__.py", "layers.py"):
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _import_into(path: Path, line: str) -> None:
    text = path.read_text()
    head, _, rest = text.partition("from __future__ import annotations\n")
    path.write_text(f"{head}from __future__ import annotations\n{line}\n{rest}" if rest else f"{line}\n{text}")


def test_a_slice_importing_another_breaks_the_contract(tree):
    from jobaware import capabilities

    first, second = capabilities.keys()[:2]
    _import_into(tree / "jobaware" / first / "params.py", f"import jobaware.{second}.params  # noqa")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "the slices are independent of each other BROKEN" in result.stdout
    assert f"jobaware.{first} is not allowed to import jobaware.{second}" in result.stdout


def test_a_service_reaching_past_a_slice_service_module_breaks_the_contract(tree):
    from jobaware import capabilities

    key = capabilities.keys()[0]
    _import_into(tree / "jobaware" / "serving" / "base.py", f"import jobaware.{key}.capability  # noqa")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "the services import only the slices' service modules BROKEN" in result.stdout
    assert f"jobaware.serving.base imports jobaware.{key}.capability" in result.stdout


def test_the_platform_reaching_a_layer_above_breaks_the_contract(tree):
    _import_into(tree / "jobaware" / "store" / "base.py", "import jobaware.serving.base  # noqa")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "the platform imports nothing above it (the CLI alone reaches up) BROKEN" in result.stdout
    assert "jobaware.store.base reaches jobaware.serving" in result.stdout
