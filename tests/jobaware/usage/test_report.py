"""`report jobs` and `report waste` over a store of jobs of known use: the efficiencies, the arrays as one row,
the filters, what was said before the run beside what happened, and the totals of waste."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from jobaware.errors import UsageError
from jobaware.store import open_store
from jobaware.usage.jobs import Filters, job_ids, moment, report, said_text
from jobaware.usage.measures import efficiencies, next_request, options
from jobaware.usage.waste import waste
from tests.jobaware.usage.conftest import NOW


def test_efficiencies_and_the_values_to_ask_for_next_time():
    facts = {"state": "COMPLETED", "elapsed_s": 600, "time_limit_s": 3600, "cpus": 2, "cpu_time_s": 1080.0,
             "mem_req_mib": 4096.0, "mem_used_mib": 1024.0, "nodes": 2}
    measured = efficiencies(facts)
    assert measured["time_eff"] == pytest.approx(1 / 6) and measured["cpu_eff"] == pytest.approx(0.9)
    assert measured["mem_eff"] == 0.25 and measured["node_hours"] == pytest.approx(2 * 600 / 3600)
    assert measured["idle_cpu_hours"] == pytest.approx((1200 - 1080) / 3600)
    assert measured["unused_time_node_hours"] == pytest.approx(2 * 3000 / 3600)
    assert measured["unused_mem_gib_hours"] == pytest.approx(2 * 3 * 600 / 3600)
    wanted = next_request(facts)
    assert (wanted["time_s"], wanted["mem_mib"], wanted["cpus"]) == (900, 1280, None)  # 720 s -> 15 min; 1229 MiB
    assert options(wanted) == "--time=0:15:00 --mem=1280M"
    idle = next_request({**facts, "cpus": 8, "cpu_time_s": 600.0})  # one CPU of eight busy
    assert idle["cpus"] == 2 and options(idle).endswith("2 CPUs")
    out_of_time = next_request({**facts, "state": "TIMEOUT", "elapsed_s": 3600})
    assert out_of_time["time_s"] is None and "ran out of time at its limit of 1:00:00" in out_of_time["notes"][0]
    memory = next_request({**facts, "state": "OUT_OF_MEMORY", "mem_used_mib": 4090.0})
    assert memory["mem_mib"] is None and "ran out of memory" in memory["notes"][0]
    unknown = efficiencies({"state": "COMPLETED"})
    assert set(unknown.values()) == {None} and next_request({})["notes"] == ["accounting has no record of its use"]


def test_a_moment_and_job_ids_are_read_or_refused_as_usage_errors():
    assert moment("7d", NOW, "--since") == NOW - 7 * 86_400 and moment("90m", NOW, "--since") == NOW - 5400
    assert moment("all", NOW, "--since") is None and moment("now", NOW, "--until") == NOW
    assert moment("2026-01-31", NOW, "--since") == pytest.approx(dt.datetime(2026, 1, 31).timestamp())
    with pytest.raises(UsageError, match=r"--since 'yesterday': expected a time ago"):
        moment("yesterday", NOW, "--since")
    assert job_ids(["12,13_4", "7"]) == [(12, None), (13, 4), (7, None)]
    with pytest.raises(UsageError, match=r"--job '12_x': expected a job id"):
        job_ids(["12_x"])


def _rows(store_uri, **filters):
    with open_store(store_uri) as store:
        return report(store, Filters(**filters))


def test_one_row_per_job_an_array_as_one_row_and_the_totals(store_uri):
    found = _rows(store_uri)
    jobs = {row["job"]: row for row in found.rows}
    assert list(jobs) == ["200_[0-9]", "106", "104", "103", "102", "101"]  # newest first
    assert found.jobs == 15 and found.not_finished == 1 and found.unaccounted == 1
    assert found.states == {"COMPLETED": 11, "FAILED": 2, "TIMEOUT": 1, "OUT_OF_MEMORY": 1}
    alice = jobs["101"]
    assert (alice["cpu_eff"], alice["mem_eff"]) == (pytest.approx(0.9), 0.25) and alice["time_eff"] == pytest.approx(1 / 6)
    assert alice["wait_s"] == 30 and alice["accounted"]
    unaccounted = jobs["104"]  # no accounting: time from the record's row, CPU and memory use unknown
    assert unaccounted["elapsed_s"] == 50.0 and unaccounted["time_eff"] == pytest.approx(50 / 60)
    assert unaccounted["cpu_eff"] is None and unaccounted["mem_eff"] is None and not unaccounted["accounted"]
    array = jobs["200_[0-9]"]
    assert array["tasks"] == 10 and array["states"] == {"COMPLETED": 9, "FAILED": 1}
    cpu = array["distribution"]["cpu_eff"]
    assert cpu["n"] == 10 and cpu["min"] == pytest.approx(0.5) and cpu["max"] == pytest.approx(95 / 190)
    assert array["distribution"]["elapsed_s"]["median"] == pytest.approx(145.0)
    assert array["node_hours"] == pytest.approx(sum(100 + 10 * t for t in range(10)) / 3600)
    failed_hours = (100 + 30 + 170) / 3600  # 102, 106 (out of memory) and the array's failed task
    assert found.failed_node_hours == pytest.approx(failed_hours) and found.timeout_node_hours == pytest.approx(600 / 3600)
    assert len(found.points["cpu_eff"]) == 14 and len(found.points["memory"]) == 14  # all but 104


def test_the_filters(store_uri):
    assert [r["job"] for r in _rows(store_uri, users={"bob"}).rows] == ["103", "102"]
    assert [r["job"] for r in _rows(store_uri, accounts={"chem"}).rows] == ["103"]
    assert [r["job"] for r in _rows(store_uri, partitions={"long", "nowhere"}).rows] == ["103"]
    assert [r["job"] for r in _rows(store_uri, jobs=[(200, None)]).rows] == ["200_[0-9]"]  # the array, whole
    assert [r["job"] for r in _rows(store_uri, jobs=[(200, 3)]).rows] == ["200_3"]  # one task
    assert [r["job"] for r in _rows(store_uri, jobs=[(205, None)]).rows] == ["200_5"]  # a task by its own id
    assert [r["job"] for r in _rows(store_uri, arrays={200}).rows] == ["200_[0-9]"]
    assert _rows(store_uri, users={"nobody"}).jobs == 0
    assert _rows(store_uri, since=NOW, until=None).jobs == 0  # a period with no job
    limited = _rows(store_uri)
    with open_store(store_uri) as store:
        two = report(store, Filters(), limit=2)
    assert [r["job"] for r in two.rows] == [r["job"] for r in limited.rows][:2] and two.not_listed == 4
    assert two.jobs == limited.jobs  # the totals count every job


def test_what_was_said_before_is_shown_beside_what_happened(store_uri, monkeypatch):
    rows = {r["job"]: r for r in _rows(store_uri).rows}
    # no capability declares `after` here: each answered part shown by its fields, from the newest card
    assert said_text(rows["101"]["said"]) == ("failure: likely TIMEOUT, likely_fail False, p_fail 0.05, "
                                              "threshold 0.3")
    assert [s["part"] for s in rows["103"]["said"]] == ["failure"]  # the unavailable part is left out
    assert rows["102"]["said"] == []

    def after(part, happened):  # a part that can tell: said TIMEOUT likely, and what came of it
        return {"said": f"{part['likely']} likely" if part["likely_fail"] else "no failure likely",
                "happened": happened["state"], "right": part["likely_fail"] == (happened["state"] != "COMPLETED"),
                "released_node_hours": 0.25}

    fake = SimpleNamespace(card=SimpleNamespace(after=after))
    monkeypatch.setattr("jobaware.capabilities.registry", lambda: {"failure": fake})
    rows = {r["job"]: r for r in _rows(store_uri).rows}
    assert said_text(rows["103"]["said"]) == "failure: TIMEOUT likely -> TIMEOUT (right)"
    assert said_text(rows["101"]["said"]) == "failure: no failure likely -> COMPLETED (right)"
    with open_store(store_uri) as store:
        groups, total = waste(store, Filters())
    assert total["released_by"] == {"failure": 0.5}


def test_waste_per_user_and_the_totals(store_uri):
    with open_store(store_uri) as store:
        groups, total = waste(store, Filters())
        by_partition, _ = waste(store, Filters(), by="partition")
    users = {g["user"]: g for g in groups}
    assert list(users) == ["dave", "bob", "alice", "carol"]  # most wasted first
    assert users["dave"]["wasted"] == pytest.approx((1280 * 0.5 + 170) / 3600)  # idle halves, the failed task
    bob = users["bob"]
    assert bob["failed"] == pytest.approx(100 * 1 / 3600) and bob["timeout"] == pytest.approx(600 / 3600)
    assert bob["wasted"] == pytest.approx(700 / 3600) and bob["idle"] == 0.0
    alice = users["alice"]
    assert alice["idle"] == pytest.approx(600 / 3600 * 0.1) and alice["unaccounted"] == 1
    assert alice["unused_limit"] == pytest.approx((3000 + 10) / 3600)
    assert alice["released_by_use"] == pytest.approx((3600 - 900 + 0) / 3600)  # 104 asked 60 s: nothing to release
    assert total["jobs"] == 15 and total["wasted"] == pytest.approx(sum(g["wasted"] for g in groups))
    assert {g["partition"] for g in by_partition} == {"debug", "long"}


def test_an_array_of_ten_thousand_tasks_is_one_row(tmp_path):
    from tests.jobaware.usage.conftest import record, usage

    with open_store(str(tmp_path / "store")) as store, store.batch():
        for task in range(10_000):
            store.put_record(record(500_000 + task, NOW - 3600, "erin", "COMPLETED",
                                    usage(60 + task % 100, 3600, 1, (60 + task % 100) * (task % 10) / 10, 1000.0,
                                          100.0 + task % 50, array_job_id=500_000, array_task_id=task)))
    with open_store(str(tmp_path / "store")) as store:
        found = report(store, Filters(), limit=5)
    [row] = found.rows
    assert row["job"] == "500000_[0-9999]" and row["tasks"] == 10_000 and found.not_listed == 0
    cpu = row["distribution"]["cpu_eff"]
    assert (cpu["n"], cpu["min"], cpu["median"], cpu["max"]) == (10_000, 0.0, pytest.approx(0.45), pytest.approx(0.9))
    assert row["distribution"]["mem_used_mib"]["max"] == 149.0 and len(found.points["cpu_eff"]) == 10_000


def test_a_damaged_store_records_use_is_unknown_not_a_negative_or_garbled_number(tmp_path):
    """Found by a hostile review: a store record with a negative elapsed, CPU time or memory (or one that is not a
    number) was shown as ran '-1-23:58:20', time efficiency -17 %, -0.03 node-hours, and summed into the waste."""
    from tests.jobaware.usage.conftest import record, usage

    uri = str(tmp_path / "store")
    with open_store(uri) as store:
        store.put_record(record(301, NOW - 100, "dave", "COMPLETED", usage(-100, 600, 2, -5.0, 100.0, -3.0)))
        garbled = record(302, NOW - 90, "dave", "COMPLETED", usage(100, 600, 2, float("nan"), 100.0, 3.0))
        garbled["usage"]["elapsed_s"] = "100"
        store.put_record(garbled)
        found = report(store, Filters(users={"dave"}))
        _, total = waste(store, Filters())
    rows = {row["job"]: row for row in found.rows}
    for job in ("301", "302"):
        assert rows[job]["elapsed_s"] is None and rows[job]["cpu_time_s"] is None and rows[job]["time_eff"] is None
        assert rows[job]["node_hours"] is None and rows[job]["cpu_eff"] is None
    assert rows["301"]["mem_used_mib"] is None and rows["301"]["mem_eff"] is None and rows["302"]["mem_eff"] == 0.03
    assert total["jobs"] == 2 and total["node_hours"] == 0.0


def test_a_measure_beyond_belief_is_unknown_not_a_huge_number(tmp_path):
    """Found by a hostile review: a record with an elapsed of 1e12 s made 'report waste' total 277,777,777,777,778
    node-hours, and sacct's TotalCPU of 99 days over 100 s on 2 CPUs gave a CPU efficiency of 4,276,800 %."""
    from tests.jobaware.usage.conftest import record, usage

    uri = str(tmp_path / "store")
    with open_store(uri) as store:
        store.put_record(record(401, NOW - 100, "erin", "COMPLETED", usage(10**12, 600, 2, 5.0, 100.0, 3.0)))
        store.put_record(record(402, NOW - 90, "erin", "COMPLETED", usage(100, 600, 2, 99 * 86_400.0, 100.0, 2.0**31)))
        store.put_record(record(403, NOW - 80, "erin", "COMPLETED", usage(100, 600, 2, 150.0, 100.0, 3.0)))
        found = report(store, Filters(users={"erin"}))
        _, total = waste(store, Filters())
    rows = {row["job"]: row for row in found.rows}
    assert rows["401"]["elapsed_s"] is None and rows["401"]["node_hours"] is None
    assert rows["402"]["cpu_time_s"] is None and rows["402"]["cpu_eff"] is None  # beyond twice what 2 CPUs give
    assert rows["402"]["mem_used_mib"] is None and rows["402"]["mem_eff"] is None  # two pebibytes a node
    assert rows["403"]["cpu_eff"] == 0.75 and rows["403"]["elapsed_s"] == 100
    assert total["node_hours"] < 1
