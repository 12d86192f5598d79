"""The README's sizing results: each trace trained and judged as `jobaware pipeline run sizing --input TRACE` does
(the same `train_in_memory`), one Markdown row per trace and resource, with the baselines at their rates
(under-estimation / median recommended/asked / released share, and the factor fitted on the training part).

    python bench/sizing.py [SOURCE ...]     # default: every SWF trace under jobaware/data/real/, the NREL Eagle sample,
                                            # then the HTCondor event logs: all bundled ones together, and the
                                            # IceCube log alone

A SOURCE is a trace, an Eagle job table, an event log or a folder of them (read together, as the pipeline reads it).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import pandas as pd

from jobaware.errors import JobawareError
from jobaware.sizing.reader import read_source, source_paths
from jobaware.sizing.train import train_in_memory
from jobaware.swf import cluster_name

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ("request", "tsafrir", "user_p95")


CONDOR = (ROOT / "jobaware" / "data" / "real" / "condor", ROOT / "jobaware" / "data" / "real" / "condor-more")
HTCONDOR_SOURCES = {"HTCondor logs, all bundled (601 jobs)": CONDOR,
                    "HTCondor, the IceCube log (378 jobs)": (ROOT / "jobaware" / "data" / "real" / "condor-more" / "CosmicRay__job.log",)}


def factor(value: float) -> str:
    """A baseline's factor; "none" where no factor meets the coverage on the training jobs."""
    return f"x{value:.2f}" if math.isfinite(value) else "none"


def rows(name: str, paths: tuple[Path, ...]) -> list[str]:
    started = time.process_time()
    jobs = pd.concat([read_source(p)[0] for p in source_paths([str(p) for p in paths])], ignore_index=True)
    try:
        _, evaluation = train_in_memory(jobs)
    except JobawareError as error:
        return [f"| {name} | - | {len(jobs):,} jobs: {error} |"]
    seconds = time.process_time() - started
    out = []
    for prefix, resource in (("", "time"), ("mem_", "memory")):
        model = evaluation.metrics["model"]
        if prefix + "under_rate" not in model:
            continue
        m = {key[len(prefix):]: value for key, value in model.items() if key.startswith(prefix)} if prefix else model
        cells = [name, resource, f"{m['jobs']:,.0f}", f"{m['no_history_share']:.3f}",
                 f"**{m['under_rate']:.3f}** ({m['under_rate_raw']:.3f})", f"**{m['median_ratio']:.2f}**",
                 f"{m['below_share']:.2f} / {m['median_ratio_below']:.2f}", f"{m['released_share']:+.3f}",
                 f"{m['lost_share']:.3f}" if not prefix else "",
                 f"{m['fit_stated_below']:.3f} / {m['fit_met_below']:.3f}" if "fit_met_below" in m else "",
                 f"{m['accuracy']:.2f}",
                 f"{m['released_proc_hours']:,.0f}" if not prefix else ""]
        for baseline in BASELINES:
            figures = evaluation.metrics[baseline]
            cells.append(f"{figures[prefix + 'under_rate']:.3f} / {figures[prefix + 'median_ratio']:.2f} / "
                         f"{figures[prefix + 'released_share']:+.3f} ({factor(figures[prefix + 'factor'])})")
        cells.append(f"{seconds:.0f}")
        out.append("| " + " | ".join(cells) + " |")
    return out


def main(paths: list[str]) -> None:
    sources = ({cluster_name(p): (Path(p),) for p in paths} if paths else
               {**{cluster_name(p): (p,) for p in sorted((ROOT / "jobaware" / "data" / "real").glob("swf*/*.swf*"))},
                "NREL Eagle sample (700 jobs)": (ROOT / "jobaware" / "data" / "real" / "nrel" / "eagle_sample_jobs.csv",),
                **HTCONDOR_SOURCES})
    print("| trace | resource | test jobs | no history | under-estimation (raw) | median rec/asked | recommended less: "
          "share / median | released (net share) | lost | fit stated / met, jobs recommended less | accuracy | released "
          "proc-hours | request x f | Tsafrir x f | user P95 x f | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, source in sources.items():
        for row in rows(name, source):
            print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
