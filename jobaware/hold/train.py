"""Train and evaluate the hold model against its baselines on one time-ordered split.

Split. Labelled decisions are ordered by hold time; the last `test_fraction` are the test set, the
`validation_fraction` before them the validation set, the rest the training set. Only what was known at a
cut may train for it: a training hold must be resolved (its terminal event) before the validation set
starts, a validation hold before the test set starts; others are left out. `max_decisions` keeps the
most recent labelled holds. Unlabelled holds never enter.

Selection. The network's weights are those of the epoch with the highest validation metric (`primary_metric`,
default F1 of remove); its decision threshold is the one that maximises that metric on the validation set.
The tree baseline's threshold is chosen the same way; the policy rule has none. With a truth file (the
generator's), the oracle (the true P(release), threshold chosen on validation) gives the best achievable
score and the gap to it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from jobaware.errors import InputError, JobawareError
from jobaware.hold import features as F
from jobaware.hold.baselines import PolicyRule, TreeBaseline
from jobaware.hold.bundle import HoldBundle, as_events, example_rows
from jobaware.hold.capability import PRIMARY_METRIC
from jobaware.hold.evaluate import choose_threshold, metrics, plots
from jobaware.hold.labels import decisions
from jobaware.hold.model import HoldNetwork, StaticEncoder, fit, predict_proba, threads
from jobaware.hold.params import check_params
from jobaware.hold.reader import read_stats
from jobaware.hold.schema import CONTRACT
from jobaware.hold.synth import truth_path
from jobaware.model import Evaluation

EVENT_COLUMNS = ["seq", "cluster", "proc", "subproc", "event_code", "time", "code", "subcode",
                 "terminated_normally", "return_value"]  # what training reads (hold reason texts are not features)
EVAL_HISTORY = 7 * 86400  # the evaluation folder keeps the events of jobs active from this long before the test


@dataclass
class Dataset:
    events: pd.DataFrame
    index: F.EventIndex
    table: pd.DataFrame  # decisions with `split` (train / validation / test / "") and `y_release`
    truth: np.ndarray | None  # the generator's P(release) per decision, when known


@dataclass(kw_only=True)
class HoldEvaluation(Evaluation):
    history: list[dict] = field(default_factory=list)  # the network's training epochs


def events_file(dataset_dir: str | Path) -> Path:
    path = Path(dataset_dir)
    path = path / f"{CONTRACT}.parquet" if path.is_dir() else path
    if not path.is_file():
        raise InputError(f"{dataset_dir}: no {CONTRACT}.parquet (run the ingest step first)")
    return path


def read_events_table(path: Path) -> pd.DataFrame:
    """The columns of the canonical events the features and labels need (converted once, buffers freed as
    they are converted)."""
    table = pq.read_table(path, columns=EVENT_COLUMNS)
    return as_events(table.to_pandas(types_mapper={pa.string(): pd.StringDtype()}.get, self_destruct=True,
                                     split_blocks=True))


def split(table: pd.DataFrame, p: dict) -> np.ndarray:
    """'train', 'validation', 'test' or '' for every decision, by the module's rule."""
    side = np.full(len(table), "", dtype=object)
    labelled = np.flatnonzero(table["label"].notna().to_numpy())
    if len(labelled) == 0:
        return side
    labelled = labelled[np.argsort(table["hold_time"].to_numpy()[labelled], kind="stable")][-p["max_decisions"]:]
    times = table["hold_time"].to_numpy()[labelled]
    resolved = table["resolution_time"].to_numpy()[labelled]
    n = len(labelled)
    test_cut = times[min(int(n * (1 - p["test_fraction"])), n - 1)]
    validation_cut = times[min(int(n * (1 - p["test_fraction"] - p["validation_fraction"])), n - 1)]
    side[labelled[(times < validation_cut) & (resolved < validation_cut)]] = "train"
    side[labelled[(times >= validation_cut) & (times < test_cut) & (resolved < test_cut)]] = "validation"
    side[labelled[times >= test_cut]] = "test"
    return side


def load_dataset(dataset_dir: str | Path, p: dict, truth: str | Path | None = None) -> Dataset:
    """Events, their decisions with labels and split, and the generator's truth when given."""
    events = read_events_table(events_file(dataset_dir))
    table = decisions(events, p["nonzero_exit_is_failure"])
    table["split"] = split(table, p)
    table["y_release"] = (table["label"] == "release").fillna(False).to_numpy(dtype=int)
    known = None
    if truth is not None:
        truth_table = pd.read_parquet(truth)
        keyed = truth_table.set_index(["cluster", "proc", "hold_index"])["p_release"]
        keyed = keyed[~keyed.index.duplicated()]
        known = keyed.reindex(pd.MultiIndex.from_frame(table[["cluster", "proc", "hold_index"]])).to_numpy(float)
    return Dataset(events, F.build_index(events), table, known)


def trained_on(dataset_dir: str | Path, table: pd.DataFrame) -> dict:
    """What a model of this dataset learns from: `synthetic` when every log read was generated by
    jobaware.hold.synth (its truth file lies beside it), `real` when none was, else `mixed`; and how many
    labelled holds the logs hold. A model not trained on real logs never acts (adapters/htcondor)."""
    files = read_stats(events_file(dataset_dir)).get("files", [])
    generated = [truth_path(f).exists() for f in files]
    source = "unrecorded" if not files else "synthetic" if all(generated) else "real" if not any(generated) \
        else "mixed"
    return {"source": source, "labelled_holds": int(table["label"].notna().sum()), "logs": len(files)}


def _part(data: Dataset, side: str) -> pd.DataFrame:
    return data.table[data.table["split"] == side]


def _tensors(data: Dataset, rows: pd.DataFrame, p: dict, workdir: Path | None, name: str) -> np.ndarray:
    out = workdir / f"tensors_{name}.npy" if workdir is not None else None
    return F.build_tensors(data.index, rows, p["m"], p["j"], p["timeframe_len"], p["seed"], out=out)


def _fit_network(data: Dataset, p: dict, workdir: Path | None, dataset_dir: str | Path | None = None):
    train_rows, validation_rows = _part(data, "train"), _part(data, "validation")
    if train_rows["y_release"].nunique() < 2 or len(validation_rows) == 0:
        raise JobawareError(f"cannot train: {len(train_rows)} training holds ({train_rows['label'].nunique()} "
                            f"label(s)) and {len(validation_rows)} validation holds; use a longer log")
    encoder = StaticEncoder().fit(F.static_features(train_rows).to_numpy())

    def arrays(rows: pd.DataFrame, name: str):
        return (_tensors(data, rows, p, workdir, name), encoder.transform(F.static_features(rows).to_numpy()),
                rows["y_release"].to_numpy())

    train_arrays, validation_arrays = arrays(train_rows, "train"), arrays(validation_rows, "validation")
    primary = p["primary_metric"]
    threshold_free = primary in ("roc_auc", "pr_auc")

    def score(y: np.ndarray, prob: np.ndarray) -> float:
        threshold = 0.5 if threshold_free else choose_threshold(y, prob, primary)
        return metrics(y, prob, threshold)[primary]

    with torch.random.fork_rng(devices=[]):  # seeded, without touching the caller's random state
        torch.manual_seed(p["seed"])
        network = HoldNetwork(p["network"], p["j"], encoder.width, p["embedding_dim"], p["hidden_size"],
                              p["layers"], p["dropout"])
        result = fit(network, train_arrays, validation_arrays, p, score)
    validation_p = predict_proba(result.network, validation_arrays[0], validation_arrays[1])
    threshold = choose_threshold(validation_arrays[2], validation_p, primary)
    bundle = HoldBundle(params=dict(p), network_state={k: v.clone() for k, v in result.network.state_dict().items()},
                        static_pairs=encoder.pairs, threshold=threshold,
                        example=example_rows(data.events, _part(data, "test")),
                        trained_on=trained_on(dataset_dir, data.table) if dataset_dir is not None else {})
    return bundle, result, validation_p, validation_arrays[2]


def run_trial(dataset_dir: str | Path, trial_params: dict, workdir: str | Path | None = None,
              truth: str | Path | None = None) -> dict[str, float]:
    """One sweep trial: train on the training holds, select on validation; flat metrics of validation and test.

    `validation_primary` is what `best_trial` compares."""
    started = time.monotonic()
    p = check_params(trial_params)
    workdir = Path(workdir) if workdir is not None else None
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    with threads(p["threads"]):
        return _trial(dataset_dir, p, workdir, truth, started)


def _trial(dataset_dir, p: dict, workdir: Path | None, truth, started: float) -> dict[str, float]:
    data = load_dataset(dataset_dir, p, truth)
    bundle, result, validation_p, validation_y = _fit_network(data, p, workdir)
    test_rows = _part(data, "test")
    test_p = bundle.score_decisions(data.index, test_rows)
    out = {f"validation_{k}": v for k, v in metrics(validation_y, validation_p, bundle.threshold).items()}
    out.update({f"test_{k}": v for k, v in metrics(test_rows["y_release"].to_numpy(), test_p, bundle.threshold).items()})
    out.update(validation_primary=out[f"validation_{p['primary_metric']}"], best_epoch=float(result.best_epoch),
               train_rows=float((data.table["split"] == "train").sum()), seconds=time.monotonic() - started)
    return out


def best_trial(results: list[dict]) -> int:
    """The index of the trial with the highest validation metric (undefined scores rank last; ties: first)."""
    if not results:
        raise JobawareError("no trial results to choose from")
    scores = np.array([r.get("validation_primary", np.nan) for r in results], float)
    if np.isnan(scores).all():
        raise JobawareError("no trial has a defined validation metric")
    return int(np.nanargmax(scores))


def train(dataset_dir: str | Path, params: dict | None, workdir: str | Path,
          truth: str | Path | None = None) -> tuple[HoldBundle, HoldEvaluation]:
    """Fit the network; evaluate it, the tree baseline, the policy rule (and the oracle) on the test holds;
    write plots and the promotion gate's evaluation folder under `workdir`."""
    p = check_params(params)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with threads(p["threads"]):
        return _train(dataset_dir, p, workdir, truth)


def _train(dataset_dir, p: dict, workdir: Path, truth) -> tuple[HoldBundle, HoldEvaluation]:
    data = load_dataset(dataset_dir, p, truth)
    bundle, result, validation_p, validation_y = _fit_network(data, p, workdir, dataset_dir)
    test_rows = _part(data, "test")
    if len(test_rows) == 0:
        raise JobawareError("no labelled holds after the split time; use a longer log or a larger test_fraction")
    y_test = test_rows["y_release"].to_numpy()
    curves = {"model": bundle.score_decisions(data.index, test_rows)}
    results = {"model": metrics(y_test, curves["model"], bundle.threshold)}
    counts = F.count_features(data.index, data.table)
    sides = data.table["split"].to_numpy()
    tree = TreeBaseline(p["gbt_max_iter"], p["gbt_learning_rate"], p["seed"]).fit(
        counts[sides == "train"], data.table["y_release"].to_numpy()[sides == "train"])
    tree_threshold = choose_threshold(validation_y, tree.predict_proba(counts[sides == "validation"]), p["primary_metric"])
    curves["gbt"] = tree.predict_proba(counts[sides == "test"])
    results["gbt"] = metrics(y_test, curves["gbt"], tree_threshold)
    curves["policy"] = PolicyRule(tuple(p["policy_codes"]), p["policy_max_releases"]).predict_proba(
        F.static_features(test_rows))
    results["policy"] = metrics(y_test, curves["policy"], 0.5)
    release_share = float(np.nanmean(data.table["y_release"].to_numpy(dtype=float)[sides == "train"]))
    results["majority"] = metrics(y_test, np.full(len(y_test), float(release_share >= 0.5)), 0.5)  # one answer always
    primary = p["primary_metric"]
    if data.truth is not None and not np.isnan(data.truth[sides == "test"]).all():
        oracle_validation = data.truth[sides == "validation"]
        oracle_threshold = choose_threshold(validation_y, np.nan_to_num(oracle_validation, nan=0.5), primary)
        curves["oracle"] = np.nan_to_num(data.truth[sides == "test"], nan=0.5)
        results["oracle"] = metrics(y_test, curves["oracle"], oracle_threshold)
        results["model"]["gap_to_oracle"] = results["oracle"][primary] - results["model"][primary]
    results["model"].update(train_rows=float((sides == "train").sum()), validation_rows=float(len(validation_y)),
                            best_epoch=float(result.best_epoch))
    made = plots(y_test, curves, bundle.threshold, result.history, results, primary, workdir / "plots")
    eval_dir = write_eval(data, test_rows, workdir / "eval")
    (workdir / "metrics.json").write_text(json.dumps(results, indent=2))
    return bundle, HoldEvaluation(metrics=results, plots=made, eval_dir=eval_dir, history=result.history)


def write_eval(data: Dataset, test_rows: pd.DataFrame, eval_dir: Path) -> Path:
    """The gate's evaluation data: the test holds and the events any model needs to decide them."""
    eval_dir.mkdir(parents=True, exist_ok=True)
    events = data.events
    first = test_rows["hold_time"].min() - pd.Timedelta(seconds=EVAL_HISTORY)
    last_seq = test_rows["hold_seq"].max()
    recent = events[(events["time"] >= first) & (events["seq"] <= last_seq)]
    active = pd.MultiIndex.from_frame(recent[["cluster", "proc", "subproc"]]).unique()
    keep = pd.MultiIndex.from_frame(events[["cluster", "proc", "subproc"]]).isin(active) & (events["seq"] <= last_seq)
    events[keep].to_parquet(eval_dir / "events.parquet", index=False)
    test_rows[["cluster", "proc", "subproc", "hold_seq", "hold_time", "label"]].to_parquet(
        eval_dir / "decisions.parquet", index=False)
    return eval_dir


def score(bundle: HoldBundle, eval_dir: str | Path) -> tuple[float, int]:
    """The primary metric of any bundle on a stored evaluation folder, and its number of decisions."""
    eval_dir = Path(eval_dir)
    events = pd.read_parquet(eval_dir / "events.parquet")
    wanted = pd.read_parquet(eval_dir / "decisions.parquet")
    if len(wanted) == 0:
        return float("nan"), 0
    frame = events.assign(decide=events["seq"].isin(wanted["hold_seq"]))
    decided = bundle.predict(frame)
    merged = wanted.merge(decided[["hold_seq", "p_release"]], on="hold_seq", how="left")
    y = (merged["label"] == "release").to_numpy(dtype=int)
    return metrics(y, merged["p_release"].to_numpy(float), bundle.threshold)[PRIMARY_METRIC[0]], len(merged)
