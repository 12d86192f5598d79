"""One flow against a real `mlflow server` process: log, register, gate, promote, roll back."""

import subprocess
import sys
from pathlib import Path

import pytest

from jobaware import gate, tracking
from jobaware.failure.reader import read_jobs
from jobaware.failure.train import log_trained, train_in_memory
from tests.conftest import free_port, wait_for


@pytest.fixture
def mlflow_server(tmp_path, monkeypatch):
    port = free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    process = subprocess.Popen(
        [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}", "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=open(tmp_path / "server.log", "wb"), stderr=subprocess.STDOUT,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/health", 90, process)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
        yield tmp_path
    finally:
        process.terminate()
        process.wait(20)


def _log(jobs, params):
    import tempfile

    bundle, evaluation = train_in_memory(jobs, params, plot_dir=Path(tempfile.mkdtemp()))
    run_id = log_trained(bundle, evaluation, params, Path(tempfile.mkdtemp()))
    return tracking.register("failure", run_id), evaluation


def test_registry_flow_against_a_real_mlflow_server(mlflow_server, synthetic):
    jobs, _ = read_jobs(synthetic[0])
    good, evaluation = _log(jobs, {"max_iter": 80})
    assert gate.promote("failure")["champion"] == good
    weak, _ = _log(jobs, {"max_iter": 1, "learning_rate": 0.01, "calibration": "none"})
    decision = gate.promote("failure", weak)
    assert decision["promoted"] is False and decision["champion"] == good
    assert decision["champion_score"] > decision["candidate_score"]
    assert gate.promote("failure", weak, force=True)["champion"] == weak
    assert gate.rollback("failure")["champion"] == good
    rows = {r["version"]: r for r in tracking.list_models()}
    assert rows[good]["aliases"] == "champion" and rows[weak]["aliases"] == "challenger"
    assert float(rows[good]["score"]) == pytest.approx(evaluation.primary["roc_auc"], abs=1e-6)
    # artifacts went through the server: plots, contract result and the evaluation data
    _, client = tracking.mlflow_client()
    names = {a.path for a in client.list_artifacts(rows[good]["run_id"], "plots")}
    assert {"plots/roc.png", "plots/pr.png", "plots/calibration.png", "plots/confusion_matrix.png",
            "plots/feature_importance.png"} <= names
    actions = client.search_runs([tracking.experiment_id("failure")], "tags.`jobaware.action` = 'rollback'")
    assert len(actions) == 1
    bundle, version = tracking.load_bundle("failure")
    assert version == good and len(bundle.predict(jobs.tail(5))) == 5


def test_a_site_model_is_judged_against_a_public_champion_on_the_sites_own_jobs_alone(mlflow_server, synthetic):
    """Public traces are not the site: the gate compares the two on the site's evaluation data only, by the interval
    of their ROC-AUC difference."""
    jobs, _ = read_jobs(synthetic[0])
    first, second = jobs.iloc[:10_000], jobs.iloc[10_000:]
    public, _ = _log(first, {"max_iter": 40})
    _, client = tracking.mlflow_client()
    client.set_tag(client.get_model_version("jobaware-failure", public).run_id, tracking.TRAINED_ON_TAG,
                   "public public_jobs")
    assert gate.promote("failure", public)["promoted"]
    site, _ = _log(second, {"max_iter": 40})
    decision = gate.promote("failure", site)
    (check,) = decision["checks"]
    assert check["eval_data_of"] == site and check["rows"] >= 200
    assert check["low"] <= check["difference"] <= check["high"] and check["level"] == 0.9
    assert decision["promoted"] == (check["low"] >= -0.01), decision["reason"]


def test_the_gate_says_how_many_more_rows_would_decide():
    from types import SimpleNamespace

    capability = SimpleNamespace(gate_margin=0.01, primary_metric="roc_auc")
    check = {"candidate": 0.80, "champion": 0.79, "difference": 0.01, "low": -0.03, "high": 0.05, "level": 0.9,
             "rows": 300}
    reason = gate._interval_reason(capability, "4", check, "the evaluation data of version 4")
    # the half-width 0.04 must shrink to 0.02 (the difference plus the margin): four times the rows
    assert reason.endswith("interval -0.0300..+0.0500, which reaches below -0.01; about 900 more rows would decide it "
                           "if the difference held")
    worse = gate._interval_reason(capability, "4", {**check, "difference": -0.02, "low": -0.05}, "the data")
    assert "more rows" not in worse
