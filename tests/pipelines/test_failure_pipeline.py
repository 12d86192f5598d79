import pytest

from jobaware import config, tracking
from jobaware.failure.synth import write
from pipelines.runner import compile_all, run_local
from tests.conftest import ROOT


def test_compiled_pipelines_match_the_committed_golden_yaml(tmp_path):
    for path in compile_all(tmp_path):
        golden = ROOT / "pipelines" / "golden" / path.name
        assert path.read_text() == golden.read_text(), f"{path.name} changed: recompile with `jobaware pipeline compile --out pipelines/golden`"


@pytest.mark.slow
def test_pipeline_runs_locally_registers_and_promotes(tmp_path, monkeypatch):
    monkeypatch.setenv("JOBAWARE_HOME", str(tmp_path / "home"))
    data = tmp_path / "jobs.csv"
    write(data, 6_000, "csv", seed=3)
    run_local("failure", {"data": str(data), "params": '{"max_iter": 40}', "tracking_uri": config.tracking_uri()},
              tmp_path / "kfp")
    rows = tracking.list_models()
    assert [r["version"] for r in rows] == ["1"] and rows[0]["aliases"] == "challenger,champion"
    _, client = tracking.mlflow_client()
    run = client.get_run(rows[0]["run_id"])
    assert run.data.metrics["contract_success"] == 1.0 and "bayes_roc_auc" in run.data.metrics
    assert "baseline_logistic_roc_auc" in run.data.metrics


@pytest.mark.slow
def test_a_failed_contract_stops_the_pipeline_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("JOBAWARE_HOME", str(tmp_path / "home"))
    data = tmp_path / "jobs.csv"
    write(data, 1_000, "csv", seed=3)
    lines = data.read_text().splitlines()
    fields = lines[5].split(",")
    fields[12] = "2000-01-01 00:00:00"  # ends before it started
    lines[5] = ",".join(fields)
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(RuntimeError, match="validate"):
        run_local("failure", {"data": str(data), "tracking_uri": config.tracking_uri()}, tmp_path / "kfp")
    assert tracking.list_models() == []
