"""The `jobaware` console script, run as a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import KTH, NREL_CSV, ROOT

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def run(*args):
    return subprocess.run([JOBAWARE, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_validate_exit_codes_and_reports(tmp_path):
    good = run("data", "validate", "failure", NREL_CSV)
    assert good.returncode == 0 and "all 14 expectations met on 700 rows" in good.stdout
    assert run("data", "validate", "failure", KTH, "--json").returncode == 0
    lines = NREL_CSV.read_text().splitlines()
    lines[3] = lines[3].replace("COMPLETED", "RUNNING")
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    failed = run("data", "validate", "failure", bad, "--json")
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    assert report["failed"][0]["column"] == "state" and report["failed"][0]["examples"] == ["RUNNING"]


def test_errors_are_one_line_without_traceback(tmp_path):
    missing = run("data", "validate", "failure", tmp_path / "nothing.csv")
    assert missing.returncode == 1
    assert missing.stderr.strip().startswith("error:") and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    unknown = run("data", "validate", "hold", NREL_CSV)
    assert unknown.returncode == 1 and "unknown capability 'hold'; available: failure" in unknown.stderr
    bad_param = run("pipeline", "run", "failure", "--data", NREL_CSV, "--param", "depth=3")
    assert bad_param.returncode == 1 and "unknown parameter(s) depth" in bad_param.stderr


def test_synth_writes_jobs_and_truth(tmp_path):
    result = run("data", "synth", "failure", "--jobs", 1000, "--out", tmp_path / "s.json", "--seed", 3)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "s.json").exists() and (tmp_path / "s.truth.parquet").exists()


def test_predict_swf_and_models_list(champion, tmp_path):
    out = tmp_path / "preds.jsonl"
    result = run("predict", "failure", "--input", KTH, "--output", out)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 28_476 and rows[0]["job_id"] == 15 and 0 <= rows[0]["p_fail"] <= 1
    listed = json.loads(run("models", "list", "--json").stdout)
    assert any(r["aliases"] and "champion" in r["aliases"] for r in listed)


def test_promote_refuses_an_unknown_version(champion):
    result = run("models", "promote", "failure", "999")
    assert result.returncode == 1 and "jobaware-failure has no version 999" in result.stderr
