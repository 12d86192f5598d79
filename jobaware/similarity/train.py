"""Build the index (the `similarity` model) and evaluate it: what the pipeline's steps call.

`build` -> `SimilarityBundle`; `make_eval` writes the evaluation folder the gate re-scores on;
`evaluate` and `timings` give the metrics; `train` chains them and draws the plots.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jobaware.model import Evaluation
from jobaware.progress import Progress
from jobaware.similarity.bundle import SimilarityBundle
from jobaware.similarity.evaluate import EvalSet, evaluate, make_eval, timings
from jobaware.similarity.index import SimilarityIndex
from jobaware.similarity.params import check_params


@dataclass(kw_only=True)
class SimilarityEvaluation(Evaluation):
    report: Path | None = None  # the HTML page of the example reference


def build(dataset_dir: str | Path, params: dict | None = None, progress=None) -> SimilarityBundle:
    """The index of a canonical dataset folder, with its default algorithm (which the pool must allow)."""
    p = check_params(params or {})
    index = SimilarityIndex.build(dataset_dir, shard_jobs=p["shard_jobs"], progress=progress)
    index.require(p["algorithm"])
    return SimilarityBundle(index, p["algorithm"], p["top_k"], p["workers"])


def train(dataset_dir: str | Path, params: dict | None, workdir: str | Path) -> tuple[SimilarityBundle, SimilarityEvaluation]:
    """build -> make_eval (workdir/eval) -> evaluate (+ timings) -> plots and the HTML report of the paper's
    views for one example job (workdir/plots)."""
    from jobaware.similarity.report import evaluation_plots, report

    p = check_params(params or {})
    workdir = Path(workdir)
    phases = Progress(5, "phases: index, evaluation pool, algorithms scored, timings, report")
    bundle = build(dataset_dir, p)
    phases.advance()
    eval_dir = workdir / "eval"
    make_eval(dataset_dir, eval_dir, p)
    phases.advance()
    metrics = evaluate(bundle, eval_dir, p)
    phases.advance()
    if p["timing"]:
        metrics["model"].update(timings(bundle.index, bundle.workers))
    phases.advance()
    plots = evaluation_plots(metrics, workdir / "plots", bundle.algorithm)
    reference, page = example_reference(bundle), None
    if reference is not None:
        page, views = report(bundle.index, reference, workdir / "plots" / "report.html", workers=bundle.workers)
        plots += views
    phases.advance()
    return bundle, SimilarityEvaluation(metrics=metrics, plots=plots, eval_dir=eval_dir, report=page)


def example_reference(bundle: SimilarityBundle) -> int | None:
    """A pool job with I/O over several segments, for the report's views (the longest of the first 10k)."""
    index = bundle.index
    best, best_len = None, 0
    for jobid in index.jobids[:10_000].tolist():
        coding = index.reference(jobid).coding
        if len(coding) > best_len and coding.any():
            best, best_len = jobid, len(coding)
    return best


def score(bundle, eval_dir: Path) -> tuple[float, int]:
    """The bundle's precision@k on a stored evaluation folder, and the number of references it scored."""
    evalset = EvalSet(eval_dir, bundle.workers)
    mean, values, _ = evalset.precision(evalset.algorithm_scorer(bundle.algorithm), evalset.meta["k"])
    return mean, int(np.isfinite(values).sum())
