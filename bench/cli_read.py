"""How fast the commands that only read answer: `jobaware models list`, `capabilities`, `runs list` (and `models
show`) against `jobaware --help` in the same run, each in a fresh process, on a store that `make run` filled; and,
as the peer, the same reading through MLflow's client (`jobaware.tracking`, what these commands did before
`jobaware.registry_read`). Prints medians of wall and CPU time and the ratios.

Target (issue 36): each read-only command under 2 s on this 2-core machine when idle. The machine is often shared:
the CPU time (user + system of the process) is the figure that load does not inflate.

    .venv/bin/python bench/cli_read.py --home .jobaware          # after `make run`
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_SECONDS = 2.0
JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
THROUGH_MLFLOW = ("from jobaware import capabilities, tracking; tracking.list_models(); "
                  "[tracking.champion_version(k) for k in capabilities.keys()]; tracking.list_runs(capabilities.keys())")


def commands(version: str | None) -> dict[str, list[str]]:
    found = {
        "jobaware --help (reference)": [JOBAWARE, "--help"],
        "jobaware models list": [JOBAWARE, "models", "list"],
        "jobaware capabilities": [JOBAWARE, "capabilities"],
        "jobaware runs list": [JOBAWARE, "runs", "list"],
        "the same reading through MLflow's client (peer)": [sys.executable, "-c", THROUGH_MLFLOW],
    }
    if version:
        found["jobaware models show failure " + version] = [JOBAWARE, "models", "show", "failure", version]
    return found


def timed(command: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of one run in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=os.environ.get("JOBAWARE_HOME", ".jobaware"),
                        help="the JOBAWARE_HOME whose store is read (default .jobaware)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    home = Path(args.home).resolve()
    if not (home / "mlflow.db").is_file():
        sys.exit(f"no store at {home / 'mlflow.db'}: run `make run` (or a pipeline) first, or give --home")
    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    listed = subprocess.run([JOBAWARE, "models", "list", "--json"], capture_output=True, text=True, env=env)
    version = next((row["version"] for row in __import__("json").loads(listed.stdout or "[]")
                    if row["model"] == "jobaware-failure"), None)
    print(f"store {home / 'mlflow.db'}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    medians = {}
    for name, command in commands(version).items():
        timed(command, env)  # warm the file cache
        runs = [timed(command, env) for _ in range(args.repeats)]
        medians[name] = (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
    help_wall, help_cpu = medians["jobaware --help (reference)"]
    for name, (wall, cpu) in medians.items():
        print(f"{name:<52} wall {wall:6.2f} s ({wall / help_wall:4.1f}x --help)  CPU {cpu:6.2f} s "
              f"({cpu / help_cpu:4.1f}x --help)")
    slowest = max(cpu for name, (_, cpu) in medians.items() if name.startswith("jobaware ") and "--help" not in name)
    verdict = "met" if slowest < TARGET_SECONDS else f"missed ({slowest:.2f} s)"
    print(f"target: every read-only command under {TARGET_SECONDS:.0f} s of CPU (idle: its wall time): {verdict}")


if __name__ == "__main__":
    main()
