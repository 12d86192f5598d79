import pytest

from jobaware import config, tracking
from jobaware.failure.synth import write
from jobaware.pipelines.runner import run_local


@pytest.mark.slow
@pytest.mark.timeout(600)
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
    with pytest.raises(Exception, match="no MLflow store"):  # nothing was tracked, not even a store created
        tracking.list_models()
