"""Fit for the input: what a model was trained on, and the lines that say an input is far from it."""

import numpy as np
import pandas as pd

from jobaware import fit


def _jobs(n: int, low: float, high: float) -> pd.DataFrame:
    return pd.DataFrame({"job_id": np.arange(n), "nodes_req": np.linspace(low, high, n),
                         "state": ["COMPLETED"] * n})


def test_synthetic_sources_are_known_by_the_ground_truth_beside_them(tmp_path):
    (tmp_path / "jobs.csv").write_text("x")
    (tmp_path / "jobs.truth.parquet").write_text("x")
    (tmp_path / "real.swf").write_text("x")
    (tmp_path / "mistral").mkdir()
    (tmp_path / "mistral" / "families.csv").write_text("x")
    assert fit.source_kind([str(tmp_path / "jobs.csv")]) == "synthetic"
    assert fit.source_kind([str(tmp_path / "mistral")]) == "synthetic"
    assert fit.source_kind([str(tmp_path / "real.swf")]) == "real"
    assert fit.source_kind([str(tmp_path / "jobs.csv"), str(tmp_path / "real.swf")]) == "real"


def test_an_input_unlike_the_training_data_is_named_and_one_like_it_is_not(tmp_path):
    (tmp_path / "train.csv").write_text("x")
    (tmp_path / "train.truth.parquet").write_text("x")
    trained = fit.describe({"nrel_jobs": _jobs(500, 1, 100)}, [str(tmp_path / "train.csv")])
    assert trained["kind"] == "synthetic" and "job_id" not in trained["tables"]["nrel_jobs"]["columns"]
    (tmp_path / "real.csv").write_text("x")
    alike = fit.describe({"nrel_jobs": _jobs(300, 5, 90)}, [str(tmp_path / "train.csv")])
    assert fit.notes(trained, alike, "3") == []
    far = fit.describe({"nrel_jobs": _jobs(300, 500, 5000)}, [str(tmp_path / "real.csv")])
    found = fit.notes(trained, far, "3")
    assert found[0].startswith("model version 3 was trained on synthetic data; this input is real data")
    assert "nrel_jobs lies outside model version 3's training range in 1 column(s): nodes_req" in found[1]
    other = fit.describe({"swf_jobs": _jobs(300, 5, 90)}, [str(tmp_path / "train.csv")])
    assert fit.notes(trained, other, "3") == ["model version 3 was trained on nrel_jobs; this input is swf_jobs"]
    assert fit.notes(None, far, "3") == []  # a model trained before profiles were kept says nothing


def test_a_service_batch_is_flagged_per_column_with_a_comparison_per_column():
    trained = fit.describe({"nrel_jobs": _jobs(500, 1, 100)}, [])
    inside = {"nodes_req": np.array([2.0, np.nan]), "state": np.array(["COMPLETED", None], dtype=object)}
    assert fit.batch_flags(trained, inside) == []
    flags = fit.batch_flags(trained, {"nodes_req": np.array([2.0, 4000.0, 5000.0])})
    assert flags == ["nodes_req: 2 of 3 outside the training range 1.99..99.01"]
    assert fit.batch_flags(None, inside) == []


def test_a_service_answer_says_synthetic_training_and_skips_positions_and_ids():
    trained = fit.describe({"condor_events": pd.DataFrame({"cluster": [10.0] * 50, "line": np.arange(50.0),
                                                           "code": np.linspace(1, 40, 50)})}, [])
    assert set(trained["tables"]["condor_events"]["columns"]) == {"code"}
    request = fit.numeric_columns(pd.DataFrame({"cluster": [99_999], "line": [10_000], "code": [500],
                                                "reason": ["[/bold] text"]}))
    assert fit.answer_flags(trained, "4", request) == ["code: 1 of 1 outside the training range 1.39..39.61"]
    synthetic = {**trained, "kind": "synthetic"}
    assert fit.answer_flags(synthetic, "4")[0].startswith("model version 4 was trained on synthetic data")
    assert fit.answer_flags(None, "4", request) == []
