import json
import math
import shutil

import pandas as pd
import pytest

from jobaware.errors import InputError, JobawareError
from jobaware.resource.capability import MIN_EVAL_ROWS, PRIMARY_METRIC
from jobaware.resource.params import Params, check_params
from jobaware.resource.reader import ingest
from jobaware.resource.train import read_eval, score, train
from tests.jobaware.resource.conftest import QUICK, SCRIPTS


def test_params_are_validated_strictly():
    assert check_params({}) == Params()
    for bad, message in [({"max_epochs": 2.7}, "max_epochs"), ({"learning_rate": -1.0}, "learning_rate"),
                         ({"cv_folds": 1}, "cv_folds"), ({"rich_c": float("nan")}, "rich_c"),
                         ({"candidates": ["svm"]}, r"candidates\[0\]"), ({"nope": 1}, "nope"),
                         ({"sequence_architecture": "lstm"}, "sequence_architecture"), ({"seed": "1"}, "seed")]:
        with pytest.raises(JobawareError, match=rf"^parameters of resource: {message}: "):
            check_params(bad)


def test_evaluation_table_compares_four_models_on_real_scripts_only(trained):
    bundle, evaluation = trained
    m = evaluation.metrics
    assert set(m) == {"model", "majority", "seed_svm", "rich", "sequence"}
    assert evaluation.chosen in ("rich", "sequence") and bundle.kind == evaluation.chosen
    assert m["model"]["macro_f1"] == m[evaluation.chosen]["macro_f1"] == evaluation.primary["macro_f1"]
    assert m["majority"]["f1_cpu"] > 0 and m["majority"]["f1_mem"] == 0  # always says cpu
    assert m["model"]["macro_f1"] > m["seed_svm"]["macro_f1"] + 0.15
    assert m["model"]["n_eval"] == 120 and m["model"]["synthetic_rows"] > 0
    assert list(evaluation.table.index) == ["majority", "seed_svm", "rich", "sequence"]
    assert evaluation.confusion.to_numpy().sum() == 120  # one repeat
    assert all(p.is_file() and p.suffix == ".png" for p in evaluation.plots)
    assert {p.name for p in evaluation.plots} == {"confusion_matrix.png", "model_comparison.png"}
    data = read_eval(evaluation.eval_dir)
    assert len(data.scripts) == 120 and (data.scripts["origin"] == "real").all()
    assert (data.augment["origin"] == "synthetic").all() and len(data.augment) == m["model"]["synthetic_rows"]
    assert set(data.augment["class"]) == {"cpu", "mem", "network", "io"}
    assert json.loads((evaluation.eval_dir / "metrics.json").read_text())["model"]["macro_f1"] == evaluation.primary["macro_f1"]
    predictions = pd.read_parquet(evaluation.eval_dir / "cv_predictions.parquet")
    assert len(predictions) == 120 and {"rich_r0", "sequence_r0", "seed_svm_r0"} <= set(predictions.columns)


def test_score_refits_the_recipe_on_the_stored_folds(trained, tmp_path):
    bundle, evaluation = trained
    value, rows = score(bundle, evaluation.eval_dir)
    assert rows == 120 and value == pytest.approx(evaluation.primary["macro_f1"])
    assert PRIMARY_METRIC == ("macro_f1", True)
    small = tmp_path / "small"
    shutil.copytree(evaluation.eval_dir, small)
    scripts = pd.read_parquet(small / "scripts.parquet")
    scripts.head(MIN_EVAL_ROWS - 1).to_parquet(small / "scripts.parquet")
    value, rows = score(bundle, small)
    assert math.isnan(value) and rows == MIN_EVAL_ROWS - 1
    with pytest.raises(InputError, match="not an evaluation folder"):
        score(bundle, tmp_path)


def test_generated_data_alone_is_scored_on_the_bundled_real_scripts(tmp_path, generated):
    ingest([str(generated)], tmp_path / "data")
    _, evaluation = train(tmp_path / "data", {**QUICK, "candidates": ["rich"]}, tmp_path / "work")
    assert evaluation.metrics["model"]["n_eval"] == 120
    with pytest.raises(InputError, match="usable real scripts; the evaluation needs at least 60"):
        train(tmp_path / "data", {**QUICK, "bundled_real": False}, tmp_path / "work2")


def test_real_scripts_brought_twice_count_once(tmp_path):
    ingest([str(SCRIPTS)], tmp_path / "data")
    _, evaluation = train(tmp_path / "data", {**QUICK, "candidates": ["rich"], "synthetic_shell_weight": 0.0,
                                                    "synthetic_python_weight": 0.0},
                          tmp_path / "work")
    assert evaluation.metrics["model"]["n_eval"] == 120 and evaluation.metrics["model"]["synthetic_rows"] == 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_default_training_reaches_the_reported_figures(dataset, tmp_path):
    """The full default evaluation (3 x 5-fold CV, all four models), as `make run` does it."""
    _, evaluation = train(dataset, {}, tmp_path)
    m = evaluation.metrics
    assert m["model"]["macro_f1"] >= 0.68 and m["model"]["macro_f1"] >= m["seed_svm"]["macro_f1"] + 0.15
    assert m["sequence"]["macro_f1"] > m["majority"]["macro_f1"] + 0.25
    assert m["model"]["seconds"] < 600


def test_the_real_sample_can_be_pointed_at(tmp_path, monkeypatch, generated):
    from jobaware.resource.train import REAL_SAMPLE_ENV, real_sample_path

    assert real_sample_path() == SCRIPTS / "labels.csv"
    monkeypatch.setenv(REAL_SAMPLE_ENV, str(tmp_path / "elsewhere"))
    ingest([str(generated)], tmp_path / "data")
    missing = f"elsewhere/labels.csv: the bundled real sample is missing; set {REAL_SAMPLE_ENV}"
    with pytest.raises(InputError, match=missing):
        train(tmp_path / "data", QUICK, tmp_path / "work")
