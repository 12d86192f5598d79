"""The light install against the full one: the wheel built from the checkout, installed into fresh venvs outside it
with constraints.txt's pins, once as the daemons' base install (`pip install jobaware`) and once as `make venv`'s
(`jobaware[all]`); the seconds each took (venv made and packages installed, from this machine's pip cache and
indexes) and its size on disk (du of the venv), with the ratios full / light.

    python bench/install.py [--python python3.11] [--extras all] [--keep DIR]

Run it twice for the cached figure: the first run may download what the pip cache lacks.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.wheel import build, install  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="python3.11", help="the Python the venvs are made with")
    parser.add_argument("--extras", default="all", help="the full install's extras")
    parser.add_argument("--keep", type=Path, help="make the venvs under this folder and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jobaware-install-") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        wheel, _ = build(Path(tmp) / "dist")
        rows = []
        for name, extras in (("light", ""), (f"[{args.extras}]", args.extras)):
            venv = install(wheel, where / f"venv-{extras or 'light'}", extras, python=args.python)
            rows.append((name, venv.seconds, venv.size()))
            print(f"{name:<8} {venv.seconds:7.1f} s  {venv.size() / 2**20:8.0f} MiB  ({venv.folder})", flush=True)
        (_, light_s, light_b), (full, full_s, full_b) = rows
        print(f"{full} / light: time x{full_s / light_s:.1f}, size x{full_b / light_b:.1f}")


if __name__ == "__main__":
    main()
