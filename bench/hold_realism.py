"""Real holds beside generated ones: codes, how each code ended, time to release, re-holds, the plain policies.

    .venv/bin/python bench/hold_realism.py [--jobs 4000] [--real PATH ...]

Reads the real logs (default: those `make run` trains on, jobaware.hold.synth.real_logs: jobaware/data/real/condor's
OSPool logs and jobaware/data/real/condor-more; HTCondor's own test logs are not real jobs), fits their outcomes by code
(jobaware.hold.outcomes: every workflow counting once, with intervals), writes a log of `--jobs` jobs from those
outcomes (the fitted generator) and one from the mechanistic generator (seed 0 both), labels every hold as
training does, and prints side by side:
  - per code, the real holds and ended holds it contributes, how many released, and in how many workflows;
  - the share of holds per code/subcode: real by hold, real with every workflow counting once, both generators;
  - per code/subcode, the fitted outcomes with their 90 % intervals, and what the fitted generator's holds did;
  - hours from a hold to the job's next release (median, 90th percentile) and the share of released holds held
    again before the job ended;
and, on the real ended holds, how often each plain policy is right, by hold and by workflow.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.hold import outcomes, synth
from jobaware.hold.baselines import PolicyRule
from jobaware.hold.deciders import grouped_accuracy, weights
from jobaware.hold.features import static_features
from jobaware.hold.groups import by_log, log_holds
from jobaware.hold.params import Params
from jobaware.hold.reader import read_events

CUT = 6  # hours before a generated log's end: later holds may not have ended when it ends


def holds_of(logs: list[str]) -> pd.DataFrame:
    events, _ = read_events(logs)
    tables = [log_holds(part, log) for log, part in by_log(events).items()]
    table = pd.concat([t for t in tables if len(t)], ignore_index=True)
    return table.assign(key=table["hold_code"].astype(str) + "/" + table["hold_subcode"].astype(str))


def per_code(real: pd.DataFrame) -> pd.DataFrame:
    ended = real["label"].notna()
    return real.assign(ended=ended, released=real["label"] == "release").groupby("hold_code").agg(
        holds=("key", "size"), ended=("ended", "sum"), release=("released", "sum"),
        workflows=("workflow", "nunique")).sort_values("holds", ascending=False)


def shares(real: pd.DataFrame, generated: dict[str, pd.DataFrame]) -> pd.DataFrame:
    columns = {"real": real["key"].value_counts(normalize=True),
               "real by workflow": pd.Series(weights(real["workflow"].to_numpy()), index=real["key"]).groupby(
                   level=0).sum() / real["workflow"].nunique()}
    columns.update({name: t["key"].value_counts(normalize=True) for name, t in generated.items()})
    return pd.DataFrame(columns).fillna(0).round(3).sort_values("real by workflow", ascending=False)


def fitted_beside_generated(fitted: outcomes.Outcomes, generated: pd.DataFrame) -> pd.DataFrame:
    table = outcomes.table(fitted).set_index("code")[["holds", "workflows", "released", "removed", "held",
                                                       "reheld", "p_release"]]
    early = generated[generated["hold_time"] < generated["hold_time"].max() - pd.Timedelta(hours=CUT)]
    done = early.groupby("key")["action"].value_counts(normalize=True).unstack(fill_value=0)
    ended = early[early["label"].notna()].groupby("key")["label"].agg(lambda s: (s == "release").mean())
    table["generated released/removed/held"] = [
        "/".join(f"{done.loc[k].get(a, 0):.2f}" for a in outcomes.ACTIONS) if k in done.index else "-"
        for k in table.index]
    table["generated P(release)"] = [f"{ended[k]:.2f}" if k in ended.index else "-" for k in table.index]
    return table


def weighted_quantile(values: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(w[order]) / w.sum()
    return float(values[order][np.searchsorted(cum, q)])


def timing(tables: dict[str, pd.DataFrame]) -> None:
    print("\nhours from hold to release:  median    p90   (by workflow: median    p90)   released   re-held after "
          "release (by workflow)")
    for name, t in tables.items():
        released = t[(t["action"] == "released") & t["hours"].notna()]
        hours, w = released["hours"].to_numpy(), weights(released["workflow"].to_numpy())
        again = released["reheld"].astype(bool).to_numpy()
        print(f"  {name:24s} {np.median(hours):7.2f} {np.quantile(hours, 0.9):7.2f}            "
              f"{weighted_quantile(hours, w, 0.5):7.2f} {weighted_quantile(hours, w, 0.9):7.2f}   {len(hours):8d}   "
              f"{again.mean():.2f} ({int(again.sum())} of {len(again)}; {np.average(again, weights=w):.2f})")


def plain_policies(real: pd.DataFrame) -> None:
    p = Params()
    ended = real[real["label"].notna()]
    y = (ended["label"] == "release").to_numpy()
    groups = ended["workflow"].to_numpy()
    calls = {"site rule": PolicyRule(tuple(p.policy_codes), p.policy_max_releases).predict_proba(
        static_features(ended)) >= 0.5, "release all": np.ones(len(y), bool), "remove all": np.zeros(len(y), bool)}
    print(f"\nreal ended holds: {len(y)} in {len(np.unique(groups))} workflows, {int(y.sum())} ended released "
          f"(the site rule: release codes {p.policy_codes} while fewer than {p.policy_max_releases} earlier holds)")
    for name, call in calls.items():
        right = call == y
        print(f"  {name:12s} right on {int(right.sum()):4d} ({right.mean():.2f}); by workflow "
              f"{grouped_accuracy(right, groups):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--real", nargs="*", default=None, help="real logs (default: jobaware.hold.synth.real_logs)")
    args = parser.parse_args()
    real = holds_of(args.real or synth.real_logs())
    fitted = outcomes.fit(real)
    with tempfile.TemporaryDirectory() as tmp:
        synth.write(Path(tmp) / "fitted.log", args.jobs, 0, outcomes=fitted)
        synth.write(Path(tmp) / "mechanistic.log", args.jobs, 0)
        generated = {"fitted generator": holds_of([str(Path(tmp) / "fitted.log")]),
                     "mechanistic generator": holds_of([str(Path(tmp) / "mechanistic.log")])}
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    print(f"holds: real {len(real)} in {real['workflow'].nunique()} workflows; " +
          ", ".join(f"{name} {len(t)}" for name, t in generated.items()))
    print("\nreal holds per code: holds, ended, ended released, workflows")
    print(per_code(real).to_string())
    print("\nshare of holds by code/subcode")
    print(shares(real, generated).to_string())
    print("\nfitted outcomes by code/subcode [90 % interval] beside what the fitted generator's holds did "
          f"(its holds at least {CUT} h before its end)")
    print(fitted_beside_generated(fitted, generated["fitted generator"]).to_string())
    timing({"real": real, **generated})
    plain_policies(real)


if __name__ == "__main__":
    main()
