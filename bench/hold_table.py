"""The README's table of the hold decision-makers on real holds, from a training run's metrics.

    jobaware pipeline run hold
    .venv/bin/python bench/hold_table.py [METRICS_DIR]

METRICS_DIR holds the run's `all.json` and `selection.json` (jobaware.hold.train); by default the newest run's
under $JOBAWARE_HOME/artifacts/jobaware-hold. One row per decision-maker: holds right per workflow (out of fold,
each workflow held out whole), the worst workflow among those with `min_workflow_holds` holds, right by
workflow with its 95 % bootstrap interval, right by hold, the cost per hold by workflow (a wrong removal weighing
`wrong_remove_cost` wrong releases) with its interval, the worst workflow's cost, whether it is admissible
(jobaware.hold.deciders), and the ROC-AUC of its P(release) by workflow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from jobaware import config


def newest() -> Path:
    runs = sorted((Path(config.home()) / "artifacts" / "jobaware-hold").glob("*/artifacts/metrics/selection.json"),
                  key=lambda p: p.stat().st_mtime)
    if not runs:
        raise SystemExit("no hold training run under $JOBAWARE_HOME: run `jobaware pipeline run hold` first")
    return runs[-1].parent


def short(workflow: str) -> str:
    return workflow.split("/")[-1].replace("_LED_Analysis", "").replace("-projcect-aws-main", "")


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else newest()
    metrics = json.loads((folder / "all.json").read_text())
    selection = json.loads((folder / "selection.json").read_text())
    flows = sorted(selection["by_workflow"], key=lambda r: (-r["holds"], r["workflow"]))
    head = ["decision-maker", *(f"{short(r['workflow'])} ({r['release']}/{r['holds']})" for r in flows),
            f"worst ({selection['min_workflow_holds']}+)", "right by workflow [95 %]", "right by hold",
            "cost by workflow [95 %]", "worst cost", "admissible", "ROC-AUC"]
    print(f"served: {selection['served']}; best plain policy: {selection['best_plain']}; "
          f"{selection['holds']} holds in {selection['workflows']} workflows, {selection['folds']} folds; "
          f"wrong_remove_cost {selection['wrong_remove_cost']:g}; choice per fold: {selection['chosen_per_fold']}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, m in metrics.items():
        label = "served (its choice cross-validated)" if name == "model" else name
        cells = [f"{r[name]}/{r['holds']}" for r in flows] if all(name in r for r in flows) else ["-"] * len(flows)
        cells += [f"{m['worst_accuracy']:.2f}", f"{m['grouped_accuracy']:.2f} [{m['low']:.2f}, {m['high']:.2f}]",
                  f"{int(m['right'])}/{int(m['holds'])} ({m['accuracy']:.2f})",
                  f"{m['cost']:.2f} [{m['cost_low']:.2f}, {m['cost_high']:.2f}]", f"{m['worst_cost']:.2f}",
                  "yes" if m["admissible"] else "no", f"{m['roc_auc']:.2f}" if "roc_auc" in m else ""]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for key in ("margin", "learned_margin", "cost_margin"):
        if key in metrics["model"]:
            m = metrics["model"]
            print(f"\n{key}: {m[key]:.2f} [{m[key + '_low']:.2f}, {m[key + '_high']:.2f}]", end="")
    print()


if __name__ == "__main__":
    main()
