"""The hold decision-makers on pools whose holds end released more often than ours: real and generated.

    .venv/bin/python bench/hold_shift.py [--jobs 3000] [--cost 3] [--shares 0.1 0.3 0.5 0.7 0.9]

The real holds bundled here (jobaware.hold.synth.real_logs) are mostly removed by hand; a pool with a periodic
release ends most holds released. First, how the rule that chooses the served decision-maker fares when it is
itself cross-validated (for each workflow held out, the choice made on the others' out-of-fold decisions), in
three orders of its terms: the served rule (cost by workflow, then the worst workflow's), the worst workflow
first, and right by workflow (the rule before costs). Then two measurements of what a decision-maker does in a
pool that releases more, neither of them a pool we have:

1. Real holds, the share released shifted (label shift). Each decision-maker's out-of-fold decisions on the
   real ended holds (jobaware.hold.train with the default parameters but a small network: its
   cross-validation, each workflow held out whole) give its recall on holds that ended released and on those
   that were removed, every workflow weighing the same; in a pool where a share s of holds end released its
   accuracy is s x the first + (1 - s) x the second, and its cost s x wrong_remove_cost x (1 - the first) +
   (1 - s) x (1 - the second). Exact for a decision-maker whose inputs do not change with s (the plain policies,
   the learned models); for the adaptive ones (jobaware.hold.adaptive), whose evidence would say "released"
   more often in such a pool, a pessimistic bound: their recall on released holds here is measured in logs
   where almost every earlier hold was removed.
2. Generated pools (jobaware.hold.synth.FittedSimulator, `--jobs` jobs each, seed 0) whose every hold code
   ends released with share s and removed otherwise (a tenth re-held after a release, 5 % of releases ending
   abnormally), decided with the prior fitted on the real holds (what the served bundle carries); `with
   evidence`: the holds with an earlier hold of another job ended or released before them. A check of the
   mechanism, not evidence about real pools.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.hold import adaptive, synth
from jobaware.hold import deciders as D
from jobaware.hold import features as F
from jobaware.hold import train as T
from jobaware.hold.baselines import PolicyRule
from jobaware.hold.groups import by_log, log_holds, real_outcomes
from jobaware.hold.outcomes import Outcomes
from jobaware.hold.params import check_params
from jobaware.hold.reader import ingest, read_events

SMALL = {"j": 6, "m": 8, "hidden_size": 8, "embedding_dim": 4, "epochs": 3, "batch_size": 256, "gbt_max_iter": 30,
         "bootstrap": 100}
NAMES = (*D.PLAIN, *adaptive.ADAPTIVE, *D.LEARNED)


def out_of_fold(real: list[str], cost: float) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """Each decision-maker's out-of-fold release decisions on the real ended holds, their labels, workflows and
    folds."""
    with tempfile.TemporaryDirectory() as tmp:
        ingest(real, tmp)
        p = check_params({**SMALL, "wrong_remove_cost": cost})
        data = T.load_dataset(tmp, p)
        cv = T.fold_of(data, p)
        feats = T.build_features(data, p, data.table["role"].to_numpy() != "")
        T.cross_validate(data, feats, cv, p, ("lstm", "gbt"))
        release, _, _ = T.learned_results(cv, cost)
        for name, chance in (T.plain_chances(data, cv.rows, p) | T.adaptive_chances(data, feats, cv, p)).items():
            release[name] = chance >= D.threshold(cost)
    return release, cv.y, cv.groups, cv.folds


RULES = {"cost, then worst (served)": lambda s, right: (s.cost, s.worst_cost),
         "worst cost, then cost": lambda s, right: (s.worst_cost, s.cost),
         "right by workflow": lambda s, right: (-right, s.cost)}


def rules(release: dict, y: np.ndarray, groups: np.ndarray, folds: np.ndarray, cost: float) -> pd.DataFrame:
    """Each order of the choice's terms, the choice itself cross-validated (see the module)."""
    def choose(mask, order):
        def key(name):
            s = D.standing(release[name][mask], y[mask], groups[mask], cost, 10)
            right = D.grouped_accuracy(release[name][mask] == (y[mask] == 1), groups[mask])
            return (not s.admissible, *(round(v, 9) for v in order(s, right)), D.PREFERENCE.index(name))
        return min(NAMES, key=key)

    rows = []
    for label, order in RULES.items():
        served, picks = np.zeros(len(y), bool), []
        for k in np.unique(folds):
            mine = folds == k
            picks.append(choose(~mine, order))
            served[mine] = release[picks[-1]][mine]
        s = D.standing(served, y, groups, cost, 10)
        rows.append({"rule": label, "on all folds": choose(np.ones(len(y), bool), order),
                     "right by workflow": D.grouped_accuracy(served == (y == 1), groups),
                     "worst workflow": s.worst_accuracy, "cost": s.cost, "worst cost": s.worst_cost,
                     "chosen per fold": " ".join(picks)})
    return pd.DataFrame(rows).set_index("rule")


def label_shift(release: dict, y: np.ndarray, groups: np.ndarray, shares: list[float], cost: float) -> pd.DataFrame:
    released, removed = y == 1, y == 0
    rows = []
    for name in NAMES:
        hit_release = D.grouped_mean(release[name][released], groups[released])
        hit_remove = D.grouped_mean(~release[name][removed], groups[removed])
        row = {"decision-maker": name, "recall released": hit_release, "recall removed": hit_remove}
        for s in shares:
            row[f"right s={s:g}"] = s * hit_release + (1 - s) * hit_remove
        for s in shares:
            row[f"cost s={s:g}"] = s * cost * (1 - hit_release) + (1 - s) * (1 - hit_remove)
        rows.append(row)
    return pd.DataFrame(rows).set_index("decision-maker")


def shifted(fitted: Outcomes, share: float) -> Outcomes:
    """The fitted outcomes with every code ending released with `share` (see the module)."""
    codes = {key: dataclasses.replace(c, released=share, removed=1 - share, held=0.0, reheld=0.1, ends_normally=0.95)
             for key, c in fitted.codes.items()}
    return Outcomes(codes, dict(fitted.mix), dict(fitted.fitted_on))


def generated_pools(fitted: Outcomes, strength: float, shares: list[float], jobs: int, cost: float) -> pd.DataFrame:
    p = check_params({})
    rule = PolicyRule(tuple(p["policy_codes"]), p["policy_max_releases"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in shares:
            log = Path(tmp) / f"pool_{s:g}.log"
            synth.write(log, jobs, 0, outcomes=shifted(fitted, s))
            events, _ = read_events([str(log)])
            table = log_holds(events, str(log))
            table = table[table["label"].notna()].reset_index(drop=True)
            counts = F.count_features(F.build_index(events), table)
            y = (table["label"] == "release").to_numpy()
            decided = {"release_all": np.ones(len(y), bool), "remove_all": np.zeros(len(y), bool),
                       "site_rule": rule.predict_proba(F.static_features(table)) >= 0.5}
            for name in adaptive.ADAPTIVE:
                decided[name] = adaptive.chances(name, counts, fitted, strength, rule) >= D.threshold(cost)
            seen = (counts["log_ended_release"] + counts["log_ended_remove"] + counts["log_released_pending"]) > 0
            row = {"share asked": s, "ended holds": len(y), "ended released": y.mean(), "with evidence": seen.to_numpy().mean()}
            for name, release in decided.items():
                row[f"{name} right"] = np.mean(release == y)
            for name, release in decided.items():
                row[f"{name} cost"] = np.mean(D.costs(release, y, cost))
            rows.append(row)
    return pd.DataFrame(rows).set_index("share asked")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--cost", type=float, default=3.0, help="wrong_remove_cost")
    parser.add_argument("--shares", type=float, nargs="*", default=[0.1, 0.3, 0.5, 0.7, 0.9])
    args = parser.parse_args()
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    real = synth.real_logs()
    release, y, groups, folds = out_of_fold(real, args.cost)
    print(f"0. the choice, cross-validated (real ended holds, wrong_remove_cost {args.cost:g})")
    print(rules(release, y, groups, folds, args.cost).round(2).to_string())
    print(f"\n1. real ended holds: {len(y)} in {len(np.unique(groups))} workflows, {int(y.sum())} ended released; "
          f"out of fold, each workflow held out whole; wrong_remove_cost {args.cost:g}; by workflow")
    print(label_shift(release, y, groups, args.shares, args.cost).round(2).to_string())
    events, _ = read_events(real)
    holds = pd.concat([log_holds(part, log) for log, part in by_log(events).items()], ignore_index=True)
    ended = holds[holds["label"].notna()]
    strength = adaptive.workflow_strength((ended["label"] == "release").to_numpy(), ended["workflow"].to_numpy())
    fitted = real_outcomes(real)
    print(f"\n2. generated pools of {args.jobs} jobs, every code ending released with the share asked; the adaptive "
          f"decision-makers' prior fitted on the real holds (strength {strength:.1f} holds)")
    print(generated_pools(fitted, strength, args.shares, args.jobs, args.cost).round(2).T.to_string())


if __name__ == "__main__":
    main()
