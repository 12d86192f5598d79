"""`wait` on live jobs: its verdicts kept in a job store (as the Slurm adapter keeps them) against when the jobs really
started, by week and model version, the first verdict and the refreshed ones apart; and `jobaware report live`, which
prints every card part's live accuracy (failure's table through the same hook)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from jobaware import card as cards
from jobaware import cli
from jobaware.store import JobKey, open_store
from jobaware.wait.accuracy import accuracy_report, starts, verdict_rows

MONDAY = 1_795_392_000  # 2026-11-23 00:00:00 UTC, a Monday: ISO week 2026-W48
OFFSET = 3600  # the collector's wall clock runs an hour ahead of UTC: the row keeps times shifted by it


def wait_part(version: str, wait_s: float, low_s: float, high_s: float, bound_s: float) -> dict:
    """A wait part as the card keeps it (`jobaware.wait.card.answer`, answered)."""
    return {"status": "ok", "reason": None, "wait_s": wait_s, "low_s": low_s, "high_s": high_s, "bound_s": bound_s,
            "why": "3 jobs ahead in `batch`", "model_version": version}


def failure_part(p_fail: float) -> dict:
    return {"status": "ok", "reason": None, "p_fail": p_fail, "likely": "FAILED", "model_version": "7",
            "threshold": 0.5, "likely_fail": p_fail >= 0.5}


def put_job(store, job_id: int, submit: int, *, start: int | None, final: str | None, verdicts: list[tuple],
            states: tuple[str, ...] = ("PENDING", "RUNNING"), run_time: float | None = None) -> JobKey:
    """A job as the collector and the adapter leave it: its row (times on the collector's wall clock), its state
    changes, its final state, and one kept card per verdict (created, parts), named as the adapter names them."""
    key = JobKey("c", job_id, submit)
    end = None if final is None else (start or submit) + 60
    store.put_job(key, {"job_id": job_id, "submit_time": submit + OFFSET, "state": final or states[-1],
                        "start_time": None if start is None else start + OFFSET,
                        "end_time": None if end is None else end + OFFSET,
                        "run_time": run_time if run_time is not None else (60.0 if start and final else None)})
    for n, state in enumerate(states):
        store.add_state(key, state, submit + n)
    if final:
        store.put_final(key, final, "sacct", 0)
    for created, parts in verdicts:
        card = {"job_id": job_id, "created": created, "parts": parts, "missing": [], "short": "jobaware: x"}
        versions = cards.versions(card)
        name = "adapter:" + ",".join(f"{k}={v}" for k, v in sorted(versions.items())) + f"@{int(created // 300)}"
        store.put_prediction(key, name, cards.kept(card, acts=[], dry_run=False))
    return key


@pytest.fixture
def store(tmp_path):
    """Week 48, model 3: job 1 (a first verdict and a refresh), job 2 (a wait under a minute), job 3 cancelled while
    pending, job 6 cancelled after running; week 49, model 4: job 4. Job 5 still waits; job 7 has no wait part."""
    opened = open_store(f"sqlite:{tmp_path / 'store'}")
    t = MONDAY + 3600
    put_job(opened, 1, t, start=t + 910, final="COMPLETED", verdicts=[
        (t + 10, {"failure": failure_part(0.2), "wait": wait_part("3", 600, 300, 1200, 2400)}),  # actual 900
        (t + 310, {"failure": failure_part(0.2), "wait": wait_part("3", 100, 50, 200, 400)})])  # actual 600
    put_job(opened, 2, t + 100, start=t + 130, final="FAILED", verdicts=[
        (t + 110, {"failure": failure_part(0.7), "wait": wait_part("3", 30, 0, 50, 90)})])  # actual 20
    put_job(opened, 3, t + 150, start=t + 400, final="CANCELLED", states=("PENDING", "CANCELLED"), run_time=0.0,
            verdicts=[(t + 160, {"wait": wait_part("3", 60, 30, 120, 240)})])  # squeue: start = its cancel
    put_job(opened, 6, t + 160, start=t + 500, final="CANCELLED", states=("PENDING", "CANCELLED"), run_time=60.0,
            verdicts=[(t + 170, {"wait": wait_part("3", 300, 100, 600, 900)})])  # ran a minute: actual 330
    week = MONDAY + 7 * 86400
    put_job(opened, 4, week, start=week + 7200, final="COMPLETED", verdicts=[
        (week + 5, {"wait": wait_part("4", 3000, 1000, 5000, 9000)})])  # actual 7195
    put_job(opened, 5, week + 10, start=None, final=None, states=("PENDING",), verdicts=[
        (week + 20, {"wait": wait_part("4", 60, 0, 120, 300)})])
    put_job(opened, 7, week + 30, start=week + 40, final="COMPLETED", verdicts=[
        (week + 35, {"failure": failure_part(0.1)})])
    yield opened
    opened.close()


def test_each_verdict_is_judged_against_the_start_from_its_own_time(store):
    rows = verdict_rows(store)
    assert [(r["job"], r["verdict"], r["actual_s"]) for r in rows] == [
        (1, "first", 900.0), (1, "refreshed", 600.0), (2, "first", 20.0), (3, "first", None), (6, "first", 330.0),
        (4, "first", 7195.0)]  # job 3 was cancelled while it waited: it never started
    assert {r["week"] for r in rows if r["job"] != 4} == {"2026-W48"} and rows[-1]["week"] == "2026-W49"


def test_by_week_version_and_verdict_the_first_verdicts_and_the_refreshed_apart(store):
    first, refreshed, later = accuracy_report(store)
    counts = ("week", "model_version", "verdict", "jobs", "verdicts", "never_started")
    assert [tuple(row[k] for k in counts) for row in (first, refreshed, later)] == [
        ("2026-W48", "3", "first", 3, 3, 1), ("2026-W48", "3", "refreshed", 1, 1, 0),
        ("2026-W49", "4", "first", 1, 1, 0)]
    # firsts: job 1 said 600 s for 900 (x1.5, in its range), job 2 30 s for 20 (both under a minute: within x2, no
    # error at the minute's floor), job 6 300 s for 330
    assert first["log10_error"] == pytest.approx((math.log10(900 / 600) + 0 + math.log10(330 / 300)) / 3)
    assert (first["within_x2"], first["coverage_80"], first["coverage_95"]) == (1.0, 1.0, 1.0)
    # the refresh said 100 s (range 50-200, bound 400) for 600: outside by every measure
    assert refreshed["log10_error"] == pytest.approx(math.log10(600 / 100))
    assert (refreshed["within_x2"], refreshed["coverage_80"], refreshed["coverage_95"]) == (0.0, 0.0, 0.0)
    assert (later["within_x2"], later["coverage_80"], later["coverage_95"]) == (0.0, 0.0, 1.0)  # 3000 s for 7195


def test_when_a_job_started_and_whether_it_did():
    record = {"submit_time": 1000, "row": {"submit_time": 1000 + OFFSET, "start_time": 1500 + OFFSET,
                                           "run_time": 0.0}, "states": [], "final": {"state": "FAILED"}}
    cancelled = {**record, "final": {"state": "CANCELLED"}}
    seen = {**cancelled, "states": [{"state": "RUNNING", "time": 1500}]}
    unknown = {**record, "row": {**record["row"], "start_time": None}}  # accounting: no start
    begun = starts([record, cancelled, seen, unknown], ZoneInfo("UTC"))
    assert begun[0] == 1500.0  # a failure at once still started
    assert math.isnan(begun[1])  # no run time and never seen running: cancelled while it waited
    assert begun[2] == 1500.0
    assert math.isnan(begun[3])


STOCKHOLM = ZoneInfo("Europe/Stockholm")
SPRING = 828_234_000  # 1996-03-31 01:00 UTC: Stockholm's clocks went from 02:00 CET to 03:00 CEST


def test_a_wait_across_a_daylight_saving_change_is_exact_in_the_site_s_zone(tmp_path):
    """Submitted at 01:30 CET (00:30 UTC), verdict at 00:40 UTC, started at 03:30 CEST (01:30 UTC): 50 minutes after
    the verdict, though the collector's wall clock (what the row keeps) moved two hours and ten minutes."""
    submit, created, start = SPRING - 1800, SPRING - 1200, SPRING + 1800
    wall = {moment: moment + int(datetime.fromtimestamp(moment, STOCKHOLM).utcoffset().total_seconds())
            for moment in (submit, start, start + 60)}  # the collector's wall clock in Stockholm
    assert (wall[submit] - submit, wall[start] - start) == (3600, 7200)
    with open_store(f"sqlite:{tmp_path / 'store'}") as store:
        key = JobKey("c", 1, submit)
        store.put_job(key, {"job_id": 1, "submit_time": wall[submit], "state": "COMPLETED",
                            "start_time": wall[start], "end_time": wall[start + 60], "run_time": 60.0})
        store.add_state(key, "PENDING", submit)
        store.put_final(key, "COMPLETED", "sacct", 0)
        card = {"job_id": 1, "created": created, "parts": {"wait": wait_part("5", 3000, 1500, 6000, 9000)},
                "missing": [], "short": "jobaware: x"}
        store.put_prediction(key, "adapter:wait=5@1", cards.kept(card, acts=[], dry_run=False))
        at_site = verdict_rows(store, STOCKHOLM)
        away = verdict_rows(store, ZoneInfo("UTC"))  # read away from the site: the submit's offset, fixed
    assert [row["actual_s"] for row in at_site] == [3000.0]
    assert [row["actual_s"] for row in away] == [3000.0 + 3600]  # off by the change, as the export's docstring says


def test_report_live_prints_a_table_per_card_part_that_declares_its_accuracy(store, tmp_path):
    uri = f"sqlite:{tmp_path / 'store'}"
    runner = CliRunner()
    shown = runner.invoke(cli.app, ["report", "live", "--store", uri, "--json"])
    assert shown.exit_code == 0, shown.output
    answer = json.loads(shown.stdout)
    assert list(answer) == [key for key, part in cards.declared().items() if part.accuracy is not None]
    assert {"failure", "wait"} <= set(answer)
    assert [(r["week"], r["model_version"], r["verdict"], r["verdicts"]) for r in answer["wait"]] == [
        ("2026-W48", "3", "first", 3), ("2026-W48", "3", "refreshed", 1), ("2026-W49", "4", "first", 1)]
    assert answer["wait"][0]["within_x2"] == accuracy_report(store)[0]["within_x2"] == 1.0
    # failure's own report through the same hook: its latest verdict per job, jobs that ended as in training
    assert [(r["week"], r["model_version"], r["jobs"], r["failed"]) for r in answer["failure"]] == [
        ("2026-W48", "7", 2, 1), ("2026-W49", "7", 1, 0)]
    table = runner.invoke(cli.app, ["report", "live", "--store", uri], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert "failure on live jobs" in table.stdout and "wait on live jobs" in table.stdout
    assert "2026-W48" in table.stdout and "2026-W49" in table.stdout


def test_report_live_of_a_store_without_verdicts_says_so(tmp_path):
    with open_store(f"sqlite:{tmp_path / 'store'}"):
        pass
    shown = CliRunner().invoke(cli.app, ["report", "live", "--store", f"sqlite:{tmp_path / 'store'}"])
    assert shown.exit_code == 0, shown.output
    assert "wait: no finished job with a verdict yet" in shown.stdout
    assert "failure: no finished job with a verdict yet" in shown.stdout
