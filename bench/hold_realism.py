"""Real holds beside generated ones: hold codes and subcodes, how each code ended, time to release, re-holds.

    .venv/bin/python bench/hold_realism.py [--jobs 5000] [--real DIR] [--model-audit AUDIT]

Reads every real log under `--real` (default data/real/condor; the HTCondor unit-test logs are left out: they
are not real jobs) and a generated global log of `--jobs` jobs (jobaware.hold.synth, seed 0), labels the holds
as training does (jobaware.hold.labels) and prints, side by side:
  - the share of holds per code/subcode;
  - per code, how the labelled holds ended (release: run to a normal end after the hold; remove);
  - the hours from a hold to the job's next release (013), median and 90th percentile;
  - the share of released holds that were held again before the job ended;
and, on the real labelled holds, the accuracy of the site-rule baseline (jobaware.hold.baselines.PolicyRule with
the default parameters) and of releasing every hold.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.hold import synth
from jobaware.hold.baselines import PolicyRule
from jobaware.hold.labels import decisions
from jobaware.hold.params import Params
from jobaware.hold.reader import read_events

ROOT = Path(__file__).resolve().parents[1]
NOT_JOBS = ("htcondor_test_condor.log", "htcondor_python_bindings_test_log.txt")


def real_logs(folder: Path) -> list[str]:
    return [str(p) for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix in (".log", ".txt")
            and p.name not in NOT_JOBS]


def hold_table(events: pd.DataFrame) -> pd.DataFrame:
    """The holds (labels as training makes them) with the hours to the next release and whether held again."""
    table = decisions(events)
    ev = events.sort_values("seq")
    releases = ev[ev["event_code"] == 13][["cluster", "proc", "subproc", "seq", "time"]]
    hours, reheld = [], []
    for row in table.itertuples():
        mine = releases[(releases["cluster"] == row.cluster) & (releases["proc"] == row.proc)
                        & (releases["seq"] > row.hold_seq)]
        nxt = mine.iloc[0] if len(mine) else None
        hours.append((nxt["time"] - row.hold_time).total_seconds() / 3600 if nxt is not None else np.nan)
        reheld.append(bool(row.reheld) if nxt is not None else np.nan)
    return table.assign(hours_to_release=hours, reheld_after_release=reheld)


def side_by_side(real: pd.DataFrame, generated: pd.DataFrame) -> None:
    def kind(t):
        return t["hold_code"].astype(str) + "/" + t["hold_subcode"].astype(str)

    shares = pd.DataFrame({"real": kind(real).value_counts(normalize=True),
                           "generated": kind(generated).value_counts(normalize=True)}).fillna(0).round(3)
    print(f"holds: real {len(real)}, generated {len(generated)}\n\nshare of holds by code/subcode")
    print(shares.sort_values("real", ascending=False).to_string())

    def ended(t):
        labelled = t[t["label"].notna()]
        return labelled.groupby("hold_code")["label"].agg(
            n="size", release=lambda s: round(float((s == "release").mean()), 2))

    print("\nlabelled holds by code: how many, and the share that ended released (run to a normal end)")
    print(pd.concat({"real": ended(real), "generated": ended(generated)}, axis=1).astype(object).fillna("-").to_string())
    print("\nhours from hold to release      median    p90   released   re-held after release")
    for name, t in (("real", real), ("generated", generated)):
        h = t["hours_to_release"].dropna()
        again = t["reheld_after_release"].dropna()
        print(f"  {name:10s}                  {h.median():7.2f} {h.quantile(0.9):7.2f}   {len(h):8d}   "
              f"{again.mean():.2f} ({int(again.sum())} of {len(again)})")


def baseline_accuracy(real: pd.DataFrame) -> None:
    p = Params()
    labelled = real[real["label"].notna()]
    y = (labelled["label"] == "release").to_numpy()
    rule = PolicyRule(tuple(p.policy_codes), p.policy_max_releases).predict_proba(
        labelled[["hold_code", "hold_index"]]) >= 0.5
    print(f"\nreal labelled holds: {len(y)}; site-rule baseline (codes {p.policy_codes}, fewer than "
          f"{p.policy_max_releases} earlier holds) right on {int((rule == y).sum())} ({(rule == y).mean():.2f}); "
          f"release-all right on {int(y.sum())} ({y.mean():.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--real", type=Path, default=ROOT / "data" / "real" / "condor")
    args = parser.parse_args()
    real_events, _ = read_events(real_logs(args.real))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "EventLog"
        synth.write(log, args.jobs, 0)
        generated_events, _ = read_events([str(log)])
    real, generated = hold_table(real_events), hold_table(generated_events)
    side_by_side(real, generated)
    baseline_accuracy(real)


if __name__ == "__main__":
    main()
