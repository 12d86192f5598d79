"""Live accuracy as the Slurm adapter exports it: `jobaware report live`'s newest week per model version, every
numeric column a figure; the exporter computing it in its own thread from its own connection to the store."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from jobaware import live, metrics
from jobaware.adapters.slurm.adapter import verdict_name
from jobaware.store import JobKey, open_store

WEEK = 7 * 86_400
MONDAY = 1_780_272_000  # 2026-06-01, a Monday


def judged(store, job_id: int, submit: int, state: str, p_fail: float, version: str) -> None:
    """A finished job with the failure verdict an adapter kept for it."""
    key = JobKey("c", job_id, submit)
    store.put_job(key, {"user": "alice", "partition": "debug"})
    store.put_final(key, state, "sacct", 0 if state == "COMPLETED" else 1)
    card = {"created": submit + 1, "parts": {"failure": {"status": "ok", "p_fail": p_fail, "likely": "FAILED",
                                                         "threshold": 0.5, "likely_fail": p_fail >= 0.5,
                                                         "model_version": version}}}
    store.put_prediction(key, verdict_name({"failure": version}), {"card": card, "acts": []})


def test_the_newest_week_of_each_version_is_exported_with_every_figure(tmp_path):
    store = open_store(str(tmp_path / "store"))
    for i, (state, p_fail) in enumerate([("FAILED", 0.9), ("COMPLETED", 0.2), ("FAILED", 0.1), ("COMPLETED", 0.05)]):
        judged(store, 100 + i, MONDAY - WEEK + 3600 * i, state, p_fail, "2")  # a week before: not exported
        judged(store, 200 + i, MONDAY + 3600 * i, state, p_fail, "3")
        judged(store, 300 + i, MONDAY + 7200 + 3600 * i, "COMPLETED" if i else "FAILED", 0.3, "4")
    rows = live.reports(store)["failure"]
    assert [(r["week"], r["model_version"]) for r in rows] == [("2026-W22", "2"), ("2026-W23", "3"),
                                                               ("2026-W23", "4")]
    series = metrics.Group(metrics.LIVE, CollectorRegistry())
    count = live.export(series, store, now=MONDAY + WEEK)
    value = series.registry.get_sample_value
    newest = rows[1]
    for figure in ("jobs", "failed", "flagged", "roc_auc", "accuracy", "ece"):
        assert value("jobaware_live_accuracy", {"capability": "failure", "model_version": "3",
                                                "figure": figure}) == newest[figure]
    assert value("jobaware_live_accuracy", {"capability": "failure", "model_version": "2", "figure": "jobs"}) is None
    assert value("jobaware_live_computed_timestamp_seconds") == MONDAY + WEEK
    assert count == sum(len(figures) for figures in live.newest(rows).values())
    # a later computation replaces the figures whole: version 3's rows gone from the store, its series go too
    store.close()
    store = open_store(str(tmp_path / "other"))
    judged(store, 1, MONDAY, "FAILED", 0.9, "5")
    live.export(series, store)
    assert value("jobaware_live_accuracy", {"capability": "failure", "model_version": "3", "figure": "jobs"}) is None
    assert value("jobaware_live_accuracy", {"capability": "failure", "model_version": "5", "figure": "jobs"}) == 1
    assert value("jobaware_live_accuracy", {"capability": "failure", "model_version": "5",
                                            "figure": "roc_auc"}) is None  # NaN with one class: not shown


def test_a_split_week_stands_by_its_first_row_and_an_empty_table_gives_nothing():
    rows = [{"week": "2026-W23", "model_version": "1", "verdict": "first", "jobs": 5, "within_x2": 0.6},
            {"week": "2026-W23", "model_version": "1", "verdict": "refreshed", "jobs": 5, "within_x2": 0.9},
            {"week": "2026-W22", "model_version": "1", "verdict": "first", "jobs": 9, "within_x2": 0.1}]
    assert live.newest(rows) == {"1": {"jobs": 5.0, "within_x2": 0.6}}
    assert live.newest([]) == {}


def test_the_exporter_computes_in_its_own_thread_and_says_when_it_cannot(tmp_path, caplog):
    store = open_store(str(tmp_path / "store"))
    judged(store, 1, MONDAY, "FAILED", 0.9, "3")
    store.close()
    series = metrics.Group(metrics.LIVE, CollectorRegistry())
    exporter = live.Exporter(series, str(tmp_path / "store"), every=3600)
    deadline = time.monotonic() + 30
    while series.registry.get_sample_value("jobaware_live_computed_timestamp_seconds") is None:
        assert time.monotonic() < deadline, "not computed"
        time.sleep(0.05)
    exporter.close()
    assert not exporter.thread.is_alive()
    assert series.registry.get_sample_value("jobaware_live_accuracy", {"capability": "failure",
                                                                       "model_version": "3", "figure": "jobs"}) == 1
    broken = live.Exporter(series, "nowhere://x", every=3600)
    broken.close()
    assert "live accuracy not computed: JobawareError" in caplog.text
