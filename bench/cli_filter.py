"""What jobaware's cli_filter adds to a real `sbatch`, against sbatch with no CLI filter, in the same run.

Starts the one-node test cluster (harness/slurm_cluster.py's harness), writes a verdict cache of `--verdicts` entries
(`--users` users; the submitting user holds `--shapes` of them, some with advice) and four copies of slurm.conf
in folders of their own: `none` (no CliFilterPlugins), `empty` (CliFilterPlugins=lua with a filter that does
nothing: the price of Slurm's Lua plugin itself), `jobaware` (the rendered cli_filter.lua) and `compiled`
(CliFilterPlugins=jobaware: cli_filter_jobaware.so, built by `jobaware slurm plugins --plugin-dir` into a second
PluginDir). Each round submits one held job of a random shape under each of the four, in random order (SLURM_CONF
picks the copy; slurmctld is the same), and times each sbatch from start to exit. Prints median and p99 of each,
the median and p99 of the paired differences against `none`, and the target (the compiled filter adds <= 2 ms
median). The machine is shared: figures are noisy, the paired differences less so.
    python bench/cli_filter.py [--rounds 300] [--verdicts 50000]
"""

from __future__ import annotations

import argparse
import os
import pwd
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from job_submit import percentile, verdicts  # noqa: E402

from harness.slurm_cluster import SlurmCluster  # noqa: E402
from jobaware.adapters.slurm.plugins import build_cli_filter, render  # noqa: E402
from jobaware.adapters.slurm.verdicts import write_cache  # noqa: E402

EMPTY = """
function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end
function slurm_cli_pre_submit(options, offset) return slurm.SUCCESS end
function slurm_cli_post_submit(offset, job_id, step_id) return slurm.SUCCESS end
return slurm.SUCCESS
"""
TARGET_MS = 2.0
KINDS = ("none", "empty", "jobaware", "compiled")


def configs(cluster: SlurmCluster, cache: Path) -> dict[str, Path]:
    """slurm.conf copies for each kind, each in its own folder (cli_filter.lua is read beside slurm.conf; the
    compiled filter from a PluginDir after the system's)."""
    conf = cluster.conf.read_text()
    plugin = render(cache=str(cache), stale_after=86_400)["cli_filter.lua"]
    system = re.search(r"^PluginDir\s*=\s*(\S+)", cluster.run("scontrol", "show", "config"), re.M).group(1)
    plugin_dir = cluster.root / "plugins"
    plugin_dir.mkdir()
    os.environ["SLURM_CONF"] = str(cluster.conf)  # for `sbatch --version`
    build_cli_filter(plugin_dir, cache=str(cache), stale_after=86_400)
    added = {"none": "", "empty": "CliFilterPlugins=lua\n", "jobaware": "CliFilterPlugins=lua\n",
             "compiled": f"CliFilterPlugins=jobaware\nPluginDir={system}:{plugin_dir}\n"}
    out = {}
    for kind in KINDS:
        folder = cluster.root / "conf" / kind
        folder.mkdir(parents=True)
        (folder / "slurm.conf").write_text(conf + added[kind])
        if kind in ("empty", "jobaware"):
            (folder / "cli_filter.lua").write_text(EMPTY if kind == "empty" else plugin)
        out[kind] = folder / "slurm.conf"
    return out


def submit(cluster: SlurmCluster, conf: Path, args: list[str]) -> tuple[float, str]:
    """One held job through sbatch with `conf`; its wall time in ms and what it said on stderr."""
    start = time.perf_counter()
    done = subprocess.run(["sbatch", "--hold", "--parsable", f"--chdir={cluster.root / 'jobs'}", "--wrap=true", *args],
                          env={**cluster.env, "SLURM_CONF": str(conf)}, capture_output=True, text=True, timeout=120)
    wall = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"sbatch with {conf}: {done.stderr.strip()}")
    return wall, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=300, help="submissions under each of the three")
    parser.add_argument("--verdicts", type=int, default=50_000)
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--shapes", type=int, default=40, help="cached shapes of the submitting user")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if shutil.which("sbatch") is None:
        sys.exit("sbatch is not installed here (apt-get install slurm-wlm)")
    me = pwd.getpwuid(os.getuid()).pw_name
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-cli-filter-") as tmp:
        root = Path(tmp)
        cache = root / "spool" / "verdicts.tsv"
        write_cache(cache, verdicts(args.verdicts, args.users, args.shapes, me, args.seed), stale_after=86_400,
                    default_partition="debug")
        size = cache.stat().st_size
        cluster = SlurmCluster(root).start()
        walls: dict[str, list[float]] = {k: [] for k in KINDS}
        advised = {"jobaware": 0, "compiled": 0}
        load = os.getloadavg()[0]
        try:
            confs = configs(cluster, cache)
            for kind in KINDS:  # warm the page cache and the binaries once each, untimed
                submit(cluster, confs[kind], ["--time=1"])
            for round_ in range(args.rounds):
                shape = [f"--time={rng.choice([1, 3, 10, 30, 45, 60])}", f"-n{rng.choice([1, 2])}",
                         f"--mem={rng.choice([100, 500, 900])}"]
                for kind in rng.sample(KINDS, len(KINDS)):
                    wall, said = submit(cluster, confs[kind], shape)
                    walls[kind].append(wall)
                    if kind in advised:
                        advised[kind] += said.startswith("jobaware: ")
                if (round_ + 1) % 50 == 0:
                    print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr)
        finally:
            cluster.stop()
    print(f"cache: {args.verdicts:,} verdicts ({size / 1e6:.1f} MB), {args.shapes} of them for {me}; "
          f"advice printed by {advised['jobaware']} of {args.rounds} cli_filter.lua and {advised['compiled']} of "
          f"{args.rounds} compiled sbatch calls; "
          f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"{'sbatch with':<16}{'calls':>7}{'median ms':>11}{'p99 ms':>9}{'added median ms':>17}{'added p99 ms':>14}"
          f"{'ratio':>7}")
    none = walls["none"]
    for kind in KINDS:
        w = walls[kind]
        added = [a - b for a, b in zip(w, none)]
        print(f"{kind:<16}{len(w):>7}{statistics.median(w):>11.1f}{percentile(w, 0.99):>9.1f}"
              f"{statistics.median(added):>17.2f}{percentile(added, 0.99):>14.2f}"
              f"{statistics.median(w) / statistics.median(none):>7.3f}")
    added = statistics.median(a - b for a, b in zip(walls["compiled"], none))
    print(f"target: the compiled cli_filter adds <= {TARGET_MS} ms median to sbatch: "
          f"{'met' if added <= TARGET_MS else 'NOT met'} ({added:+.2f} ms against no filter, "
          f"{statistics.median(a - b for a, b in zip(walls['compiled'], walls['jobaware'])):+.2f} ms against "
          "cli_filter.lua)")


if __name__ == "__main__":
    main()
