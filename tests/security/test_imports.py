"""Root's `jobaware serve` in a user's folder imports nothing the user planted there: BentoML puts its working folder
first on sys.path, which `jobaware serve` makes the trusted home, never the current folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.ports import free_port, stop, wait_for

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def test_serve_in_a_user_s_folder_imports_no_planted_package(local_user, tmp_path):
    folder = local_user.home / "planted-packages"
    marker = local_user.home / "imported-as-root"
    plant = "\n".join(f"mkdir -p {folder}/{package} && printf '%s' \"open('{marker}', 'w').write('{package}')\" "
                      f"> {folder}/{package}/__init__.py" for package in ("jobaware", "serving", "bentoml_config"))
    local_user.run("sh", "-c", plant)
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    process = subprocess.Popen([JOBAWARE, "serve", "failure", "--port", str(port)], cwd=folder, stdout=log,
                               stderr=log, start_new_session=True,
                               env={"PATH": "/usr/bin:/bin", "HOME": "/root", "JOBAWARE_HOME": str(tmp_path / "home"),
                                    "JOBAWARE_CONFIG": "/nonexistent"})
    try:
        wait_for(f"http://127.0.0.1:{port}/livez", 180, process)  # it serves (503 until a champion exists)
    finally:
        stop(process, 20)
    assert not marker.exists(), marker.read_text()


def test_every_module_run_by_jobaware_leaves_the_current_folder_off_sys_path():
    """`python -m` puts the current folder first on sys.path; jobaware's own `sys.executable -m jobaware...` children
    (the service guard, the pipeline runner, the mail delivery) pass `-P` (Python 3.11), so a root command started in
    a user's folder never imports what the user planted there."""
    import ast

    root = Path(__file__).resolve().parents[2] / "jobaware"
    unsafe = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.List) and len(node.elts) >= 3 and ast.unparse(node.elts[0]) == "sys.executable":
                words = [e.value for e in node.elts[1:3] if isinstance(e, ast.Constant)]
                if "-m" in words and words[0] != "-P" and "jobaware" in ast.unparse(node):
                    unsafe.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert not unsafe, unsafe
