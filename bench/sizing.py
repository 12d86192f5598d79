"""The README's sizing results: each trace trained and judged as `jobaware pipeline run sizing --data TRACE` does
(the same `train_in_memory`), one Markdown row per trace and resource, with the baselines at their rates
(under-estimation / median recommended/asked / released share, and the factor fitted on the training part).

    python bench/sizing.py [TRACE ...]      # default: every SWF trace under data/real/
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from jobaware.errors import JobawareError
from jobaware.sizing.reader import read_trace
from jobaware.sizing.train import train_in_memory
from jobaware.swf import cluster_name

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ("request", "tsafrir", "user_p95")


def rows(path: Path) -> list[str]:
    started = time.process_time()
    jobs, _, _ = read_trace(path)
    try:
        _, evaluation = train_in_memory(jobs)
    except JobawareError as error:
        return [f"| {cluster_name(path)} | time | {len(jobs):,} jobs: {error} |"]
    seconds = time.process_time() - started
    out = []
    for prefix, name in (("", "time"), ("mem_", "memory")):
        model = evaluation.metrics["model"]
        if prefix + "under_rate" not in model:
            continue
        m = {key[len(prefix):]: value for key, value in model.items() if key.startswith(prefix)} if prefix else model
        cells = [cluster_name(path), name, f"{m['jobs']:,.0f}", f"{m['no_history_share']:.3f}",
                 f"**{m['under_rate']:.3f}** ({m['under_rate_raw']:.3f})", f"**{m['median_ratio']:.2f}**",
                 f"{m['below_share']:.2f} / {m['median_ratio_below']:.2f}", f"{m['released_share']:+.3f}",
                 f"{m['lost_share']:.3f}" if not prefix else "",
                 f"{m['fit_stated_below']:.3f} / {m['fit_met_below']:.3f}" if "fit_met_below" in m else "",
                 f"{m['accuracy']:.2f}",
                 f"{m['released_proc_hours']:,.0f}" if not prefix else ""]
        for baseline in BASELINES:
            figures = evaluation.metrics[baseline]
            cells.append(f"{figures[prefix + 'under_rate']:.3f} / {figures[prefix + 'median_ratio']:.2f} / "
                         f"{figures[prefix + 'released_share']:+.3f} (x{figures[prefix + 'factor']:.2f})")
        cells.append(f"{seconds:.0f}")
        out.append("| " + " | ".join(cells) + " |")
    return out


def main(paths: list[str]) -> None:
    traces = [Path(p) for p in paths] or sorted((ROOT / "data" / "real").glob("swf*/*.swf*"))
    print("| trace | resource | test jobs | no history | under-estimation (raw) | median rec/asked | recommended less: "
          "share / median | released (net share) | lost | fit stated / met, jobs recommended less | accuracy | released "
          "proc-hours | request x f | Tsafrir x f | user P95 x f | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in traces:
        for row in rows(path):
            print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
