"""`hold`'s own KFP steps: the hyperparameter sweep (open it, run one trial, choose the best)."""

from __future__ import annotations

import json

from jobaware import tracking
from jobaware.hold import sweep
from jobaware.hold.train import best_trial, run_trial


def sweep_step(params: str, space: str = "") -> list[str]:
    """Open the sweep's MLflow run; the trials as JSON, each naming its number and the sweep's run."""
    loaded = sweep.load_space(space or None)
    trials = sweep.pinned_trials(params, loaded)
    sweep_run = tracking.open_sweep("hold", loaded.model_dump(), trials)
    return [json.dumps({"sweep_run": sweep_run, "number": n, "params": p}) for n, p in enumerate(trials)]


def trial_step(dataset: str, trial: str, truth: str = "") -> str:
    """Run one sweep trial, logged as a run nested under the sweep's; its parameters and metrics as JSON."""
    t = json.loads(trial)
    results = run_trial(dataset, t["params"], truth or None)
    t["run_id"] = tracking.log_trial("hold", t["sweep_run"], t["number"], t["params"], results)
    print(json.dumps({k: round(v, 4) for k, v in results.items()}))
    return json.dumps({**t, "results": results})


def best_step(outcomes: list[str]) -> str:
    """The parameters (JSON) of the trial with the best validation metric; the ranking is printed and the
    choice recorded on the sweep's run."""
    trials = sorted((json.loads(o) for o in outcomes), key=lambda t: t["number"])
    chosen = trials[best_trial([t["results"] for t in trials])]
    for t in trials:
        mark = "*" if t is chosen else " "
        print(f"{mark} trial {t['number']}: validation -log-loss "
              f"{t['results']['validation_primary']:.4f}  {json.dumps(t['params'], sort_keys=True)}")
    tracking.close_sweep(chosen["sweep_run"], chosen["number"], chosen["params"], chosen["results"]["validation_primary"])
    return json.dumps(chosen["params"])
