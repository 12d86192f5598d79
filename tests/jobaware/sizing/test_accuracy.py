"""`sizing` on live jobs: its recommendations kept in a job store (as the Slurm adapter keeps them) against what
accounting says the jobs used, by week and model version; and its table in `jobaware report live`."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from jobaware import card as cards
from jobaware import cli
from jobaware.sizing.accuracy import accuracy_report, judged_rows
from jobaware.store import JobKey, open_store

MONDAY = 1_795_392_000  # 2026-11-23 00:00:00 UTC, a Monday: ISO week 2026-W48


def sizing_part(version: str, time_s: float, asked_s: float, mem: float | None = None,
                mem_asked: float | None = None) -> dict:
    """A sizing part as the card keeps it (`jobaware.sizing.card.answer`, answered)."""
    part = {"status": "ok", "reason": None, "time_s": time_s, "time_asked_s": asked_s, "coverage": 0.95,
            "summary": "fits", "model_version": version}
    if mem is not None:
        part.update(mem_per_cpu_mb=mem, mem_asked_per_cpu_mb=mem_asked)
    return part


def put_job(store, job_id: int, submit: int, *, final: str | None, usage: dict | None, verdicts: list[tuple]):
    key = JobKey("c", job_id, submit)
    store.put_job(key, {"job_id": job_id, "submit_time": submit, "state": final or "PENDING"})
    if final:
        store.put_final(key, final, "sacct", 0)
    if usage:
        store.put_usage(key, {"source": "sacct", **usage})
    for created, parts in verdicts:
        card = {"job_id": job_id, "created": created, "parts": parts, "missing": [], "short": "jobaware: x"}
        name = "adapter:" + ",".join(f"{k}={v}" for k, v in sorted(cards.versions(card).items())) + f"@{created}"
        store.put_prediction(key, name, cards.kept(card, acts=[], dry_run=False))


@pytest.fixture
def store(tmp_path):
    """Week 48, model 2: job 1 fits its recommendation (time and memory), job 2 outgrows it in time (a TIMEOUT at
    the 2 h it asked, recommended 1 h), job 3 was given its request back and ran to its limit; job 4 never ran;
    job 5 is still pending. Week 49, model 3: job 6 outgrows its memory recommendation."""
    opened = open_store(f"sqlite:{tmp_path / 'store'}")
    t = MONDAY + 3600
    put_job(opened, 1, t, final="COMPLETED", usage={"elapsed_s": 1200, "cpus": 4, "nodes": 1, "mem_used_mib": 4000},
            verdicts=[(t + 10, {"sizing": sizing_part("2", 1800, 7200, 1500, 4096)}),
                      (t + 400, {"sizing": sizing_part("2", 600, 7200)})])  # a later card: not the one judged
    put_job(opened, 2, t + 60, final="TIMEOUT", usage={"elapsed_s": 7200, "cpus": 2, "nodes": 1},
            verdicts=[(t + 70, {"sizing": sizing_part("2", 3600, 7200)})])
    put_job(opened, 3, t + 120, final="TIMEOUT", usage={"elapsed_s": 3600, "cpus": 2, "nodes": 1},
            verdicts=[(t + 130, {"sizing": sizing_part("2", 3600, 3600)})])
    put_job(opened, 4, t + 180, final="CANCELLED", usage={"elapsed_s": 0, "cpus": 2, "nodes": 1},
            verdicts=[(t + 190, {"sizing": sizing_part("2", 600, 3600)})])
    put_job(opened, 5, t + 240, final=None, usage=None, verdicts=[(t + 250, {"sizing": sizing_part("2", 60, 600)})])
    week = MONDAY + 7 * 86400
    put_job(opened, 6, week, final="OUT_OF_MEMORY", usage={"elapsed_s": 100, "cpus": 8, "nodes": 2,
                                                           "mem_used_mib": 9000},
            verdicts=[(week + 5, {"sizing": sizing_part("3", 600, 3600, 2000, 4096)})])  # 9000 x 2 / 8 = 2250
    yield opened
    opened.close()


def test_each_job_is_judged_on_its_first_recommendation_against_what_it_used(store):
    rows = {r["job"]: r for r in judged_rows(store)}
    assert sorted(rows) == [1, 2, 3, 6]  # 4 never ran, 5 has not ended
    assert rows[1]["time_s"] == 1800 and rows[1]["mem_used_per_cpu_mb"] == 1000
    assert rows[6]["mem_used_per_cpu_mb"] == 2250


def test_by_week_and_version_the_under_estimation_beside_the_coverage(store):
    [first, second] = accuracy_report(store)
    assert (first["week"], first["model_version"], first["jobs"]) == ("2026-W48", "2", 3)
    assert first["time_under_rate"] == pytest.approx(1 / 3)  # job 2 ran past its recommended hour
    assert first["time_less_share"] == pytest.approx(2 / 3) and first["time_median_ratio"] == 0.5
    assert first["coverage"] == 0.95 and first["mem_jobs"] == 1 and first["mem_under_rate"] == 0.0
    assert (second["week"], second["model_version"], second["mem_jobs"], second["mem_under_rate"]) == (
        "2026-W49", "3", 1, 1.0)
    assert second["time_under_rate"] == 0.0


def test_report_live_has_a_sizing_table(store, tmp_path):
    uri = f"sqlite:{tmp_path / 'store'}"
    shown = CliRunner().invoke(cli.app, ["report", "live", "--store", uri, "--json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["sizing"]
    assert [r["jobs"] for r in rows] == [3, 1] and math.isclose(rows[0]["time_under_rate"], 1 / 3)
    table = CliRunner().invoke(cli.app, ["report", "live", "--store", uri], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "sizing on live jobs" in table.stdout
