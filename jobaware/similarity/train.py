"""Build the index (the `similarity` model) and evaluate it: what the pipeline's steps call.

`build` -> `SimilarityBundle`; `make_eval` writes the evaluation folder the gate re-scores on;
`evaluate` and `timings` give the metrics; `train` chains them and draws the plots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from jobaware.similarity.bundle import SimilarityBundle
from jobaware.similarity.evaluate import evaluate, make_eval, timings
from jobaware.similarity.index import SimilarityIndex
from jobaware.similarity.params import check_params

DEFAULT_SYNTH_JOBS = 20_000
PLANTED_FIRST_JOBID = 30_000_000  # above the real sample's jobids (17.6M..18.9M)
REAL_SAMPLE_ENV = "JOBAWARE_MISTRAL_REAL"


@dataclass
class Evaluation:
    metrics: dict[str, dict[str, float]]
    plots: list[Path] = field(default_factory=list)
    eval_dir: Path | None = None
    report: Path | None = None

    @property
    def primary(self) -> dict:
        return self.metrics["model"]


def build(dataset_dir: str | Path, params: dict | None = None, progress=None) -> SimilarityBundle:
    """The index of a canonical dataset folder, with its default algorithm (which the pool must allow)."""
    p = check_params(params or {})
    index = SimilarityIndex.build(dataset_dir, shard_jobs=p["shard_jobs"], progress=progress)
    index.require(p["algorithm"])
    return SimilarityBundle(index, p["algorithm"], p["top_k"], p["workers"])


def train(dataset_dir: str | Path, params: dict | None, workdir: str | Path) -> tuple[SimilarityBundle, Evaluation]:
    """build -> make_eval (workdir/eval) -> evaluate (+ timings) -> plots and the HTML report of the paper's
    views for one example job (workdir/plots)."""
    from jobaware.similarity.report import evaluation_plots, report

    p = check_params(params or {})
    workdir = Path(workdir)
    bundle = build(dataset_dir, p)
    eval_dir = workdir / "eval"
    make_eval(dataset_dir, eval_dir, p)
    metrics = evaluate(bundle, eval_dir, p)
    if p["timing"]:
        metrics["model"].update(timings(bundle.index, bundle.workers))
    plots = evaluation_plots(metrics, workdir / "plots", bundle.algorithm)
    reference, page = example_reference(bundle), None
    if reference is not None:
        page, views = report(bundle.index, reference, workdir / "plots" / "report.html", workers=bundle.workers)
        plots += views
    return bundle, Evaluation(metrics, plots, eval_dir, page)


def example_reference(bundle: SimilarityBundle) -> int | None:
    """A pool job with I/O over several segments, for the report's views (the longest of the first 10k)."""
    index = bundle.index
    best, best_len = None, 0
    for jobid in index.jobids[:10_000].tolist():
        coding = index.reference(jobid).coding
        if len(coding) > best_len and coding.any():
            best, best_len = jobid, len(coding)
    return best


def real_sample() -> Path | None:
    """The real DKRZ Mistral binary codings: $JOBAWARE_MISTRAL_REAL, else the repository's data/real/mistral
    (None where neither is there, e.g. an image without the sample)."""
    path = Path(os.environ.get(REAL_SAMPLE_ENV) or
                Path(__file__).resolve().parents[2] / "data" / "real" / "mistral" / "dkrz_mistral_job_codings_binary.csv")
    return path if path.is_file() else None


def default_data(data_dir: Path, progress=None) -> str:
    """`make run`'s default data: the real Mistral sample (its jobids answer `jobaware similarity rank` out of the
    box), with generated Mistral tables beside it whose planted families the evaluation scores on (their
    jobids above the real ones), generated once under `data_dir`."""
    from jobaware import sources
    from jobaware.similarity import synth

    folder = Path(data_dir) / f"planted_similarity_{DEFAULT_SYNTH_JOBS}"
    if not (folder / synth.FILES[synth.FAMILIES]).is_file():
        synth.write(folder, DEFAULT_SYNTH_JOBS, 0, progress=progress, first_jobid=PLANTED_FIRST_JOBID)
    real = real_sample()
    return sources.encode([str(real), str(folder)] if real else [str(folder)])
