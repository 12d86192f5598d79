"""A trained version's metrics as a person reads them: the model at its operating point beside its trivial baselines,
and one line wherever the model does not beat one of them (`pipeline run` and `models show` print both).

A capability's metrics document (`metrics/all.json` of a training run) holds `model` and its baselines by name; the
capability's `trivial_baselines` say which of them are trivial (the answers that need no model) and what each answers.
"""

from __future__ import annotations

import math

LOWER_IS_BETTER = {"ece", "brier", "false_alarm_rate", "log_loss", "cost", "worst_cost", "quantile_loss",
                   "median_ratio", "mem_median_ratio", "median_abs_error_s", "mean_abs_log10_error"}
# figures that describe a run or an operating point rather than how good it is (a coverage or an under-estimation
# rate is good when close to its target, not when higher or lower)
UNCOMPARED = {"threshold", "majority_accuracy", "macro_f1_std", "n", "k", "references", "pool_jobs", "index_jobs",
              "train_rows", "test_rows", "fit_rows", "n_eval", "n_repeats", "jobs", "factor", "under_rate",
              "mem_under_rate", "coverage_80", "coverage_95", "bound_tightness"}


def metrics_rows(capability, metrics: dict) -> tuple[list[dict], list[str]]:
    """Rows of the capability's table columns (the model first, then its trivial baselines, then the others) and the
    notes on every trivial baseline the model does not beat."""
    columns = capability.metrics_table or (capability.primary_metric,)
    trivial = capability.trivial_baselines
    named = {name: values for name, values in metrics.items() if isinstance(values, dict)}
    order = ["model", *[n for n in trivial if n in named], *[n for n in named if n != "model" and n not in trivial]]
    rows = [{"model": name, **{m: named[name].get(m, float("nan")) for m in columns}} for name in order if name in named]
    model = named.get("model", {})
    notes = []
    for name, meaning in trivial.items():
        if name not in named:
            continue
        worse = [m for m in columns if m not in UNCOMPARED and _worse(model.get(m), named[name].get(m), m)]
        if worse:
            lost = ", ".join(f"{m} {model[m]:.4f} against {named[name][m]:.4f}" for m in worse)
            notes.append(f"the model does not beat the {name} baseline ({meaning}) on {lost}")
    if named and not any(name in named for name in trivial):
        notes.append(f"no trivial baseline ({' or '.join(trivial)}) was evaluated for this version")
    return rows, notes


def _worse(mine, theirs, metric: str) -> bool:
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in (mine, theirs)):
        return False
    return mine > theirs if metric in LOWER_IS_BETTER else mine < theirs
