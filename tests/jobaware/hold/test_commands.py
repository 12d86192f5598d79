"""`jobaware hold parse` and the registry's file functions, as plain functions."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from jobaware.errors import InputError
from jobaware.hold.commands import parse_events
from jobaware.hold.service import predict_file
from jobaware.hold.synth import default_data, outcomes_path, truth_path, write_synthetic
from tests.jobaware.hold.conftest import CONDOR, STANDALONE


def test_events_parse_writes_one_table_and_reports_what_it_read(tmp_path):
    summary = parse_events([str(STANDALONE / "*.log"), str(CONDOR / "mldag_metl_aws.log")], tmp_path / "events.parquet")
    assert summary["events"] == pq.read_metadata(tmp_path / "events.parquet").num_rows == 1187 + 6043
    assert summary["bad_records"] == 0 and summary["duplicates"] == 0 and len(summary["files"]) == 7
    assert (tmp_path / "events.quarantine.jsonl").read_text() == ""


def test_synth_formats_and_the_default_data(tmp_path, monkeypatch):
    import re

    from jobaware.hold import synth

    truth = write_synthetic(tmp_path / "old.log", 50, seed=1, fmt="old")
    assert truth == truth_path(tmp_path / "old.log") and truth.is_file()
    assert re.match(r"000 \(\d+\.000\.000\) \d\d/\d\d \d\d:\d\d:\d\d ", (tmp_path / "old.log").read_text())
    with pytest.raises(InputError, match="--format: expected one of iso, old"):
        write_synthetic(tmp_path / "x.log", 50, fmt="json")
    monkeypatch.setattr(synth, "DEFAULT_SYNTH_JOBS", 60)
    made = json.loads(default_data(tmp_path))
    assert made[:-1] == synth.real_logs() and any(m.endswith("condor-more") for m in made)  # the real logs first,
    generated = made[-1]  # then a log generated from outcomes fitted on them, its truth and outcomes beside it
    assert generated.endswith("fitted_hold_60.log") and truth_path(generated).is_file()
    assert json.loads(outcomes_path(generated).read_text())["fitted_on"]["workflows"] == 8
    written = truth_path(generated).stat().st_mtime_ns
    assert json.loads(default_data(tmp_path)) == made and truth_path(generated).stat().st_mtime_ns == written  # once
    monkeypatch.setenv("JOBAWARE_HOLD_REAL", str(STANDALONE))  # a site's own real logs instead
    site = json.loads(default_data(tmp_path))
    assert site[0] == str(STANDALONE) and json.loads(outcomes_path(site[1]).read_text())["fitted_on"]["holds"] == 10


def test_predict_file_writes_one_decision_per_standing_hold(trained, synthetic, tmp_path):
    summary = predict_file([str(synthetic[0])], tmp_path / "out.jsonl", lambda: (trained[0], "4"))
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert summary.predictions == len(rows) > 0 and summary.counts["remove"] == sum(r["decision"] == "remove" for r in rows)
    assert all(r["model_version"] == "4" and 0 <= r["p_release"] <= 1 for r in rows)


def test_predict_file_says_why_it_decides_nothing_and_loads_no_model_then(tmp_path):
    """`predict hold` on logs where every hold was resolved wrote 0 predictions with no reason (issue 36): the summary
    says why, and the model is not loaded for nothing."""
    loaded = []
    summary = predict_file([str(STANDALONE / "metl_12636334.log")], tmp_path / "out.jsonl", lambda: loaded.append(1))
    assert summary.predictions == 0 and not loaded and summary.model_version is None
    assert "no hold stands at the end of the logs" in summary.reason and "5 hold(s)" in summary.reason
    assert (tmp_path / "out.jsonl").read_text() == ""


@pytest.mark.parametrize("content", [b"", b"x,y\n1,2\n", bytes(range(256)) * 8])
def test_label_and_predict_refuse_logs_with_no_event(tmp_path, content):
    """`hold label` passed a 0-byte or random file (issue 36): reading nothing usable is an error naming the file."""
    from jobaware.hold.commands import label_holds

    log = tmp_path / "EventLog"
    log.write_bytes(content)
    with pytest.raises(InputError, match=f"{log}: no HTCondor event read"):
        label_holds([str(log)])
    loaded = []
    with pytest.raises(InputError, match=f"{log}: no HTCondor event read"):
        predict_file([str(log)], tmp_path / "out.jsonl", lambda: loaded.append(1))
    assert not loaded and not (tmp_path / "out.jsonl").exists()
