"""`jobaware slurm collect`, `jobaware failure export` and the old spellings (`jobaware slurm export`, `jobaware
collect slurm`), through the CLI, on the live cluster."""

import pytest
from typer.testing import CliRunner

from jobaware.cli import app
from jobaware.failure.reader import read_jobs
from jobaware.store import open_store

pytestmark = pytest.mark.slow


def test_collect_then_export_through_the_cli(accounted, tmp_path, monkeypatch, fresh_redis):
    monkeypatch.setenv("SLURM_CONF", str(accounted.conf))
    job_id = accounted.sbatch("#!/bin/bash\nexit 4\n", "--time=1", "--job-name=cli")
    runner = CliRunner()
    for store in (str(tmp_path / "store"), fresh_redis):
        for _ in range(30):  # bounded: until accounting has the job's end
            result = runner.invoke(app, ["slurm", "collect", "--store", store, "--polls", "1", "--max-calls", "5"])
            assert result.exit_code == 0, result.output
            record = next((r for r in open_store(store).records() if r["job_id"] == job_id), None)
            # accounting may list the job's end before its exit code: the next poll re-reads it (OVERLAP)
            if record and record["final"] and record["final"]["source"] == "sacct" \
                    and record["final"]["exit_code"] is not None:
                break
        assert "poll 1:" in result.output and "calls, ok" in result.output
        assert record["final"] == {"state": "FAILED", "source": "sacct", "exit_code": 4, "signal": None}
        out = tmp_path / "jobs.csv"
        result = runner.invoke(app, ["failure", "export", "--store", store, "--output", str(out)])
        assert result.exit_code == 0 and "finished job(s)" in result.output, result.output
        table, report = read_jobs(out)
        assert report.bad_rows == 0 and job_id in set(table["job_id"])
    # the old spelling: a notice, then the same export
    result = runner.invoke(app, ["slurm", "export", "--store", store, "--output", str(out), "--overwrite"])
    assert result.exit_code == 0 and "this command is now `jobaware failure export`" in result.output, result.output
    # the old command: a deprecation line, then the same collector and export
    old = tmp_path / "old.csv"
    result = runner.invoke(app, ["collect", "slurm", "--output", str(old)])
    assert result.exit_code == 0 and "deprecated" in result.output, result.output
    assert job_id in set(read_jobs(old)[0]["job_id"])


def test_bad_store_and_notices_are_one_line_errors(accounted, monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_CONF", str(accounted.conf))
    runner = CliRunner()
    result = runner.invoke(app, ["slurm", "collect", "--store", "ftp://x", "--polls", "1"])
    assert result.exit_code != 0 and "unknown scheme" in str(result.exception or result.output)
    result = runner.invoke(app, ["slurm", "collect", "--store", str(tmp_path / "s"), "--notices", "amqp://x"])
    assert result.exit_code != 0 and "expected redis://" in str(result.exception or result.output)
