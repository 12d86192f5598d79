"""The package as a site gets it: the wheel built from the checkout, installed into a fresh venv outside it with the
pins of constraints.txt (tests/test_install.py runs it there, bench/install.py measures it). Packages come from the
machine's pip configuration (its cache, local indexes and find-links), as `make venv` got them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"


def build(out: Path) -> tuple[Path, Path]:
    """The wheel and the sdist `python -m build` makes of the checkout, into `out` (the wheel built from the sdist)."""
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True, capture_output=True,
                   text=True, timeout=900)
    (wheel,), (sdist,) = out.glob("jobaware-*.whl"), out.glob("jobaware-*.tar.gz")
    return wheel, sdist


@dataclass
class Venv:
    folder: Path
    seconds: float  # the venv made and the package installed
    log: str

    @property
    def bin(self) -> Path:
        return self.folder / "bin"

    def size(self) -> int:
        """Bytes on disk (du), the venv's pip and its caches included."""
        return int(subprocess.run(["du", "-sb", str(self.folder)], capture_output=True, text=True,
                                  check=True).stdout.split()[0])

    def site_packages(self) -> Path:
        (found,) = self.folder.glob("lib/python3.*/site-packages")
        return found


def install(wheel: Path, folder: Path, extras: str = "", python: str = "python3.11", timeout: float = 1800) -> Venv:
    """A fresh venv in `folder` with `wheel` (and its `extras`, "train,serve") installed, pinned by constraints.txt.
    Run with the checkout's folder never on sys.path: from `folder`, with no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    started = time.monotonic()
    python = shutil.which(python) or python
    subprocess.run([python, "-m", "venv", str(folder)], check=True, cwd=folder.parent, env=env, timeout=300)
    requirement = f"{wheel}[{extras}]" if extras else str(wheel)
    done = subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "-c", str(CONSTRAINTS), requirement], capture_output=True, text=True, cwd=folder.parent,
                          env=env, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"pip install {requirement} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return Venv(folder, time.monotonic() - started, done.stdout + done.stderr)


def add(venv: Venv, wheel: Path, extras: str, timeout: float = 1800) -> float:
    """Install `wheel`'s `extras` into an existing venv (what it holds already is kept), pinned by constraints.txt;
    the seconds it took."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    started = time.monotonic()
    done = subprocess.run([str(venv.bin / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "-c", str(CONSTRAINTS), f"{wheel}[{extras}]"], capture_output=True, text=True,
                          cwd=venv.folder.parent, env=env, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"pip install {wheel}[{extras}] failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - started
