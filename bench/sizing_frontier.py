"""Sizing's feasibility study: how small can run-time recommendations be at a stated under-estimation rate, for
the model as trained and for an oracle-style bound, on each trace.

Per trace (split, features and trees as `train_in_memory` makes them):
- the model: each test day calibrated on the 5,000 jobs that ended last before it (what `jobaware pipeline run
  sizing` reports), at the rates 0.02, 0.05, 0.10 and 0.20, for each objective;
- the oracle: the same allocation with a classifier of more capacity (learning rate 0.05, up to 500 iterations of
  31 leaves, early stopping), fitted on every training job, whose knob (and the median objective's m) is set on the
  test jobs' own outcomes: what a model that ranks jobs this well could reach at best, with the rate met exactly;
- perfect information: each job recommended exactly what it used (rate 0), whose median ratio no model beats;
- how well each classifier ranks: ROC AUC of its probability of fitting 0.5 and 0.9 of the request.

    python bench/sizing_frontier.py [TRACE ...]     # default: the five traces the issue's targets name
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from jobaware.sizing.evaluate import rolling_bounds, scores
from jobaware.sizing.features import build_features, seconds
from jobaware.sizing.model import LEVELS, TIME, SizingModel, counted_use
from jobaware.sizing.params import check_params
from jobaware.sizing.reader import read_trace
from jobaware.sizing.train import _fit_part, prepare, time_split
from jobaware.swf import cluster_name

ROOT = Path(__file__).resolve().parents[1]
TRACES = ("swf/KTH-SP2-1996-2.1-cln.swf", "swf/CTC-SP2-1996-3.1-cln.swf", "swf-wait/SDSC-SP2-1998-4.2-cln.swf.gz",
          "swf-wait/SDSC-BLUE-2000-4.2-cln.swf.gz", "swf-wait/HPC2N-2002-2.2-cln.swf.gz")
RATES = (0.02, 0.05, 0.10, 0.20)
OBJECTIVES = ("median", "jobs", "proc_hours")
ORACLE_TREES = {"learning_rate": 0.05, "max_iter": 500, "max_leaf_nodes": 31}


class Trace:
    """One trace split and featurized as training does, the model's trees and the oracle's fitted."""

    def __init__(self, path: Path):
        started = time.process_time()
        self.name = cluster_name(path)
        self.p = check_params({})
        jobs = prepare(read_trace(path)[0])
        self.features, _ = build_features(jobs)
        self.submit, self.end = seconds(jobs["submit_time"]), seconds(jobs["end_time"])
        split = time_split(self.submit, self.end, self.p["test_fraction"])
        procs = jobs["procs"].to_numpy(float, na_value=np.nan)
        self.procs = np.where(np.isfinite(procs) & (procs > 0), procs, 1.0)
        self.used = jobs[TIME.used].to_numpy(float, na_value=np.nan)
        self.asked = jobs[TIME.asked].to_numpy(float, na_value=np.nan)
        learnable = np.isfinite(self.used) & (self.used >= 0) & np.isfinite(self.asked) & (self.asked > 0)
        train = np.flatnonzero(split.train & learnable)
        fitted, pool = _fit_part(train, self.p)
        self.model = SizingModel(TIME, 0.95, self.p).fit(self.features.iloc[fitted], self.used[fitted],
                                                         self.asked[fitted], self.procs[fitted])
        self.model_cpu = time.process_time() - started
        self.pool = np.zeros(len(jobs), bool)
        self.pool[pool] = True
        self.pool |= split.test
        tested = np.flatnonzero(split.test & learnable)
        self.test = tested[self.model.has_history(self.features.iloc[tested])]
        started = time.process_time()
        self.oracle = SizingModel(TIME, 0.95, {**self.p, **ORACLE_TREES}).fit(
            self.features.iloc[train], self.used[train], self.asked[train], self.procs[train])
        self.oracle_cpu = time.process_time() - started

    def figures(self, model: SizingModel, bounds: np.ndarray) -> dict[str, float]:
        t = self.test
        return scores(self.used[t], bounds[t], self.asked[t], self.procs[t], model.coverage, TIME)

    def realised(self, rate: float, objective: str) -> dict[str, float]:
        model = settings(self.model, rate, objective)
        bounds, _, _ = rolling_bounds(model, self.features, self.used, self.asked, self.procs, self.submit,
                                      self.end, self.pool, self.test, self.p["calibration_jobs"])
        return self.figures(model, bounds)

    def best(self, rate: float, objective: str) -> dict[str, float]:
        """The oracle's figures: its allocation calibrated on the test jobs' own outcomes."""
        model, t = settings(self.oracle, rate, objective), self.test
        sized = model.jobs(self.features.iloc[t], self.asked[t], self.procs[t], self.used[t])
        calibration = model.choose(model.scores(sized), slice(None))
        bounds = np.full(len(self.used), np.nan)
        bounds[t], _ = model.recommend(sized, np.ones(len(t), bool), calibration)
        return self.figures(model, bounds)

    def perfect_median(self) -> float:
        t = self.test
        return float(np.median(counted_use(TIME, self.used[t], self.asked[t]) / self.asked[t]))

    def ranking(self, model: SizingModel) -> str:
        t = self.test
        miss = model.miss_probabilities(self.features.iloc[t])
        ratio = counted_use(TIME, self.used[t], self.asked[t]) / self.asked[t]
        auc = [roc_auc_score(ratio <= level, -miss[:, int(np.flatnonzero(LEVELS == level)[0])]) for level in (0.5, 0.9)]
        return f"{auc[0]:.3f} / {auc[1]:.3f}"


def settings(model: SizingModel, rate: float, objective: str) -> SizingModel:
    """The same trees, aimed at another rate and objective."""
    other = copy.copy(model)
    other.coverage, other.objective = 1 - rate, objective
    return other


def cells(f: dict[str, float]) -> str:
    return f"{f['under_rate']:.3f} / {f['median_ratio']:.2f} / {f['released_share']:+.3f}"


def main(paths: list[str]) -> None:
    traces = [Path(p) for p in paths] or [ROOT / "jobaware" / "data" / "real" / t for t in TRACES]
    frontier = ["| trace | rate aimed | model, median objective | model, proc_hours objective | oracle, median "
                "objective | oracle, proc_hours objective |", "|---|---|---|---|---|---|"]
    objectives = ["| trace | objective | under-estimation (raw) | median rec/asked | mean | recommended less "
                  "| median among them | released | lost | oracle median | oracle released |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
    about = ["| trace | test jobs | perfect-information median | AUC at 0.5 / 0.9: model | oracle | CPU s: model "
             "trees | oracle trees | whole trace |", "|---|---|---|---|---|---|---|---|"]
    for path in traces:
        started = time.process_time()
        trace = Trace(path)
        for rate in RATES:
            frontier.append(f"| {trace.name} | {rate:.2f} | {cells(trace.realised(rate, 'median'))} | "
                            f"{cells(trace.realised(rate, 'proc_hours'))} | {cells(trace.best(rate, 'median'))} | "
                            f"{cells(trace.best(rate, 'proc_hours'))} |")
        for objective in OBJECTIVES:
            f, best = trace.realised(0.05, objective), trace.best(0.05, objective)
            objectives.append(
                f"| {trace.name} | {objective} | {f['under_rate']:.3f} ({f['under_rate_raw']:.3f}) | "
                f"{f['median_ratio']:.2f} | {f['mean_ratio']:.2f} | {f['below_share']:.2f} | "
                f"{f['median_ratio_below']:.2f} | {f['released_share']:+.3f} | {f['lost_share']:.3f} | "
                f"{best['median_ratio']:.2f} | {best['released_share']:+.3f} |")
        about.append(f"| {trace.name} | {len(trace.test):,} | {trace.perfect_median():.2f} | "
                     f"{trace.ranking(trace.model)} | {trace.ranking(trace.oracle)} | {trace.model_cpu:.0f} | "
                     f"{trace.oracle_cpu:.0f} | {time.process_time() - started:.0f} |")
        print(f"{trace.name} done", file=sys.stderr, flush=True)
    print("Under-estimation rate / median recommended/asked / processor-hours released (net share), test jobs:\n")
    print("\n".join(frontier))
    print("\nAt the rate 0.05, each objective:\n")
    print("\n".join(objectives))
    print("\nThe traces and the classifiers:\n")
    print("\n".join(about))


if __name__ == "__main__":
    main(sys.argv[1:])
