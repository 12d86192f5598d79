"""Train and measure every hold decision-maker on real holds, and serve the best.

Data. The dataset's events are split by log (jobaware.hold.groups): a hold's features come from its own log
only. Evaluation holds are the real ended holds when there are `min_real_holds` of them in at least two
workflows (a `real` evaluation); else every ended hold (`generated`, e.g. on generated logs alone). In a real
evaluation the generated holds (the `max_decisions` most recent) are extra training data.

Cross-validation. The evaluation holds' workflows are dealt into `folds` folds (sklearn's GroupKFold): one
workflow's holds never sit on both sides. For each fold and each weight w of `synthetic_weights`, the network
and the trees learn from the other folds' evaluation holds (every workflow weighing the same, the real holds
in all as many as they are) and from the generated holds, which weigh w times the real ones in all and whose
targets are the release chances of outcomes fitted on the other folds' real holds only
(jobaware.hold.outcomes): a held-out workflow's outcomes never reach training through the generated holds.
Then they score the fold's holds. Calibration, the blend, the choice of w and the choice of the
decision-maker are each made on other folds than the one decided (jobaware.hold.deciders).

The served bundle. The decision-maker chosen on all folds (jobaware.hold.deciders.choose: a learned model
only when it beats the best plain policy) is fitted again on all the data with its w, the generated targets
from outcomes fitted on all real holds, and calibrated on all the out-of-fold scores; a plain policy needs no
fit. Metrics per decision-maker, all out of fold: grouped accuracy with its 95 % bootstrap interval (`low`,
`high`), accuracy, holds right, holds, workflows, and for the learned ones the ROC-AUC of their calibrated
P(release) (workflow-weighted); `model` is the served decision with its choice itself cross-validated, with its
margin over the best plain policy and that of the best learned model (`margin`, `learned_margin`, paired
bootstrap). With a truth file (the generator's), the oracle (its true P(release)) is scored too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import torch
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

from jobaware.errors import InputError, JobawareError
from jobaware.hold import adaptive, groups, outcomes
from jobaware.hold import deciders as D
from jobaware.hold import features as F
from jobaware.hold.adaptive import ADAPTIVE
from jobaware.hold.baselines import PolicyRule, TreeBaseline
from jobaware.hold.bundle import HoldBundle, as_events, example_rows
from jobaware.hold.evaluate import plots
from jobaware.hold.model import HoldNetwork, StaticEncoder, fit, predict_proba, threads
from jobaware.hold.params import check_params
from jobaware.hold.reader import read_stats
from jobaware.hold.schema import CONTRACT
from jobaware.hold.synth import truth_path
from jobaware.model import Evaluation
from jobaware.progress import Progress

EVENT_COLUMNS = ["seq", "source", "cluster", "proc", "subproc", "event_code", "time", "code", "subcode",
                 "terminated_normally", "return_value", "by_user", "job_ad"]  # hold reason texts are not features
ORIGIN_COLUMNS = ("source", "by_user", "job_ad")


@dataclass
class Log:
    name: str
    events: pd.DataFrame  # canonical events (jobaware.hold.bundle.as_events) with the origin columns
    index: F.EventIndex
    rows: np.ndarray  # its holds' positions in Dataset.table


@dataclass
class Dataset:
    logs: list[Log]
    table: pd.DataFrame  # every hold: decisions, action, hours, log, generated, workflow, y_release, role
    real: bool  # evaluated on real holds
    truth: np.ndarray | None  # the generator's P(release) per hold, when known

    def rows(self, role: str) -> np.ndarray:
        return np.flatnonzero(self.table["role"].to_numpy() == role)


@dataclass(kw_only=True)
class HoldEvaluation(Evaluation):
    history: list[dict] = field(default_factory=list)  # the served network's training epochs


def events_file(dataset_dir: str | Path) -> Path:
    path = Path(dataset_dir)
    path = path / f"{CONTRACT}.parquet" if path.is_dir() else path
    if not path.is_file():
        raise InputError(f"{dataset_dir}: no {CONTRACT}.parquet (run the ingest step first)")
    return path


def read_events_table(path: Path) -> pd.DataFrame:
    """The canonical events that features and labels need (jobaware.hold.bundle.as_events), with the origin
    columns (source, by_user, job_ad) that jobaware.hold.groups reads."""
    frame = pq.read_table(path, columns=EVENT_COLUMNS, read_dictionary=["source"]).to_pandas(self_destruct=True)
    events = as_events(frame)
    for column in ORIGIN_COLUMNS:
        events[column] = frame[column].astype(object).to_numpy()
    return events


def load_dataset(dataset_dir: str | Path, p: dict, truth: str | Path | None = None) -> Dataset:
    """Events by log, their holds with labels, origins and roles (`eval`, `extra` or ''), and the truth."""
    events = read_events_table(events_file(dataset_dir))
    logs, tables = [], []
    for name, part in groups.by_log(events).items():
        table = groups.log_holds(part, name, p["nonzero_exit_is_failure"])
        if len(table):
            logs.append(Log(name, part, F.build_index(part), np.zeros(0, np.int64)))
            tables.append(table)
    if not tables:
        raise JobawareError("cannot train: the logs hold no hold (012) event")
    table = pd.concat(tables, ignore_index=True)
    table["y_release"] = (table["label"] == "release").fillna(False).to_numpy(dtype=int)
    generated = table["generated"].to_numpy(bool)
    ended = table["label"].notna().to_numpy()
    recent = np.zeros(len(table), bool)
    recent[table.index[generated].to_numpy()[np.argsort(table.loc[generated, "hold_time"].to_numpy(),
                                                       kind="stable")][-p["max_decisions"]:]] = True
    real_ended = ended & ~generated
    real = real_ended.sum() >= p["min_real_holds"] and table.loc[real_ended, "workflow"].nunique() >= 2
    role = np.full(len(table), "", dtype=object)
    if real:
        role[real_ended] = "eval"
        role[generated & recent] = "extra"
    else:
        role[ended & (recent | ~generated)] = "eval"
    table["role"] = role
    start = 0
    for log, part in zip(logs, tables):
        log.rows = np.arange(start, start + len(part))
        start += len(part)
    known = None
    if truth is not None:
        truth_table = pd.read_parquet(truth)
        keyed = truth_table.set_index(["cluster", "proc", "hold_index"])["p_release"]
        keyed = keyed[~keyed.index.duplicated()]
        known = keyed.reindex(pd.MultiIndex.from_frame(table[["cluster", "proc", "hold_index"]])).to_numpy(float)
        known = np.where(generated, known, np.nan)
    return Dataset(logs, table, bool(real), known)


def trained_on(dataset_dir: str | Path, data: Dataset, decided_by: str) -> dict:
    """What a model of this dataset learns from and was measured on: `source` (`synthetic` when every log read
    was generated by jobaware.hold.synth, `real` when none was, else `mixed`), the labelled holds, the real ended
    holds, the workflows and logs, `evaluated_on` (`real` or `generated`) and the decision-maker it serves. The
    follower acts only on a model evaluated on real holds (adapters/htcondor)."""
    files = read_stats(events_file(dataset_dir)).get("files", [])
    generated = [truth_path(f).exists() for f in files]
    source = "unrecorded" if not files else "synthetic" if all(generated) else "real" if not any(generated) \
        else "mixed"
    table = data.table
    real_ended = table["label"].notna() & ~table["generated"]
    return {"source": source, "labelled_holds": int(table["label"].notna().sum()),
            "real_holds": int(real_ended.sum()), "workflows": int(table.loc[table["role"] == "eval", "workflow"].nunique()),
            "logs": len(files), "evaluated_on": "real" if data.real else "generated", "decided_by": decided_by}


# ---------------------------------------------------------------- features and fits
@dataclass
class Features:
    states: np.ndarray  # (n, m, j) uint8, rows of Dataset.table (zeros where unused)
    counts: pd.DataFrame  # COUNT_FEATURES, rows of Dataset.table
    static: np.ndarray  # (n, 3): hold code, subcode, earlier holds


def build_features(data: Dataset, p: dict, used: np.ndarray) -> Features:
    """Tensors and counts of the holds `used` (a mask over Dataset.table), each log on its own."""
    n = len(data.table)
    states = np.zeros((n, p["m"], p["j"]), np.uint8)
    counts = pd.DataFrame(0.0, index=range(n), columns=list(F.COUNT_FEATURES))
    for log in data.logs:
        rows = log.rows[used[log.rows]]
        if not len(rows):
            continue
        part = data.table.iloc[rows]
        states[rows] = F.build_tensors(log.index, part, p["m"], p["j"], p["timeframe_len"], p["seed"])
        counts.iloc[rows] = F.count_features(log.index, part).to_numpy(float)
    return Features(states, counts, F.static_features(data.table).to_numpy())


@dataclass
class TrainingSet:
    rows: np.ndarray  # positions in Dataset.table
    target: np.ndarray  # P(release): 0/1 for real holds, the fitted chance for generated ones
    weight: np.ndarray


def training_set(data: Dataset, real_rows: np.ndarray, w: float) -> TrainingSet:
    """The real training holds (each workflow weighing the same, in all as many as they are) and, with w > 0,
    the extra holds, weighing w times as much in all, their targets from outcomes fitted on the real holds of
    the training workflows only."""
    table = data.table
    y = table["y_release"].to_numpy(float)[real_rows]
    real_weight = D.weights(table["workflow"].to_numpy()[real_rows])
    real_weight *= len(real_rows) / real_weight.sum()
    extra = data.rows("extra")
    if w <= 0 or not len(extra):
        return TrainingSet(real_rows, y, real_weight)
    workflows = set(table["workflow"].to_numpy()[real_rows])
    known = table[~table["generated"] & table["workflow"].isin(workflows)]
    fitted = outcomes.fit(known, intervals=False)
    target = fitted.p_release(table["hold_code"].to_numpy()[extra], table["hold_subcode"].to_numpy()[extra])
    extra_weight = np.full(len(extra), w * real_weight.sum() / len(extra))
    return TrainingSet(np.r_[real_rows, extra], np.r_[y, target], np.r_[real_weight, extra_weight])


@dataclass
class Fitted:
    network: HoldNetwork | None = None
    encoder: StaticEncoder | None = None
    history: list = field(default_factory=list)
    tree: TreeBaseline | None = None


def fit_network(feats: Features, train: TrainingSet, p: dict) -> Fitted:
    encoder = StaticEncoder().fit(feats.static[train.rows])
    with torch.random.fork_rng(devices=[]):  # seeded, without touching the caller's random state
        torch.manual_seed(p["seed"])
        network = HoldNetwork(p["network"], p["j"], encoder.width, p["embedding_dim"], p["hidden_size"],
                              p["layers"], p["dropout"])
        result = fit(network, feats.states[train.rows], encoder.transform(feats.static[train.rows]), train.target,
                     train.weight, p)
    return Fitted(network=result.network, encoder=encoder, history=result.history)


def fit_tree(feats: Features, train: TrainingSet, p: dict) -> Fitted:
    """The trees on hard labels: a soft target t enters twice, as release weighing t and remove weighing 1-t."""
    x = feats.counts.iloc[train.rows]
    hard = np.isin(train.target, (0.0, 1.0))
    soft = ~hard
    xs = pd.concat([x[hard], x[soft], x[soft]], ignore_index=True)
    ys = np.r_[train.target[hard], np.ones(soft.sum()), np.zeros(soft.sum())].astype(int)
    ws = np.r_[train.weight[hard], train.weight[soft] * train.target[soft], train.weight[soft] * (1 - train.target[soft])]
    tree = TreeBaseline(p["gbt_max_iter"], p["gbt_learning_rate"], p["seed"]).fit(xs, ys, ws)
    return Fitted(tree=tree)


def network_scores(fitted: Fitted, feats: Features, rows: np.ndarray) -> np.ndarray:
    return predict_proba(fitted.network, feats.states[rows], fitted.encoder.transform(feats.static[rows]))


# ---------------------------------------------------------------- cross-validation
@dataclass
class CrossValidation:
    rows: np.ndarray  # the evaluation holds (positions in Dataset.table)
    folds: np.ndarray  # fold of each
    y: np.ndarray
    groups: np.ndarray  # workflow of each
    weights: list[float]
    scores: dict = field(default_factory=dict)  # (model, w) -> out-of-fold score of each evaluation hold


def fold_of(data: Dataset, p: dict) -> CrossValidation:
    rows = data.rows("eval")
    workflow = data.table["workflow"].to_numpy()[rows]
    n_groups = len(np.unique(workflow))
    if n_groups < 2:
        raise JobawareError(f"cannot evaluate: {len(rows)} ended holds in {n_groups} workflow(s); the cross-validation "
                            "needs two workflows or more (more logs, or logs of more submitters)")
    folds = np.empty(len(rows), np.int64)
    n_splits = n_groups if p["folds"] == 0 else min(p["folds"], n_groups)
    for k, (_, test) in enumerate(GroupKFold(n_splits=n_splits).split(rows, groups=workflow)):
        folds[test] = k
    weights = list(p["synthetic_weights"]) if data.real and len(data.rows("extra")) else [0.0]
    return CrossValidation(rows, folds, data.table["y_release"].to_numpy()[rows], workflow, weights)


def cross_validate(data: Dataset, feats: Features, cv: CrossValidation, p: dict, models: tuple[str, ...]) -> None:
    """Out-of-fold scores of `models` ("lstm", "gbt") at every weight, into `cv.scores`."""
    for model in models:
        for w in cv.weights:
            cv.scores[(model, w)] = np.full(len(cv.rows), np.nan)
    progress = Progress(len(np.unique(cv.folds)) * len(cv.weights), "fits (workflows held out x weights)")
    for k in np.unique(cv.folds):
        held_out = cv.folds == k
        for w in cv.weights:
            progress.advance()
            train = training_set(data, cv.rows[~held_out], w)
            if "lstm" in models:
                cv.scores[("lstm", w)][held_out] = network_scores(fit_network(feats, train, p), feats, cv.rows[held_out])
            if "gbt" in models:
                fitted = fit_tree(feats, train, p)
                cv.scores[("gbt", w)][held_out] = fitted.tree.predict_proba(feats.counts.iloc[cv.rows[held_out]])


def calibrated(cv: CrossValidation, model: str, w: float) -> np.ndarray:
    """Out-of-fold calibrated P(release) of a learned decision-maker at weight w."""
    scores = np.column_stack([cv.scores[("lstm", w)], cv.scores[("gbt", w)]]) if model == "blend" \
        else cv.scores[(model, w)]
    return D.cross_fit(scores, cv.y, D.weights(cv.groups), cv.folds)


def learned_results(cv: CrossValidation, wrong_remove_cost: float) -> tuple[dict, dict, dict]:
    """For each learned model: its release decisions (at the weight chosen on other folds, by the mean cost by
    workflow), its calibrated P(release) at the weight chosen on all folds, and that weight."""
    release, chance, chosen = {}, {}, {}
    cut = D.threshold(wrong_remove_cost)
    models = [m for m in D.LEARNED if all((part, cv.weights[0]) in cv.scores for part in
                                          (("lstm", "gbt") if m == "blend" else (m,)))]

    def cost(decided, mask):
        return D.grouped_mean(D.costs(decided[mask], cv.y[mask], wrong_remove_cost), cv.groups[mask])

    everything = np.ones(len(cv.rows), bool)
    for model in models:
        by_w = {w: calibrated(cv, model, w) for w in cv.weights}
        release_w = {w: pw >= cut for w, pw in by_w.items()}
        best = min(cv.weights, key=lambda w: cost(release_w[w], everything))
        nested = np.zeros(len(cv.rows), bool)
        for k in np.unique(cv.folds):
            mine = cv.folds == k
            w_k = min(cv.weights, key=lambda w: cost(release_w[w], ~mine))
            nested[mine] = release_w[w_k][mine]
        release[model], chance[model], chosen[model] = nested, by_w[best], best
    return release, chance, chosen


def prior_holds(data: Dataset, leave_out=()) -> pd.DataFrame:
    """The holds the adaptive decision-makers' prior is fitted on (jobaware.hold.outcomes): the real holds, or on
    generated logs alone the evaluation holds; those of the workflows `leave_out` left out."""
    table = data.table
    mine = ~table["generated"] if data.real else table["role"] == "eval"
    return table[mine & ~table["workflow"].isin(list(leave_out))]


def fitted_prior(data: Dataset, leave_out=(), intervals: bool = False) -> outcomes.Outcomes:
    fitted = outcomes.fit(prior_holds(data, leave_out), intervals=intervals)
    fitted.fitted_on["source"] = "real" if data.real else "generated"
    return fitted


def adaptive_chances(data: Dataset, feats: Features, cv: CrossValidation, p: dict) -> dict[str, np.ndarray]:
    """Out-of-fold P(release) of the adaptive decision-makers (jobaware.hold.adaptive): for each fold, the prior
    fitted on the other folds' workflows only."""
    rule = PolicyRule(tuple(p["policy_codes"]), p["policy_max_releases"])
    out = {name: np.zeros(len(cv.rows)) for name in ADAPTIVE}
    for k in np.unique(cv.folds):
        mine = cv.folds == k
        fitted = fitted_prior(data, set(cv.groups[mine]))
        strength = adaptive.workflow_strength(cv.y[~mine], cv.groups[~mine])
        counts = feats.counts.iloc[cv.rows[mine]]
        for name in ADAPTIVE:
            out[name][mine] = adaptive.chances(name, counts, fitted, strength, rule)
    return out


def plain_chances(data: Dataset, rows: np.ndarray, p: dict) -> dict[str, np.ndarray]:
    static = F.static_features(data.table.iloc[rows])
    return {"release_all": np.ones(len(rows)), "remove_all": np.zeros(len(rows)),
            "site_rule": PolicyRule(tuple(p["policy_codes"]), p["policy_max_releases"]).predict_proba(static)}


# ---------------------------------------------------------------- the trial of a sweep, and training
def run_trial(dataset_dir: str | Path, trial_params: dict, truth: str | Path | None = None) -> dict[str, float]:
    """One sweep trial: the network's cross-validation on the evaluation holds; `validation_primary` (what
    `best_trial` compares) is minus its weighted log-loss out of fold (calibrated, weight chosen on all folds)."""
    started = time.monotonic()
    p = check_params(trial_params)
    with threads(p["threads"]):
        data = load_dataset(dataset_dir, p, truth)
        cv = fold_of(data, p)
        cross_validate(data, build_features(data, p, data.table["role"].to_numpy() != ""), cv, p, ("lstm",))
        release, chance, chosen = learned_results(cv, p["wrong_remove_cost"])
    w = D.weights(cv.groups)
    y, q = cv.y, np.clip(chance["lstm"], 1e-4, 1 - 1e-4)
    log_loss = float(-np.average(y * np.log(q) + (1 - y) * np.log(1 - q), weights=w))
    return {"validation_primary": -log_loss, "validation_log_loss": log_loss,
            "validation_grouped_accuracy": D.grouped_accuracy(release["lstm"] == (y == 1), cv.groups),
            "synthetic_weight": float(chosen["lstm"]), "eval_holds": float(len(cv.rows)),
            "seconds": time.monotonic() - started}


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
    """Measure every decision-maker on the evaluation holds, serve the best (see the module docstring); write
    plots and the promotion gate's evaluation folder under `workdir`."""
    p = check_params(params)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with threads(p["threads"]):
        return _train(dataset_dir, p, workdir, truth)


def _train(dataset_dir, p: dict, workdir: Path, truth) -> tuple[HoldBundle, HoldEvaluation]:
    data = load_dataset(dataset_dir, p, truth)
    cv = fold_of(data, p)
    feats = build_features(data, p, data.table["role"].to_numpy() != "")
    cross_validate(data, feats, cv, p, ("lstm", "gbt"))
    cost, cut = p["wrong_remove_cost"], D.threshold(p["wrong_remove_cost"])
    release, chance, chosen_w = learned_results(cv, cost)
    for name, p_release in (plain_chances(data, cv.rows, p) | adaptive_chances(data, feats, cv, p)).items():
        release[name], chance[name] = p_release >= cut, p_release
    candidates = (*D.PLAIN, *ADAPTIVE, *(m for m in D.LEARNED if m in release))
    rule = (cost, p["min_workflow_holds"])
    served, best_plain = D.choose(release, cv.y, cv.groups, candidates, *rule)
    release["model"], per_fold = D.nested(release, cv.y, cv.groups, cv.folds, candidates, *rule)
    names = ("model", *candidates)
    right = {n: release[n] == (cv.y == 1) for n in names}
    paid = {n: D.costs(release[n], cv.y, cost) for n in names}
    samples = D.bootstrap(right, cv.groups, p["bootstrap"], p["seed"])
    cost_samples = D.bootstrap(paid, cv.groups, p["bootstrap"], p["seed"])
    metrics = {n: _scores(right[n], paid[n], cv.groups, samples[n], cost_samples[n],
                          D.standing(release[n], cv.y, cv.groups, *rule)) for n in names}
    for name in candidates:
        if name not in D.PLAIN and len(np.unique(cv.y)) == 2:
            metrics[name]["roc_auc"] = float(roc_auc_score(cv.y, chance[name], sample_weight=D.weights(cv.groups)))
    learned = [m for m in candidates if m in D.LEARNED]
    best_learned = min(learned, key=lambda m: (metrics[m]["cost"], metrics[m]["worst_cost"])) if learned else None
    for key, name in (("margin", "model"), ("learned_margin", best_learned)):
        if name is not None:
            diff = samples[name] - samples[best_plain]
            low, high = D.interval(diff)
            metrics["model"].update({key: float(np.mean(diff)), f"{key}_low": low, f"{key}_high": high})
    saved = cost_samples[best_plain] - cost_samples["model"]
    low, high = D.interval(saved)
    metrics["model"].update({"cost_margin": float(np.mean(saved)), "cost_margin_low": low, "cost_margin_high": high})
    if data.truth is not None and np.isfinite(data.truth[cv.rows]).any():
        oracle = np.nan_to_num(data.truth[cv.rows], nan=0.5) >= cut
        oracle_right, oracle_cost = oracle == (cv.y == 1), D.costs(oracle, cv.y, cost)
        drawn = D.bootstrap({"right": oracle_right, "cost": oracle_cost}, cv.groups, p["bootstrap"], p["seed"])
        metrics["oracle"] = _scores(oracle_right, oracle_cost, cv.groups, drawn["right"], drawn["cost"],
                                    D.standing(oracle, cv.y, cv.groups, *rule))
    bundle, history = _served_bundle(data, feats, cv, p, served, chosen_w.get(served, 0.0), metrics, best_plain,
                                     dataset_dir)
    selection = {
        "served": served, "best_plain": best_plain, "best_learned": best_learned, "evaluated_on":
        "real" if data.real else "generated", "holds": int(len(cv.rows)), "workflows": int(len(np.unique(cv.groups))),
        "folds": int(len(np.unique(cv.folds))), "chosen_per_fold": per_fold, "synthetic_weight": chosen_w,
        "wrong_remove_cost": cost, "min_workflow_holds": p["min_workflow_holds"], "prior_strength":
        bundle.prior_strength, "why": bundle.why, "by_workflow": _by_workflow(cv, right, paid, names),
    }
    made = plots(cv.y, {m: chance[m] for m in candidates if m not in D.PLAIN}, chance.get(served), metrics, served,
                 history, workdir / "plots", cut)
    eval_dir = write_eval(data, cv.rows, workdir / "eval")
    (workdir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    codes = outcomes.table(bundle.outcomes_fitted()).to_dict(orient="records") if bundle.outcomes else []
    return bundle, HoldEvaluation(metrics=metrics, plots=made, eval_dir=eval_dir, history=history,
                                  documents={"selection": selection, "outcomes_by_code": codes},
                                  run_params={"decided_by": served, "evaluated_on": selection["evaluated_on"]})


def _scores(right: np.ndarray, paid: np.ndarray, groups_: np.ndarray, samples: np.ndarray, cost_samples: np.ndarray,
            standing: D.Standing) -> dict[str, float]:
    low, high = D.interval(samples)
    cost_low, cost_high = D.interval(cost_samples)
    return {"grouped_accuracy": D.grouped_accuracy(right, groups_), "low": low, "high": high,
            "worst_accuracy": standing.worst_accuracy, "accuracy": float(np.mean(right)) if len(right) else
            float("nan"), "right": float(np.sum(right)), "holds": float(len(right)),
            "workflows": float(len(np.unique(groups_))), "cost": D.grouped_mean(paid, groups_), "cost_low": cost_low,
            "cost_high": cost_high, "worst_cost": standing.worst_cost, "pooled_cost": float(np.mean(paid)),
            "admissible": float(standing.admissible)}


def _by_workflow(cv: CrossValidation, right: dict, paid: dict, names) -> list[dict]:
    rows = []
    for name in np.unique(cv.groups):
        mine = cv.groups == name
        rows.append({"workflow": str(name), "holds": int(mine.sum()), "release": int(cv.y[mine].sum()),
                     **{m: int(right[m][mine].sum()) for m in names},
                     **{f"{m}_cost": float(np.mean(paid[m][mine])) for m in names}})
    return rows


def _why(served: str, best_plain: str, metrics: dict, data: Dataset, p: dict) -> str:
    m = metrics
    where = (f"{int(m['model']['holds'])} {'real' if data.real else 'generated'} ended holds in "
             f"{int(m['model']['workflows'])} workflows, each held out whole")
    rule = (f"of those never worse than release-all on a workflow of {p['min_workflow_holds']}+ holds, the lowest "
            f"cost by workflow (a wrong removal = {p['wrong_remove_cost']:g} wrong releases), then the worst "
            f"workflow's; ties to the pool's evidence, then the plain policy")
    others = ", ".join(f"{n} {m[n]['grouped_accuracy']:.2f}/{m[n]['cost']:.2f}" for n in m
                       if n not in ("model", served, "oracle"))
    lead = "the best plain policy" if served == best_plain else f"not worse than the best plain policy ({best_plain})"
    return (f"{served} ({D.DESCRIBED[served]}): {lead} by the rule ({rule}); right on "
            f"{m[served]['grouped_accuracy']:.2f} of holds by workflow [{m[served]['low']:.2f}, {m[served]['high']:.2f}], "
            f"worst workflow {m[served]['worst_accuracy']:.2f}, cost {m[served]['cost']:.2f} per hold, worst "
            f"{m[served]['worst_cost']:.2f}, on {where}; others (right by workflow/cost): {others}")


def _served_bundle(data: Dataset, feats: Features, cv: CrossValidation, p: dict, served: str, w: float, metrics: dict,
                   best_plain: str, dataset_dir) -> tuple[HoldBundle, list]:
    """The bundle that serves `served`: a learned model refitted on all the data at weight w and calibrated out
    of fold; the adaptive ones' prior fitted on all the (real) holds."""
    prior = prior_holds(data)
    bundle = HoldBundle(params=dict(p), decided_by=served, why=_why(served, best_plain, metrics, data, p),
                        scores={n: dict(v) for n, v in metrics.items()},
                        outcomes=fitted_prior(data, intervals=True).as_dict() if len(prior) else {},
                        prior_strength=adaptive.workflow_strength(cv.y, cv.groups),
                        example=example_rows(data.logs[-1].events, data.table.iloc[data.logs[-1].rows]),
                        trained_on=trained_on(dataset_dir, data, served))
    history: list = []
    if served in D.LEARNED:
        train_all = training_set(data, cv.rows, w)
        if served in ("lstm", "blend"):
            net = fit_network(feats, train_all, p)
            bundle.network_state = {k: v.clone() for k, v in net.network.state_dict().items()}
            bundle.static_pairs, history = net.encoder.pairs, net.history
        if served in ("gbt", "blend"):
            bundle.tree = fit_tree(feats, train_all, p).tree
        scores = np.column_stack([cv.scores[("lstm", w)], cv.scores[("gbt", w)]]) if served == "blend" \
            else cv.scores[(served, w)]
        bundle.calibrator = D.Calibrator().fit(scores, cv.y, D.weights(cv.groups))
        bundle.synthetic_weight = w
    return bundle, history


def write_eval(data: Dataset, rows: np.ndarray, eval_dir: Path) -> Path:
    """The gate's evaluation data: the evaluation holds, and the events of their logs (with a `log` column)."""
    eval_dir.mkdir(parents=True, exist_ok=True)
    table = data.table.iloc[rows]
    wanted = set(table["log"])
    parts = [log.events.drop(columns=list(ORIGIN_COLUMNS)).assign(log=log.name) for log in data.logs
             if log.name in wanted]
    pd.concat(parts, ignore_index=True).to_parquet(eval_dir / "events.parquet", index=False)
    table[["cluster", "proc", "subproc", "hold_seq", "hold_time", "label", "workflow", "log"]].to_parquet(
        eval_dir / "decisions.parquet", index=False)
    return eval_dir


def score(bundle: HoldBundle, eval_dir: str | Path) -> tuple[float, int]:
    """The primary metric (`cost`, jobaware.hold.capability.PRIMARY_METRIC: the mean cost per hold with every
    workflow weighing the same, jobaware.hold.deciders) of any bundle on a stored evaluation folder, and its number
    of holds."""
    eval_dir = Path(eval_dir)
    events = pd.read_parquet(eval_dir / "events.parquet")
    wanted = pd.read_parquet(eval_dir / "decisions.parquet")
    if len(wanted) == 0:
        return float("nan"), 0
    decided = []
    for _, part in events.groupby("log", sort=False):
        part = part.drop(columns=["log"])
        decided.append(bundle.predict(part.assign(decide=part["seq"].isin(wanted["hold_seq"]))))
    merged = wanted.merge(pd.concat(decided)[["hold_seq", "decision"]], on="hold_seq", how="left")
    p = check_params(bundle.params)
    standing = D.standing((merged["decision"] == "release").to_numpy(), (merged["label"] == "release").to_numpy(),
                          merged["workflow"].to_numpy(), p["wrong_remove_cost"], p["min_workflow_holds"])
    return standing.cost, len(merged)
