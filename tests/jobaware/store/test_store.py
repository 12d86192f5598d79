"""Every store backend, given the same sequence of changes, returns the same records and answers the same queries."""

import json
import os
import subprocess
import sys

import pytest

from jobaware.errors import JobawareError
from jobaware.store import JobKey, backend, is_store, open_store
from jobaware.store.local import LOG
from jobaware.store.sqlite import DB

A, B, C = JobKey("c1", 7, 1_700_000_000), JobKey("c1", 7, 1_700_000_500), JobKey("c2", 3, 1_600_000_000)
D = JobKey("c1", 9, 1_700_000_900)  # a job known only by a prediction


def play(store) -> None:
    """A sequence of changes as the daemons make them, with the repeats a restart makes."""
    for restart in (False, True):  # a restart repeats the latest observations: the changes are idempotent
        store.put_job(A, {"job_id": 7, "state": "PENDING", "mem_req": 1000.0, "name": "a,\n\"b\""})
        if not restart:
            store.add_state(A, "PENDING", 1.0)
        store.add_state(A, "RUNNING", 2.0)
        store.put_script(A, "#!/bin/bash\necho é\n")
        store.put_script(A, "a later script is not the job's")
        store.put_job(B, {"job_id": 7, "state": "RUNNING"})  # the id reused, another submit time
        store.add_state(B, "RUNNING", 3.0)
        store.put_final(A, "FAILED", "observed")
        store.put_final(A, "OUT_OF_MEMORY", "sacct", exit_code=0, signal=9)
        store.put_final(A, "COMPLETED", "observed")  # weaker than accounting: ignored
        store.put_usage(A, {"source": "sacct", "elapsed_s": 5, "mem_used_mib": 20.5})
        store.put_usage(A, {"source": "sacct", "elapsed_s": 6, "mem_used_mib": 20.5})  # accounting's later word
        store.put_job(C, {"job_id": 3})
        store.put_prediction(A, "4", {"p_fail": 0.25})
        store.put_prediction(A, "3", {"p_fail": 0.5})
        store.put_prediction(A, "adapter:failure=3", {"card": {"p": 1}})
        store.put_prediction(D, "adapter:failure=3", {"card": {"p": 2}})
        store.put_checkpoint("c1", {"sacct_until": 1_700_000_000})
        store.put_checkpoint("htcondor:follow", {"positions": {"EventLog": {"offset": 12}}})
        store.put_event("holds", "1.0.0@t#0", {"kind": "hold", "job": "1.0.0"}, subject="1.0.0")
        store.put_event("holds", "outcome:1.0.0@t#9", {"kind": "outcome", "job": "1.0.0"})
        store.put_event("audit", "x", {"kind": "act"})
    store.put_record({"cluster": "c3", "job_id": 1, "submit_time": 5, "row": {"a": 1},
                      "states": [{"state": "PENDING", "time": 1.0}, {"state": "PENDING", "time": 2.0}],
                      "script": None, "final": {"state": "CANCELLED", "source": "sacct", "exit_code": 0},
                      "usage": {"elapsed_s": 0}})


def contents(store) -> dict:
    return {"records": list(store.records()), "open": [store.open_keys(c) for c in ("c1", "c2")],
            "outcomes": list(store.outcomes()), "checkpoint": store.checkpoint("c1"), "none": store.checkpoint("c9"),
            "missing": store.get(JobKey("c1", 8, 1)), "keys": store.keys(),
            "window": store.keys("c1", since=1_700_000_000, until=1_700_000_500),
            "newest": list(store.records("c1", since=1_700_000_000, newest_first=True, predictions="adapter:")),
            "count": [store.count(), store.count("c1"), store.count(since=1_700_000_000), store.count("c9")],
            "by_name": list(store.predictions_by_name("adapter:")), "all_predictions": list(store.predictions_by_name()),
            "checkpoints": store.checkpoints(), "streams": store.streams(),
            "events": {s: list(store.events(s)) for s in store.streams()},
            "subjects": [store.has_subject("holds", "1.0.0"), store.has_subject("holds", "2.0.0")],
            "has": [store.has_event("holds", "1.0.0@t#0"), store.has_event("audit", "1.0.0@t#0")]}


@pytest.fixture
def stores(tmp_path, fresh_redis):
    """One store of each backend."""
    opened = [open_store(f"folder:{tmp_path / 'folder'}"), open_store(f"sqlite:{tmp_path / 'sqlite'}"),
              open_store(fresh_redis)]
    yield opened
    for store in opened:
        store.close()


def test_every_backend_gives_the_same_records_and_answers(tmp_path, fresh_redis, stores):
    for store in stores:
        play(store)
    got = contents(stores[0])
    for store in stores[1:]:
        assert contents(store) == got, type(store).__name__
    assert [r["job_id"] for r in got["records"]] == [1, 3, 7, 7]
    a = got["records"][2]
    assert a["states"] == [{"state": "PENDING", "time": 1.0}, {"state": "RUNNING", "time": 2.0}]
    assert a["script"] == "#!/bin/bash\necho é\n" and a["row"]["name"] == "a,\n\"b\""
    assert a["final"] == {"state": "OUT_OF_MEMORY", "source": "sacct", "exit_code": 0, "signal": 9}
    assert a["usage"] == {"source": "sacct", "elapsed_s": 6, "mem_used_mib": 20.5}
    assert got["records"][0]["usage"] == {"elapsed_s": 0} and got["records"][3]["usage"] is None
    assert got["open"] == [[B], [C]]
    assert got["outcomes"][1] == {"key": A, "final": a["final"], "predictions": {
        "3": {"p_fail": 0.5}, "4": {"p_fail": 0.25}, "adapter:failure=3": {"card": {"p": 1}}}}
    assert got["window"] == [A] and [r["job_id"] for r in got["newest"]] == [7, 7]
    assert [r["predictions"] for r in got["newest"]] == [{}, {"adapter:failure=3": {"card": {"p": 1}}}]
    assert got["count"] == [4, 2, 2, 0]
    assert got["by_name"] == [(A, "adapter:failure=3", {"card": {"p": 1}}), (D, "adapter:failure=3", {"card": {"p": 2}})]
    assert len(got["all_predictions"]) == 4
    assert got["checkpoint"] == {"sacct_until": 1_700_000_000} and got["none"] == {} and got["missing"] is None
    assert got["streams"] == ["audit", "holds"] and [e["id"] for e in got["events"]["holds"]] == [
        "1.0.0@t#0", "outcome:1.0.0@t#9"]
    assert got["events"]["holds"][0] == {"id": "1.0.0@t#0", "subject": "1.0.0", "record": {"kind": "hold", "job": "1.0.0"}}
    assert got["subjects"] == [True, False] and got["has"] == [True, False]
    # reopened, each backend still holds it all
    for uri in (f"folder:{tmp_path / 'folder'}", f"sqlite:{tmp_path / 'sqlite'}", fresh_redis):
        with open_store(uri) as store:
            assert contents(store) == got


def test_a_listing_reads_page_by_page(tmp_path, monkeypatch):
    monkeypatch.setattr("jobaware.store.sqlite.PAGE", 3)
    with open_store(str(tmp_path / "store")) as store:
        for i in range(10):
            store.put_job(JobKey("c", i, 1000 + i // 2), {"i": i})
            store.add_state(JobKey("c", i, 1000 + i // 2), "PENDING", 1.0)
            store.put_prediction(JobKey("c", i, 1000 + i // 2), "m", {"i": i})
        assert [r["row"]["i"] for r in store.records()] == list(range(10))
        assert [r["row"]["i"] for r in store.records(newest_first=True)] == list(range(9, -1, -1))
        assert [r["predictions"] for r in store.records(since=1002, until=1004, predictions="m")] == [
            {"m": {"i": i}} for i in range(4, 8)]
        assert [a["i"] for _, _, a in store.predictions_by_name("m")] == list(range(10))


def test_a_change_cut_short_by_a_crash_is_dropped_and_cut_off(tmp_path):
    folder = tmp_path / "store"
    with open_store(f"folder:{folder}") as store:
        play(store)
        before = contents(store)
    log = folder / LOG
    lines = log.read_bytes().count(b"\n")
    with open(log, "ab") as handle:
        handle.write(b'["state","c1:7:1700000000","COMPLE')  # the crash came mid-write
    with open_store(str(folder)) as store:
        assert contents(store) == before
        store.add_state(A, "COMPLETED", 4.0)
    assert log.read_bytes().count(b"\n") == lines + 1
    with open_store(str(folder)) as store:
        assert store.get(A)["states"][-1] == {"state": "COMPLETED", "time": 4.0}


def test_the_folder_store_has_one_writer_and_sqlite_many(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    for uri, refused in ((f"folder:{tmp_path / 'folder'}", True), (f"sqlite:{tmp_path / 'sqlite'}", False)):
        with open_store(uri) as store:
            store.put_job(A, {})
            other = subprocess.run([sys.executable, "-c", "from jobaware.store import *; "
                                    f"open_store({uri!r}).put_job(JobKey('c', 1, 1), {{}})"],
                                   capture_output=True, text=True, env=env)
            assert ("another process is writing to it" in other.stderr) is refused, other.stderr
            assert other.returncode == (1 if refused else 0)
            if not refused:
                assert store.keys() == [JobKey("c", 1, 1), A]
    assert is_store(str(tmp_path / "folder")) and is_store(str(tmp_path / "sqlite")) and not is_store(str(tmp_path))


def test_a_plain_path_is_the_folder_log_it_holds_else_sqlite(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / LOG).write_text("")
    assert backend(str(tmp_path / "old")) == ("folder", str(tmp_path / "old"))
    assert backend(str(tmp_path / "new")) == ("sqlite", str(tmp_path / "new"))
    assert backend("sqlite:///var/x") == ("sqlite", "/var/x") and backend("folder:x") == ("folder", "x")
    (tmp_path / "old" / DB).write_text("")
    with pytest.raises(JobawareError, match="holds both a folder log"):
        open_store(str(tmp_path / "old"))


def test_bad_stores_are_one_line_errors(tmp_path):
    with pytest.raises(JobawareError, match="unknown scheme"):
        open_store("kafka://x/y")
    with pytest.raises(JobawareError, match="cannot reach Redis"):
        open_store("redis://127.0.0.1:1/0")
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / LOG).write_text(json.dumps(["job", "c:1:1", {}]) + "\nnot json\n")
    with pytest.raises(JobawareError, match=r"jobs.log, line 2: not a job store change"):
        open_store(str(folder))
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / DB).write_bytes(b"not a database at all" * 100)
    with pytest.raises(JobawareError, match=r"jobs.db: not a jobaware SQLite store"):
        open_store(str(tmp_path / "garbage"))
    with pytest.raises(ValueError, match="final state source"):
        open_store(str(tmp_path / "other")).put_final(A, "FAILED", "guess")


def test_a_folder_batch_syncs_once_and_the_checkpoint_after_what_it_covers(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr("jobaware.store.local.os.fsync", lambda fd: synced.append(fd))
    with open_store(f"folder:{tmp_path / 'store'}") as store:
        with store.batch():
            play(store)
            assert store.get(A)["final"]["source"] == "sacct"  # applied at once, synced at the end
        in_batch = len(synced)
        store.put_job(C, {"job_id": 3, "name": "x"})
        assert len(synced) == in_batch + 1
    assert in_batch == 5  # the folder, the changes before the first checkpoint, each checkpoint, the last changes


def test_a_sqlite_batch_commits_unsynced_then_syncs_once(tmp_path):
    with open_store(str(tmp_path / "store")) as store:
        with store.batch():
            play(store)
            assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
            assert store.get(A)["final"]["source"] == "sacct"
        assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store.db.execute("SELECT value FROM meta WHERE name = 'synced'").fetchone() is not None
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_sqlite_store_of_the_first_format_gains_usage_and_keeps_its_jobs(tmp_path):
    import sqlite3

    folder = tmp_path / "old"
    folder.mkdir()
    old = sqlite3.connect(folder / DB)
    old.executescript("""PRAGMA journal_mode=WAL;
        CREATE TABLE jobs (id INTEGER PRIMARY KEY, cluster TEXT NOT NULL, job_id INTEGER NOT NULL,
            submit_time INTEGER NOT NULL, fields TEXT NOT NULL DEFAULT '{}', script TEXT, final TEXT,
            UNIQUE (cluster, submit_time, job_id));
        CREATE TABLE states (job INTEGER NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL, time REAL NOT NULL,
            PRIMARY KEY (job, seq)) WITHOUT ROWID;
        CREATE TABLE predictions (submit_time INTEGER NOT NULL, cluster TEXT NOT NULL, job_id INTEGER NOT NULL,
            name TEXT NOT NULL, answer TEXT NOT NULL, PRIMARY KEY (submit_time, cluster, job_id, name)) WITHOUT ROWID;
        CREATE TABLE checkpoints (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, id TEXT NOT NULL,
            subject TEXT, record TEXT NOT NULL, UNIQUE (stream, id));
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
        INSERT INTO jobs (cluster, job_id, submit_time, fields, final) VALUES ('c1', 7, 5, '{"a":1}',
            '{"state":"COMPLETED","source":"sacct","exit_code":0,"signal":null}');
        PRAGMA user_version=1;""")
    old.close()
    with open_store(str(folder)) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == 2
        [record] = store.records()
        assert record["row"] == {"a": 1} and record["final"]["state"] == "COMPLETED" and record["usage"] is None
        store.put_usage(JobKey("c1", 7, 5), {"elapsed_s": 3})
        assert store.get(JobKey("c1", 7, 5))["usage"] == {"elapsed_s": 3}
