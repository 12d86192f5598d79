"""`jobaware report holds` on the real logs: the site rule's calls beside how the holds really ended, re-holds."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from jobaware.adapters.htcondor.report import summarize
from jobaware.errors import InputError
from tests.adapters.htcondor.conftest import REAL_LOGS


def _inputs(logs) -> list[str]:
    """Each log as `--input LOG`."""
    return [part for log in logs for part in ("--input", str(log))]


@pytest.fixture(scope="module")
def real_audit(tmp_path_factory):
    """The real logs followed once, with no service (every hold: no decision), through `jobaware hold follow`."""
    from jobaware.cli import app

    audit = tmp_path_factory.mktemp("real_audit") / "audit.jsonl"
    result = CliRunner().invoke(app, ["hold", "follow", *_inputs(REAL_LOGS), "--audit", str(audit), "--once"])
    assert result.exit_code == 0, result.output
    assert "hold 12634462.0.0 at 2025-04-22 04:40:47 code 47/0: no decision" in result.output
    return audit


def test_the_report_on_the_real_logs_compares_the_site_rule_with_what_happened(real_audit):
    from jobaware.cli import app

    result = CliRunner().invoke(app, ["report", "holds", "--audit", str(real_audit), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    total = rows[-1]
    assert total["week"] == "all" and [r["week"] for r in rows[:3]] == ["2025-W16", "2025-W17", "2025-W21"]
    # 22 holds, 21 of them ended in the logs (as `jobaware hold label` labels them: 5 released and run to the end)
    assert (total["holds"], total["ended"], total["release-all right"]) == (22, 21, 5)
    assert (total["rule release"], total["rule remove"], total["rule none"], total["rule right"]) == (10, 2, 10, 5)
    assert (total["no decision"], total["model none"], total["acted"]) == (22, 22, 0)
    # 11 holds were released; 6 of those jobs were held again (12634462: 86.82 h and 20.09 h between release and
    # re-hold; 12636334 four times within 2025-W21)
    assert (total["released"], total["re-held after release"]) == (11, 6)
    assert rows[0]["slot-hours wasted"] == pytest.approx(86.82) and rows[1]["slot-hours wasted"] == pytest.approx(20.09)
    table = CliRunner().invoke(app, ["report", "holds", "--audit", str(real_audit)])
    assert table.exit_code == 0 and "rule right" in table.output and "2025-W16" in table.output


def test_following_the_same_logs_again_adds_nothing(real_audit):
    from jobaware.cli import app

    before = real_audit.read_bytes()
    result = CliRunner().invoke(app, ["hold", "follow", *_inputs(REAL_LOGS), "--audit", str(real_audit), "--once"])
    assert result.exit_code == 0 and real_audit.read_bytes() == before


def test_the_policy_prints_as_condor_configuration():
    from jobaware.cli import app

    result = CliRunner().invoke(app, ["hold", "policy", "--print"])
    assert result.exit_code == 0
    assert "SYSTEM_PERIODIC_RELEASE_NAMES = $(SYSTEM_PERIODIC_RELEASE_NAMES) jobaware_release_codes" in result.output
    assert "NumJobStarts < 10 && NumHolds <= 3" in result.output


def test_an_audit_without_holds_or_with_a_bad_line_is_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"kind": "outcome", "id": "x", "job": "1.0.0", "event": "released", "time": "2026-01-01"}\n')
    with pytest.raises(InputError, match="no hold recorded"):
        summarize(empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n")
    with pytest.raises(InputError, match=r"bad.jsonl line 1: not a JSON audit record"):
        summarize(bad)


def test_following_into_the_store_audits_and_reports_as_the_file_does(real_audit, tmp_path):
    from jobaware.cli import app
    from jobaware.store import open_store

    store = str(tmp_path / "store")
    for _ in range(2):  # the second follow adds nothing
        result = CliRunner().invoke(app, ["hold", "follow", *_inputs(REAL_LOGS), "--store", store, "--once"])
        assert result.exit_code == 0, result.output
    with open_store(store) as opened:
        stored = [e["record"] for e in opened.events("htcondor.holds")]
    from_file = [json.loads(line) for line in real_audit.read_text().splitlines()]
    from_file = [r for r in from_file if r["kind"] != "usage"]  # the store keeps the jobs' use in its own stream
    assert [(r["kind"], r["id"]) for r in stored] == [(r["kind"], r["id"]) for r in from_file]
    reports = [CliRunner().invoke(app, ["report", "holds", *where, "--json"])
               for where in (["--store", store], ["--audit", str(real_audit)])]
    assert reports[0].exit_code == 0 and json.loads(reports[0].output) == json.loads(reports[1].output)
