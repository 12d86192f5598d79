"""How fast the CLI answers: `jobaware --help` and `jobaware models --help` against bare Python and against
Python importing the CLI's own libraries (typer, pydantic, rich), each in a fresh process, in one run.

Target: `jobaware --help` under 0.5 s on this machine. Prints medians and the ratio to the libraries' import.

With `--against REF`: what a change costs the start, `jobaware models --help` (the root callback runs: the site settings read and trust-checked) of REF's tree (its files by `git archive`) and
of this one, each started the same way (`python -c` calling `jobaware.cli:main`, the tree first on PYTHONPATH), in
turns, in the same run: medians and their ratio.

    python bench/cli_start.py [--repeats 15] [--against REF]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 0.5
JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
COMMANDS = {
    "python -c pass (reference)": [sys.executable, "-c", "pass"],
    "python -c 'import typer, pydantic, rich' (reference)": [sys.executable, "-c", "import typer, pydantic, rich.console"],
    "jobaware --help": [JOBAWARE, "--help"],
    "jobaware models --help": [JOBAWARE, "models", "--help"],
}


ROOT = Path(__file__).resolve().parents[1]
LAUNCH = [sys.executable, "-c", "import sys; sys.argv[0] = 'jobaware'; from jobaware.cli import main; main()", "--help"]


def timed(command: list[str], env: dict | None = None) -> float:
    """Seconds of one run in a fresh process."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def against(ref: str, repeats: int) -> None:
    """`jobaware models --help` of REF's tree and of this one, in turns; their medians and ratio."""
    with tempfile.TemporaryDirectory(prefix="jobaware-reference-") as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref], capture_output=True,
                                 check=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        trees = {ref: folder, "this tree": str(ROOT)}
        envs = {name: {**os.environ, "PYTHONPATH": tree} for name, tree in trees.items()}
        for env in envs.values():
            timed(LAUNCH, env)  # warm the file cache
        runs: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(repeats):
            for name, env in envs.items():
                runs[name].append(timed(LAUNCH, env))
    medians = {name: statistics.median(found) for name, found in runs.items()}
    for name, median in medians.items():
        print(f"jobaware models --help, {name:<20} median {median * 1000:7.1f} ms")
    print(f"this tree / {ref}: {medians['this tree'] / medians[ref]:.3f}x ({repeats} runs each, in turns)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--against", default="", help="a git ref: its `jobaware models --help` measured beside this tree's")
    args = parser.parse_args()
    if args.against:
        against(args.against, args.repeats)
        return
    medians = {}
    for name, command in COMMANDS.items():
        timed(command)  # warm the file cache
        runs = [timed(command) for _ in range(args.repeats)]
        medians[name] = statistics.median(runs)
        print(f"{name:<58} median {medians[name] * 1000:7.1f} ms  (max {max(runs) * 1000:7.1f} ms)")
    base = medians["python -c 'import typer, pydantic, rich' (reference)"]
    help_time = medians["jobaware --help"]
    verdict = "met" if help_time < TARGET_SECONDS else f"missed by {help_time / TARGET_SECONDS:.2f}x"
    print(f"jobaware --help: {help_time * 1000:.0f} ms = {help_time / base:.2f}x the libraries' import alone; "
          f"target < {TARGET_SECONDS * 1000:.0f} ms: {verdict}")


if __name__ == "__main__":
    main()
