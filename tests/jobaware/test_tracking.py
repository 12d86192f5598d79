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
