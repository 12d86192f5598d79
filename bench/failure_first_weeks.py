"""A new site's first weeks: how well `failure` judges its jobs with the public-trace model, with a model trained on
the site's own jobs alone, and with the site's jobs and the public traces together; and when the gate would let the
site's model take over.

One real trace plays the new site (`--site`, a trace of jobaware/data/real/failure.public.json); the public model is trained
on the other traces, never on it. The site's jobs arrive in time order from its first day. At the start of each
window (day 0, 7, 14, 28, 56) the site runs `jobaware pipeline run failure --data STORE` on what its store holds
then: the jobs it has seen, those still running censored (no end, no state). As the pipeline does, that run trains
on the jobs submitted and ended before the first 70 % of them (the last 30 % are the gate's evaluation data). Each
model then answers the window's jobs, scored on how they ended, with the history features the service computes
from the store (`JOBAWARE_STORE`: the site's jobs that ended before each job's submission; the service reads the
store every 10 minutes, this bench at each submission):

  public, no store     the public model served without JOBAWARE_STORE: it knows no history of this site
  public               the public model with the store's history (what serves from day one)
  site only            trained on the store's jobs alone (`--param public_data=none`)
  site + public        trained on the store's jobs and the public traces (`public_data=auto`, the default)

The ratio column is the project's peer comparison, measured in the same run: ROC-AUC with the public traces (what
the pipeline serves with them: "site + public", or "public" while the store holds no model of its own) against
without them ("site only", or 0.5 while there is none: without the public model a new site has no model, a
constant answer).

Cells: ROC-AUC of P(fail) in bold, then accuracy and failed-class F1 at the model's own operating threshold ("-":
no model, the store's training side holds no failed or no completed job yet). The gate column is what `promote`
would decide at the window's start for "site + public" against the public champion, on the store's own evaluation
jobs: the ROC-AUC difference with its 90 % interval (DeLong) and whether it passes (at least MIN_EVAL_ROWS
evaluation jobs, the interval's low end at least -GATE_MARGIN).

    python bench/failure_first_weeks.py --site KTH-SP2 --site CTC-SP2 --site LLNL-Thunder

Single-threaded (OMP_NUM_THREADS=1 is set before scikit-learn loads); several minutes of CPU per site.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from jobaware.failure import public  # noqa: E402
from jobaware.failure.bundle import FailureBundle  # noqa: E402
from jobaware.failure.capability import GATE_MARGIN, MIN_EVAL_ROWS  # noqa: E402
from jobaware.failure.evaluate import auc_difference, metrics  # noqa: E402
from jobaware.failure.features import FEATURES  # noqa: E402
from jobaware.failure.schema import OUTCOMES  # noqa: E402
from jobaware.failure.train import FeatureTable, featurize, featurize_file, fit  # noqa: E402
from jobaware.fit import PUBLIC_SUFFIX, public_traces  # noqa: E402
from jobaware.jobtable.common import to_canonical_dtypes  # noqa: E402

WINDOWS = ((0, 7), (7, 14), (14, 28), (28, 56), (56, 91))  # days since the site's first job
MODELS = ("public, no store", "public", "site only", "site + public")
_EMPTY = to_canonical_dtypes(pd.DataFrame())


def public_without(site: str, workdir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The public traces but `site`, featurized site by site: (as the public model trains on them, 70/30 per trace;
    every labelled job on the training side, as they join a site's own jobs), and the site's canonical jobs."""
    traces = public_traces(public.manifest())
    folder = workdir / "public"
    folder.mkdir(parents=True)
    (folder / f"others{PUBLIC_SUFFIX}").write_text(json.dumps({"traces": [t for t in traces if t["name"] != site]}))
    public.ingest(folder / f"others{PUBLIC_SUFFIX}", folder)
    featurize_file(folder / f"{public.TABLE}.parquet", workdir / "public.parquet")
    features = pd.read_parquet(workdir / "public.parquet")
    own = workdir / "own"
    own.mkdir()
    (own / f"own{PUBLIC_SUFFIX}").write_text(json.dumps({"traces": [t for t in traces if t["name"] == site]}))
    public.ingest(own / f"own{PUBLIC_SUFFIX}", own)
    jobs = pd.read_parquet(own / f"{public.TABLE}.parquet").drop(columns=public.SITE)
    return features, to_canonical_dtypes(jobs).sort_values("submit_time", kind="stable").reset_index(drop=True)


def known_at(jobs: pd.DataFrame, moment: pd.Timestamp) -> pd.DataFrame:
    """What the site's store holds at `moment`: the jobs submitted before it, those still running without an end."""
    held = jobs[jobs["submit_time"] < moment].copy()
    running = ~(held["end_time"] < moment)
    held.loc[running, ["end_time", "run_time", "state"]] = None
    held.loc[running & ~(held["start_time"] < moment), "start_time"] = None
    return to_canonical_dtypes(held)


def pending(jobs: pd.DataFrame) -> pd.DataFrame:
    """Jobs as a scheduler asks about them: nothing known of how they run or end."""
    return jobs.assign(start_time=pd.NaT, end_time=pd.NaT, run_time=np.nan, state=None)


def scored(bundle: FailureBundle | None, window: pd.DataFrame, features: pd.DataFrame | None) -> dict:
    """ROC-AUC, and accuracy and failed-class F1 at the bundle's threshold, of its answers on the window's jobs: on
    their `features` (the store's history), or as the bundle alone answers jobs that are pending (None)."""
    if bundle is None:
        return {}
    if features is None:
        answer = bundle.predict(pending(window))
        proba = answer[[c for c in answer.columns if c.startswith("p_")]]
    else:
        proba = bundle.model.predict_proba(features[list(FEATURES)])
    found = metrics(window["state"].reset_index(drop=True), proba.reset_index(drop=True), threshold=bundle.threshold)
    return {"roc_auc": found["roc_auc"], "accuracy": found.get("accuracy", np.nan), "fail_f1": found.get("fail_f1", np.nan)}


def store_model(store: pd.DataFrame, public_rows: pd.DataFrame | None) -> tuple[FailureBundle | None, pd.DataFrame]:
    """What `pipeline run --data STORE` makes of the store: the model (None when its training side lacks a failed or
    a completed job) and the store's evaluation (test) jobs' features and labels."""
    table = featurize(store, 0.3)
    labels = table.loc[table["split"] == "train", "label"].astype(str)
    test = table[table["split"] == "test"].reset_index(drop=True)
    if labels.eq("COMPLETED").all() or not labels.eq("COMPLETED").any():
        return None, test
    if public_rows is not None:
        table = pd.concat([table, public_rows], ignore_index=True)
    return fit(FeatureTable(table), FailureBundle.history_tail(store), {}), test


def gate(candidate: FailureBundle | None, champion: FailureBundle, test: pd.DataFrame) -> dict:
    """The gate's decision at this moment: candidate against the public champion on the store's evaluation jobs."""
    if candidate is None or not len(test):
        return {"rows": len(test)}
    failed = test["label"].astype(str).to_numpy() != "COMPLETED"
    x = test[list(FEATURES)]
    found = auc_difference(failed, candidate.model.predict_proba(x)["p_fail"].to_numpy(),
                           champion.model.predict_proba(x)["p_fail"].to_numpy())
    passes = len(test) >= MIN_EVAL_ROWS and found["low"] >= -GATE_MARGIN
    return {"rows": len(test), **found, "passes": passes}


def run_site(site: str, workdir: Path) -> list[dict]:
    started = time.process_time()
    features, jobs = public_without(site, workdir)
    champion = fit(FeatureTable(features), FailureBundle.history_tail(_EMPTY), {})
    extra = features.assign(split=np.where(features["label"].notna(), "train", ""))
    served = featurize(jobs, 0.3)  # every job's features from the site's jobs that ended before it was submitted
    first, rows = jobs["submit_time"].min(), []
    for low, high in WINDOWS:
        start, end = first + pd.Timedelta(days=low), first + pd.Timedelta(days=high)
        inside = ((jobs["submit_time"] >= start) & (jobs["submit_time"] < end) & jobs["state"].isin(OUTCOMES)).to_numpy()
        window, window_features = jobs[inside], served[inside]
        store = known_at(jobs, start)
        site_only, test = store_model(store, None) if len(store) else (None, pd.DataFrame())
        both, _ = store_model(store, extra) if len(store) else (None, None)
        failed = int((window["state"] != "COMPLETED").sum())
        row = {"site": site, "days": f"{low}-{high}", "store jobs": len(store), "window jobs": len(window),
               "window failed": failed}
        answered = zip(MODELS, (champion, champion, site_only, both), (None, *[window_features] * 3), strict=True)
        for name, bundle, given in answered:
            row[name] = scored(bundle, window, given) if 0 < failed < len(window) else {}
        row["gate"] = gate(both, champion, test)
        rows.append(row)
        print(_line(row), flush=True)
    print(f"{site}: {time.process_time() - started:.0f} s of CPU", file=sys.stderr, flush=True)
    return rows


def _cell(found: dict) -> str:
    if not found:
        return "-"
    return f"**{found['roc_auc']:.3f}** / {found['accuracy']:.1%} / {found['fail_f1']:.3f}"


def _gate_cell(found: dict) -> str:
    if "difference" not in found:
        return f"no candidate ({found['rows']:,} eval jobs)"
    verdict = "promotes" if found["passes"] else "keeps public"
    return (f"{found['rows']:,} eval jobs: {found['difference']:+.3f} ({found['low']:+.3f}..{found['high']:+.3f}), "
            f"{verdict}")


def ratio(row: dict) -> float:
    """ROC-AUC with the public traces against without them (module docstring); NaN for a window of one class."""
    if not row["public"]:
        return float("nan")
    with_public = (row["site + public"] or row["public"])["roc_auc"]
    without = row["site only"]["roc_auc"] if row["site only"] else 0.5
    return with_public / without


def _line(row: dict) -> str:
    cells = [row["site"], row["days"], f"{row['store jobs']:,}", f"{row['window jobs']:,} ({row['window failed']:,})",
             *(_cell(row[name]) for name in MODELS), f"{ratio(row):.2f}", _gate_cell(row["gate"])]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", action="append", help="a trace of the public manifest to play the new site (repeatable)")
    args = parser.parse_args()
    sites = args.site or ["KTH-SP2", "CTC-SP2", "LLNL-Thunder"]
    print("| site | days | store jobs at the start | window jobs (failed) | " + " | ".join(MODELS)
          + " | with / without public | gate at the start: site + public against public |")
    print("|---" * (6 + len(MODELS)) + "|")
    for site in sites:
        with tempfile.TemporaryDirectory() as tmp:
            run_site(site, Path(tmp))


if __name__ == "__main__":
    main()
