"""Build, evaluate, the promotion gate's score, and the parameters."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from jobaware.errors import InputError, JobawareError
from jobaware.similarity import evaluate as ev
from jobaware.similarity.capability import MIN_EVAL_ROWS
from jobaware.similarity.params import check_params
from jobaware.similarity.synth import default_data
from jobaware.similarity.train import build, score


def test_train_builds_the_index_and_measures_every_algorithm(trained, generated_index):
    bundle, evaluation = trained
    assert bundle.algorithm == "b-aggz" and bundle.index.version == generated_index.version
    model = evaluation.metrics["model"]
    assert model["references"] >= MIN_EVAL_ROWS
    assert model["self_match_rate"] == 1.0
    for algorithm in ("b-all", "b-aggz", "q-lev", "q-native", "q-phases", "ks"):
        assert 0 <= model[f"precision_at_k_{algorithm}"] <= 1
        for segments in ev.TIMING_SEGMENTS:
            assert model[f"seconds_per_100k_{algorithm}_{segments}"] > 0
    # the planted families are found far better than by chance or by length alone
    assert model["precision_at_k"] > 0.5
    assert model["precision_at_k"] > 20 * evaluation.metrics["random"]["precision_at_k"]
    assert model["precision_at_k"] > 3 * evaluation.metrics["length"]["precision_at_k"]
    names = {p.name for p in evaluation.plots}
    assert {"precision_at_k.png", "seconds_per_100k.png", "histogram.png", "cumulative.png",
            "top_intersection.png", "top_metadata.png"} <= names
    assert all(p.stat().st_size > 1000 for p in evaluation.plots)


def test_score_re_scores_any_bundle_on_the_stored_evaluation(trained):
    bundle, evaluation = trained
    value, rows = score(bundle, evaluation.eval_dir)
    assert value == pytest.approx(evaluation.metrics["model"]["precision_at_k"])
    assert rows == evaluation.metrics["model"]["references"]
    other = type(bundle)(bundle.index, "b-all", bundle.top_k, bundle.workers)
    assert score(other, evaluation.eval_dir)[0] == pytest.approx(evaluation.metrics["b-all"]["precision_at_k"])
    with pytest.raises(InputError, match="not a similarity evaluation folder"):
        score(bundle, evaluation.eval_dir / "pool")


def test_the_real_sample_gets_planted_families_of_perturbed_copies(real_dataset, tmp_path):
    params = check_params({"eval_references": 50, "eval_pool_jobs": 20_000})
    meta = ev.make_eval(real_dataset, tmp_path, params)
    assert meta["kind"] == "perturbed copies of real jobs" and meta["references"] == 50
    truth = pd.read_parquet(tmp_path / ev.TRUTH)
    assert (truth.groupby("family").size().drop(-1) == 11).all()
    bundle = build(real_dataset, params)
    value, rows = score(bundle, tmp_path)
    assert rows == 50 and 0.3 < value <= 1
    evalset = ev.EvalSet(tmp_path)
    _, _, self_match = evalset.precision(evalset.algorithm_scorer("b-all"), 10)
    assert self_match == 1.0


def test_a_binary_only_pool_cannot_default_to_a_levels_algorithm(real_dataset):
    with pytest.raises(InputError, match="q-lev needs the quantised"):
        build(real_dataset, {"algorithm": "q-lev"})


def test_params_are_checked():
    assert check_params({})["algorithm"] == "b-aggz"
    for bad, message in (({"top_k": 2.7}, "top_k"), ({"eval_k": 0}, "eval_k"), ({"algorithm": "fast"}, "algorithm"),
                         ({"workers": -1}, "workers"), ({"shards": 2}, "shards: unknown parameter")):
        with pytest.raises(JobawareError, match=message):
            check_params(bad)


def test_default_data_is_generated_once(tmp_path, monkeypatch):
    from jobaware import sources
    from jobaware.similarity import synth

    monkeypatch.setattr(synth, "DEFAULT_SYNTH_JOBS", 300)
    made = default_data(tmp_path)
    real, folder = sources.parse(made)  # the real Mistral sample, and the planted families beside it
    assert Path(real) == synth.real_sample() and Path(real).name == "dkrz_mistral_job_codings_binary.csv"
    first = (tmp_path / folder / "families.csv").stat().st_mtime_ns
    assert default_data(tmp_path) == made
    assert (tmp_path / folder / "families.csv").stat().st_mtime_ns == first
    assert sorted(p.name for p in (tmp_path / folder).iterdir()) == sorted(synth.FILES.values())
    real_jobids = [int(line.rsplit(",", 1)[1]) for line in Path(real).read_text().splitlines()[1:]]
    planted = [int(line.split(",")[0]) for line in (Path(folder) / "families.csv").read_text().splitlines()[1:]]
    assert min(planted) > max(real_jobids)  # no planted job takes a real jobid
