"""How fast the CLI answers: `jobaware --help` and `jobaware models --help` against bare Python and against
Python importing the CLI's own libraries (typer, pydantic, rich), each in a fresh process, in one run.

Target: `jobaware --help` under 0.5 s on this machine. Prints medians and the ratio to the libraries' import.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
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


def timed(command: list[str]) -> float:
    """Seconds of one run in a fresh process."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
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
