"""Featurize, fit and evaluate the failure model against its baselines on one time-ordered split.

`train` is the pipeline's training step over a canonical dataset folder (the feature table written and read part
by part, in bounded memory); `train_in_memory` chains the same functions over a job table in memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sklearn.inspection import permutation_importance
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_limits

from jobaware.errors import JobawareError
from jobaware.failure import public
from jobaware.failure.bundle import FailureBundle
from jobaware.failure.evaluate import auc_difference, metrics, plots
from jobaware.failure.features import CATEGORICAL, FEATURES, NUMERIC, Featurizer, build_features, labels
from jobaware.failure.model import FailureModel, baselines, rare_kinds_as_failed, time_split
from jobaware.failure.params import check_params
from jobaware.failure.schema import OUTCOMES, jobs_table
from jobaware.failure.synth import TRUTH_FOR_SCORES, bayes_scores, truth_path
from jobaware.fit import PUBLIC_SUFFIX, public_traces
from jobaware.jobtable.common import to_canonical_dtypes
from jobaware.jobtable.schema import COLUMNS
from jobaware.model import Evaluation
from jobaware.progress import Progress, from_prints
from jobaware.steps import READ_REPORT

IMPORTANCE_ROWS = 2000
BASELINE_ROWS = 50_000  # training jobs the baselines are fitted on, at most


def featurize(jobs: pd.DataFrame, test_fraction: float = 0.3) -> pd.DataFrame:
    """Features of every job plus its label and its side of the time split ('train', 'test' or '')."""
    jobs = jobs.sort_values("submit_time", kind="stable").reset_index(drop=True)
    split = time_split(jobs, test_fraction)
    table = _labelled(jobs, build_features(jobs), split.cut)
    table.attrs["split_time"] = str(split.cut)
    return table


def _labelled(jobs: pd.DataFrame, features: pd.DataFrame, cut: pd.Timestamp | None, site: str = "") -> pd.DataFrame:
    """`features` of `jobs` with job_id in front, then the label, the side of the split at `cut` (None: every
    labelled job is a training job) and the site the jobs come from ("": the site's own)."""
    label = labels(jobs).to_numpy()
    if cut is None:
        side = np.full(len(jobs), "train")
    else:
        side = np.where((jobs["submit_time"] < cut) & (jobs["end_time"] < cut), "train",
                        np.where(jobs["submit_time"] >= cut, "test", ""))
    features.insert(0, "job_id", jobs["job_id"].to_numpy())
    features["label"] = label
    features["split"] = np.where(pd.isna(label), "", side)
    features["site"] = site
    return features


WINDOW_JOBS = 500_000
_OUTPUT = pa.schema([("job_id", pa.int64()), *((f, pa.float64()) for f in NUMERIC),
                     *((f, pa.string()) for f in CATEGORICAL), ("label", pa.string()), ("split", pa.string()),
                     ("site", pa.string())])


def featurize_file(jobs_table: Path, out: Path, test_fraction: float = 0.3, window: int = WINDOW_JOBS,
                   public_table: Path | None = None) -> int:
    """`featurize` of a canonical job table (Parquet) into `out` (Parquet), window by window in submit order: the
    same rows, in the same order, as `featurize` of the whole table, in memory that depends on the window and the
    number of entities. A table of public traces (with `site`) is featurized site by site, each split at its own
    time. With `public_table`, the public traces' labelled jobs follow the site's own, all on the training side.
    Returns the number of training rows."""
    with pq.ParquetWriter(out, _OUTPUT) as writer:
        if public.is_public(jobs_table):
            rows = sum(_featurize_windows(jobs_table, writer, test_fraction, window, site)
                       for site in public.site_names(jobs_table))
        else:
            rows = _featurize_windows(jobs_table, writer, test_fraction, window)
        if public_table is not None:
            rows += sum(_featurize_windows(public_table, writer, None, window, site)
                        for site in public.site_names(public_table))
    return rows


def _featurize_windows(jobs_table: Path, writer: pq.ParquetWriter, test_fraction: float | None, window: int,
                       site: str = "") -> int:
    """Write the features of one site's jobs (`site` of a public table, else the whole table) window by window;
    the number of training rows. Without `test_fraction` every labelled job is a training job."""
    chosen = [("site", "==", site)] if site else []
    submit = np.sort(pq.read_table(jobs_table, columns=["submit_time"], filters=chosen or None)["submit_time"]
                     .cast(pa.timestamp("s")).to_numpy().astype(np.int64), kind="stable")
    if not len(submit):
        raise JobawareError(f"{jobs_table}: no jobs to featurize")
    cut = None if test_fraction is None else pd.Timestamp(submit[int(len(submit) * (1 - test_fraction))], unit="s")
    bounds = [*np.unique(submit[::window]).tolist(), int(submit[-1]) + 1]  # whole submit seconds per window
    featurizer, train_rows = Featurizer(), 0
    for low, high in zip(bounds, bounds[1:], strict=False):
        jobs = pd.read_parquet(jobs_table, columns=list(COLUMNS), filters=[
            *chosen, ("submit_time", ">=", pd.Timestamp(low, unit="s")), ("submit_time", "<", pd.Timestamp(high, unit="s"))])
        jobs = to_canonical_dtypes(jobs).sort_values("submit_time", kind="stable").reset_index(drop=True)
        table = _labelled(jobs, featurizer.window(jobs), cut, site)
        train_rows += int((table["split"] == "train").sum())
        writer.write_table(pa.Table.from_pandas(table, schema=_OUTPUT, preserve_index=False))
    return train_rows


PART_ROWS = 100_000  # a part of a feature file: about 110 MB of features, whatever the row groups hold


class FeatureTable:
    """`featurize`'s output, in memory or in a Parquet file (`featurize_file`'s), read part by part in time order,
    so that fitting on a sample and evaluating every test job need memory for a part, not for the table."""

    def __init__(self, source: pd.DataFrame | str | Path, part_rows: int = PART_ROWS):
        self.source, self.part_rows = source, part_rows

    def side(self, side: str, keep: Callable[[int], np.ndarray] | None = None) -> Iterator[pd.DataFrame]:
        """The jobs on one side of the split ('train' or 'test'), part by part; `keep(n)`, when given, thins each
        part's n jobs (a mask). A file's rows are chosen in Arrow before any is turned into pandas."""
        if isinstance(self.source, pd.DataFrame):
            rows = self.source[self.source["split"] == side]
            yield rows[keep(len(rows))] if keep else rows
            return
        # no pre-buffering: it holds whole row groups' column chunks (at 11 M jobs, 2.6 GiB against 1.3 GiB)
        for batch in pq.ParquetFile(self.source, pre_buffer=False).iter_batches(batch_size=self.part_rows):
            rows = batch.filter(pc.equal(batch["split"], side))
            yield (rows.filter(pa.array(keep(rows.num_rows))) if keep else rows).to_pandas()
        pa.default_memory_pool().release_unused()  # what Arrow's allocator kept of the parts goes back now

    def count(self, side: str) -> int:
        """How many jobs are on one side of the split."""
        if isinstance(self.source, pd.DataFrame):
            return int((self.source["split"] == side).sum())
        return int(pc.sum(pc.equal(pq.read_table(self.source, columns=["split"])["split"], side)).as_py() or 0)


def training_sample(table: FeatureTable, max_rows: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    """The training jobs a model is fitted on: every one when there are at most `max_rows`; else each is kept with
    probability max_rows / (training jobs), by one uniform draw per training job in time order from a generator
    seeded with `seed` (the same jobs however the table is cut into parts)."""
    share = min(1.0, max_rows / max(table.count("train"), 1))
    draws = np.random.default_rng(seed)
    xs, ys = [], []
    for rows in table.side("train", (lambda n: draws.random(n) < share) if share < 1.0 else None):
        xs.append(rows[[*FEATURES, "site"]])
        ys.append(rows["label"])
    x, y = pd.concat(xs, ignore_index=True), pd.concat(ys, ignore_index=True)
    xs, ys, rows = None, None, None
    pa.default_memory_pool().release_unused()  # the parts were Arrow's memory: it goes back before fitting
    return x, y


def fit(table: pd.DataFrame | FeatureTable, history: pd.DataFrame, params: dict | None = None,
        trained_on: dict | None = None) -> FailureBundle:
    """Fit the calibrated model on the training sample (on the portable features alone where public traces are
    among its jobs); bundle it with the job history live features need (`FailureBundle.history_tail` of the jobs,
    or `history_tail_file` of their table) and what it was trained on."""
    p = check_params(params or {})
    x, y = training_sample(_table(table), p["max_train_rows"], p["seed"])
    portable = bool((x["site"] != "").any())
    with threadpool_limits(p["threads"], user_api="openmp"):
        model = FailureModel(params=p, portable=portable).fit(x, y, validation_period(x["site"], p["calibration_fraction"]))
    return FailureBundle(model=model, history=history, trained_on=trained_on or {})


def validation_period(sites: pd.Series, fraction: float) -> np.ndarray:
    """The training jobs the calibrator and the operating threshold are fitted on: the last `fraction` of each
    site's, in time order; where the site's own jobs (site "") are among them, the last `fraction` of those alone
    (the public traces then only widen what the trees learn from)."""
    sites = sites.to_numpy(dtype=object)
    own = sites == ""
    chosen = np.zeros(len(sites), dtype=bool)
    for site in ([""] if own.any() else pd.unique(sites)):
        rows = np.flatnonzero(sites == site)
        chosen[rows[int(len(rows) * (1 - fraction)):]] = True
    return chosen


def _table(table: pd.DataFrame | FeatureTable) -> FeatureTable:
    return table if isinstance(table, FeatureTable) else FeatureTable(table)


@dataclass(kw_only=True)
class FailureEvaluation(Evaluation):
    test_features: pd.DataFrame  # the gate's evaluation data: every test job, or a seeded sample of GATE_ROWS
    test_labels: pd.Series


def _importance(model: FailureModel, x: pd.DataFrame, y: pd.Series, seed: int) -> pd.Series:
    target = (y.astype(str) != "COMPLETED").astype(int)
    if target.nunique() < 2:
        return pd.Series(dtype=float)

    def auc(_, frame, target_):
        return roc_auc_score(target_, model.predict_proba(pd.DataFrame(frame, columns=x.columns))["p_fail"])

    scores = permutation_importance(model, x, target, scoring=auc, n_repeats=2, random_state=seed)
    return pd.Series(scores.importances_mean, index=x.columns)


GATE_ROWS = 200_000


def evaluate(bundle: FailureBundle, table: pd.DataFrame | FeatureTable, params: dict | None = None,
             truth: pd.DataFrame | None = None, plot_dir: Path | None = None) -> FailureEvaluation:
    """Score the model and, in the same run, the baselines (fitted on the model's training sample, or a seeded
    share of BASELINE_ROWS of it) on every test job, part by part; the model (and the majority baseline) also at the model's operating threshold, beside the
    accuracy of always answering the training sample's more common outcome (`majority_accuracy`). The gate keeps
    every test job, or a seeded sample of GATE_ROWS of them; the feature importance is measured on a seeded
    sample of IMPORTANCE_ROWS."""
    p = check_params(params or {})
    with threadpool_limits(p["threads"], user_api="openmp"):
        return _evaluate(bundle, table, p, truth, plot_dir)


def _evaluate(bundle: FailureBundle, table: pd.DataFrame | FeatureTable, p: dict, truth: pd.DataFrame | None,
              plot_dir: Path | None) -> FailureEvaluation:
    table = _table(table)
    tests = table.count("test")
    if tests == 0:
        raise JobawareError("no labelled jobs after the split time; use more data or a larger test_fraction")
    x_train, y_train = training_sample(table, p["max_train_rows"], p["seed"])
    fit_rows, majority_fails = len(y_train), float(np.mean(y_train.astype(str) != "COMPLETED")) > 0.5
    if len(y_train) > BASELINE_ROWS:  # the baselines are references: a seeded share of the sample is enough
        kept = np.sort(np.random.default_rng(p["seed"]).permutation(len(y_train))[:BASELINE_ROWS])
        x_train, y_train = x_train.iloc[kept], y_train.iloc[kept]
    y_train = pd.Series(rare_kinds_as_failed(y_train.astype(str).to_numpy()), index=y_train.index)
    scorers = {"model": bundle.model, **{name: baseline.fit(x_train, y_train)
                                         for name, baseline in baselines(p["seed"]).items()}}
    del x_train
    order = np.random.default_rng(p["seed"]).permutation(tests)
    wanted = {"importance": order[:IMPORTANCE_ROWS], "gate": np.sort(order[:GATE_ROWS])}
    kept = {name: ([], [], []) for name in wanted}  # per part: positions, features, labels
    probabilities = {name: [] for name in scorers}
    labels, job_ids, seen = [], [], 0
    for rows in table.side("test"):
        x, y = rows[list(FEATURES)].reset_index(drop=True), rows["label"].reset_index(drop=True)
        if not len(y):
            continue
        for name, scorer in scorers.items():
            probabilities[name].append(scorer.predict_proba(x))
        for name, positions in wanted.items():
            mine = positions[(positions >= seen) & (positions < seen + len(y))]
            kept[name][0].append(mine)
            kept[name][1].append(x.iloc[mine - seen])
            kept[name][2].append(y.iloc[mine - seen])
        labels.append(y)
        job_ids.append(rows["job_id"].to_numpy())
        seen += len(y)
    y_test = pd.concat(labels, ignore_index=True)
    bayes = None
    if truth is not None:
        scores = bayes_scores(truth).drop_duplicates("job_id").set_index("job_id")["p_fail"]
        bayes = scores.reindex(np.concatenate(job_ids)).to_numpy()
    proba = {name: pd.concat(parts, ignore_index=True) for name, parts in probabilities.items()}
    threshold = bundle.threshold
    results = {"model": metrics(y_test, proba["model"], bayes, threshold)}
    # the majority baseline answers one class whatever the threshold: its figures at the model's are its own
    results.update({name: metrics(y_test, proba[name], threshold=threshold if name == "majority" else None)
                    for name in scorers if name != "model"})
    results["model"].update(train_rows=table.count("train"), fit_rows=fit_rows, test_rows=len(y_test),
                            calibrated=float(bundle.model.calibrated),
                            majority_accuracy=float(np.mean((y_test.astype(str) != "COMPLETED") == majority_fails)))
    sample = {}
    for name, (positions, xs, ys) in kept.items():  # the rows in the order drawn
        at = pd.Index(np.concatenate(positions)).get_indexer(wanted[name])
        sample[name] = (pd.concat(xs).iloc[at].reset_index(drop=True), pd.concat(ys).iloc[at].reset_index(drop=True))
    importance = _importance(bundle.model, *sample["importance"], p["seed"])
    made = plots(y_test, proba["model"], plot_dir, importance) if plot_dir else []
    return FailureEvaluation(metrics=results, test_features=sample["gate"][0], test_labels=sample["gate"][1], plots=made,
                             documents={"feature_importance": importance.sort_values(ascending=False).to_dict()},
                             operating=bundle.model.operating or {})


def train(dataset_dir: str | Path, params: dict | None, workdir: str | Path,
          truth: str | Path | None = None) -> tuple[FailureBundle, FailureEvaluation]:
    """Featurize the dataset's job table into `workdir` window by window (with the public traces' jobs where
    `public_data` asks for them), fit on the training sample, evaluate model and baselines on the later jobs
    (against the generator's truth: `truth`, else the one beside a single generated source); writes `workdir/eval/`
    (the gate's data) and `workdir/plots/`. A table of public traces trains the public-trace model, which carries
    no history: it serves sites whose jobs it has never seen."""
    p = check_params(params or {})
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    phases = Progress(3, "phases: features, the model, its evaluation")
    jobs = jobs_table(dataset_dir)
    truth = truth or _truth_beside(Path(dataset_dir))
    generated = truth is not None and Path(truth).is_file()
    features = FeatureTable(workdir / "features.parquet")
    extra = None if public.is_public(jobs) else _public_beside(Path(dataset_dir), p["public_data"], generated, workdir)
    featurize_file(jobs, features.source, p["test_fraction"], public_table=extra)
    phases.advance()
    if public.is_public(jobs):
        history = FailureBundle.history_tail(to_canonical_dtypes(pd.DataFrame()))
    else:
        history = FailureBundle.history_tail_file(jobs)
    with from_prints(r"^\[(\d+)/(\d+)\]", "boosting iterations (at most: early stopping)"):
        bundle = fit(features, history, p, trained_on(jobs, extra))
    phases.advance()
    truth_table = pd.read_parquet(truth, columns=TRUTH_FOR_SCORES) if generated else None
    evaluation = evaluate(bundle, features, p, truth_table, workdir / "plots")
    phases.advance()
    evaluation.run_params = {"rows": pq.ParquetFile(jobs).metadata.num_rows}
    write_eval(evaluation, workdir / "eval")
    return bundle, evaluation


def _public_beside(dataset_dir: Path, choice: str, generated: bool, workdir: Path) -> Path | None:
    """The public traces' table to train beside a site's jobs (`public_data`), read into `workdir`; None for none.
    A trace the dataset was read from is left out: a site is never its own public data."""
    if choice == "none" or (choice == "auto" and generated):
        return None
    if choice == "auto" and not public.MANIFEST.is_file():  # an image without jobaware/data/real: the site's jobs alone
        print(f"public traces not here ({public.MANIFEST}): trained on this data alone")
        return None
    report = dataset_dir / READ_REPORT
    read = json.loads(report.read_text()).get("file", "").split(", ") if report.is_file() else []
    mine = {Path(source).resolve() for source in read if source and Path(source).is_file()}
    others = [t for t in public_traces(public.manifest()) if Path(t["path"]).resolve() not in mine]
    if not others:
        return None
    folder = workdir / "public"
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / f"beside{PUBLIC_SUFFIX}"
    manifest.write_text(json.dumps({"traces": others}))
    public.ingest(manifest, folder)
    return folder / f"{public.TABLE}.parquet"


def trained_on(jobs: Path, public_table: Path | None) -> dict:
    """What a model learns from: the site's own jobs, the public traces, or both (with their jobs)."""
    rows = pq.ParquetFile(jobs).metadata.num_rows
    if public.is_public(jobs):
        return {"source": "public", "traces": public.site_names(jobs), "jobs": rows}
    if public_table is None:
        return {"source": "site", "jobs": rows}
    return {"source": "site and public", "jobs": rows, "traces": public.site_names(public_table),
            "public_jobs": pq.ParquetFile(public_table).metadata.num_rows}


def _truth_beside(dataset_dir: Path) -> Path | None:
    """The generator's truth file beside the one source the dataset was read from, if there is one."""
    report = dataset_dir / READ_REPORT
    source = json.loads(report.read_text()).get("file", "") if report.is_file() else ""
    return truth_path(source) if source and Path(source).is_file() else None


def train_in_memory(jobs: pd.DataFrame, params: dict | None = None, truth: pd.DataFrame | None = None,
                    plot_dir: Path | None = None) -> tuple[FailureBundle, FailureEvaluation]:
    """featurize -> fit -> evaluate in one call, in memory (no evaluation folder: `log_trained` writes it)."""
    p = check_params(params or {})
    table = featurize(jobs, p["test_fraction"])
    bundle = fit(table, FailureBundle.history_tail(jobs), p)
    return bundle, evaluate(bundle, table, p, truth, plot_dir)


def score(bundle, eval_dir: Path) -> tuple[float, int]:
    """ROC-AUC of P(fail) of a bundle on a stored evaluation folder, and the number of labelled jobs in it."""
    features, labels = _eval_data(eval_dir)
    if len(labels) == 0:
        return float("nan"), 0
    return metrics(labels, bundle.model.predict_proba(features))["roc_auc"], len(labels)


GATE_LEVEL = 0.9  # the confidence of the gate's interval: two-sided, so 95 % that the difference is above its low end


def compare(candidate, champion, eval_dir: Path) -> dict:
    """The ROC-AUC difference (candidate - champion) on a stored evaluation folder and its GATE_LEVEL interval
    (`evaluate.auc_difference`: DeLong's, for two models scored on the same jobs)."""
    features, labels = _eval_data(eval_dir)
    failed = labels.astype(str).to_numpy() != "COMPLETED"
    found = auc_difference(failed, candidate.model.predict_proba(features)["p_fail"].to_numpy(),
                           champion.model.predict_proba(features)["p_fail"].to_numpy(), GATE_LEVEL)
    return {name: found[name] for name in ("difference", "low", "high", "level")}


def _eval_data(eval_dir: Path) -> tuple[pd.DataFrame, pd.Series]:
    """The labelled jobs of a stored evaluation folder: their features and labels."""
    features = pd.read_parquet(Path(eval_dir) / "features.parquet")
    labels = pd.read_parquet(Path(eval_dir) / "labels.parquet")["label"]
    keep = labels.notna().to_numpy()
    return features.loc[keep].reset_index(drop=True), labels.loc[keep].reset_index(drop=True)


def gate_size(dataset_dir: Path, min_rows: int, data: str) -> str | None:
    """Before training: why the dataset's test split (its last `test_fraction` of jobs by submit time, at the
    default) would hold fewer than `min_rows` completed or failed jobs, and about how many more finished jobs it
    needs at the dataset's share of such jobs; None when it holds enough. The public traces always do."""
    jobs = jobs_table(dataset_dir)
    if public.is_public(jobs):
        return None
    test_fraction = check_params({})["test_fraction"]
    table = pq.read_table(jobs, columns=["submit_time", "state"]).to_pandas().sort_values("submit_time", kind="stable")
    labelled = table["state"].isin(OUTCOMES).to_numpy()
    cut = table["submit_time"].iloc[int(len(table) * (1 - test_fraction))] if len(table) else None
    tested = int(labelled[(table["submit_time"] >= cut).to_numpy()].sum()) if len(table) else 0
    if tested >= min_rows:
        return None
    share = labelled.mean() * test_fraction if len(table) else 0.0
    more = f"about {max(int(np.ceil(min_rows / share)) - len(table), 1):,} more" if share else "more"
    return (f"the gate needs {min_rows:,} test jobs (completed or failed): {data} has {len(table):,} finished jobs, "
            f"whose test split would hold {tested:,}; {more} finished jobs are needed (the test split is the last "
            f"{test_fraction:.0%}, by submit time)")


def write_eval(evaluation: FailureEvaluation, eval_dir: Path) -> None:
    """The gate's data, the test side's features and labels, into `eval_dir`; it becomes `evaluation.eval_dir`."""
    eval_dir.mkdir(parents=True, exist_ok=True)
    evaluation.test_features.to_parquet(eval_dir / "features.parquet")
    evaluation.test_labels.to_frame("label").to_parquet(eval_dir / "labels.parquet")
    evaluation.eval_dir = eval_dir


def log_trained(bundle: FailureBundle, evaluation: FailureEvaluation, params: dict, workdir: Path) -> str:
    """Log an in-memory training result as the pipeline would (run, model, evaluation); the run id."""
    from jobaware import tracking

    write_eval(evaluation, Path(workdir) / "eval")
    return tracking.log_training("failure", params, bundle, evaluation, {"success": True})
