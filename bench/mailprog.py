"""How fast Slurm's MailProg (`jobaware-mail`) spools a mail and returns, run as slurmctld runs it (argv and the
job's SLURM_* variables as Slurm 22.05 gave them, recorded in tests/data/mailprog_env_22.05.json; no PATH), each in
a fresh process: this tree against bare Python and, with --before TREE, against another checkout (main) in the same
run. The bench holds the spool's worker lock, as a running delivery does, so that no run starts a delivery.

    .venv/bin/python bench/mailprog.py --before /work/main --repeats 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobaware.usage.spool import WORKER, Spool  # noqa: E402

RECORDED = json.loads((ROOT / "tests" / "data" / "mailprog_env_22.05.json").read_text())["1"]


def timed(command: list[str], env: dict) -> float:
    """Seconds of one run in a fresh process; it must succeed."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd="/")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--before", type=Path, help="another checkout whose MailProg to time in the same run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        env_file = Path(scratch) / "jobaware.env"
        env_file.write_text(f"JOBAWARE_HOME={scratch}/home\nJOBAWARE_SMTP=127.0.0.1:9\n"
                            "JOBAWARE_MAIL_DOMAIN=cluster.example\n")
        spool = Spool(Path(scratch) / "home" / "mail")
        trees = {"this tree": ROOT, **({"--before tree": args.before.resolve()} if args.before else {})}
        commands = {"python -c pass (reference)": ([sys.executable, "-c", "pass"], {})}
        for name, tree in trees.items():
            commands[f"jobaware-mail, {name}"] = ([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", *RECORDED["argv"]],
                                                 {**RECORDED["environment"], "PYTHONPATH": str(tree),
                                                  "JOBAWARE_CONFIG": str(env_file)})
        runs: dict[str, list[float]] = {name: [] for name in commands}
        with spool.locked(WORKER) as held:
            assert held
            for repeat in range(args.repeats + 1):  # the commands in turn, so that a busy moment hits each alike
                for name, (command, env) in commands.items():
                    seconds = timed(command, env or dict(os.environ))
                    if repeat:  # the first round warms the file cache
                        runs[name].append(seconds)
        medians = {name: statistics.median(times) for name, times in runs.items()}
        for name, times in runs.items():
            print(f"{name:<40} median {medians[name] * 1000:7.1f} ms  (max {max(times) * 1000:7.1f} ms)")
        spooled = len(list(spool.queue.glob("*.json")))
    base = medians["python -c pass (reference)"]
    now = medians["jobaware-mail, this tree"]
    line = f"jobaware-mail: {now * 1000:.0f} ms = {now / base:.2f}x bare Python"
    if args.before:
        before = medians["jobaware-mail, --before tree"]
        line += f"; --before tree {before * 1000:.0f} ms (this tree / before = {now / before:.2f})"
    print(f"{line}; {spooled} mails spooled, no delivery started")


if __name__ == "__main__":
    main()
