"""Both store backends, given the same sequence of changes, return the same records."""

import json
import os
import subprocess
import sys

import pytest

from jobaware.errors import JobawareError
from jobaware.store import JobKey, is_store, open_store
from jobaware.store.local import LOG

A, B, C = JobKey("c1", 7, 1_700_000_000), JobKey("c1", 7, 1_700_000_500), JobKey("c2", 3, 1_600_000_000)


def play(store) -> None:
    """A sequence of changes as a collector makes them, with the repeats a restart makes."""
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
        store.put_final(A, "FAILED", "sacct", exit_code=1)
        store.put_final(A, "COMPLETED", "observed")  # weaker than accounting: ignored
        store.put_job(C, {"job_id": 3})
        store.put_prediction(A, "4", {"p_fail": 0.25})
        store.put_prediction(A, "3", {"p_fail": 0.5})
        store.put_checkpoint("c1", {"sacct_since": 1_700_000_000})


def contents(store) -> dict:
    return {"records": list(store.records()), "open": [store.open_keys(c) for c in ("c1", "c2")],
            "outcomes": list(store.outcomes()), "checkpoint": store.checkpoint("c1"), "none": store.checkpoint("c9"),
            "missing": store.get(JobKey("c1", 8, 1))}


def test_local_and_redis_give_the_same_records(tmp_path, fresh_redis):
    with open_store(str(tmp_path / "store")) as local, open_store(fresh_redis) as remote:
        play(local)
        play(remote)
        got = contents(local)
        assert got == contents(remote)
    assert [r["job_id"] for r in got["records"]] == [3, 7, 7]
    a = got["records"][1]
    assert a["states"] == [{"state": "PENDING", "time": 1.0}, {"state": "RUNNING", "time": 2.0}]
    assert a["script"] == "#!/bin/bash\necho é\n" and a["row"]["name"] == "a,\n\"b\""
    assert a["final"] == {"state": "FAILED", "source": "sacct", "exit_code": 1}
    assert got["open"] == [[B], [C]]
    assert got["outcomes"] == [{"key": A, "final": a["final"], "predictions": {"3": {"p_fail": 0.5}, "4": {"p_fail": 0.25}}}]
    assert got["checkpoint"] == {"sacct_since": 1_700_000_000} and got["none"] == {} and got["missing"] is None
    # reopened, each backend still holds it all
    with open_store(str(tmp_path / "store")) as local, open_store(fresh_redis) as remote:
        assert contents(local) == contents(remote) == got


def test_a_change_cut_short_by_a_crash_is_dropped_and_cut_off(tmp_path):
    folder = tmp_path / "store"
    with open_store(str(folder)) as store:
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


def test_one_writer_at_a_time(tmp_path):
    folder = str(tmp_path / "store")
    with open_store(folder) as store:
        store.put_job(A, {})
        other = subprocess.run([sys.executable, "-c", "import sys; from jobaware.store import *; "
                                f"open_store({folder!r}).put_job(JobKey('c', 1, 1), {{}})"],
                               capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert "another process is writing to it" in other.stderr
    assert is_store(folder) and not is_store(str(tmp_path))


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
    with pytest.raises(ValueError, match="final state source"):
        open_store(str(tmp_path / "other")).put_final(A, "FAILED", "guess")


def test_a_batch_syncs_once_and_the_checkpoint_after_what_it_covers(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr("jobaware.store.local.os.fsync", lambda fd: synced.append(fd))
    with open_store(str(tmp_path / "store")) as store:
        with store.batch():
            play(store)
            assert store.get(A)["final"]["source"] == "sacct"  # applied at once, synced at the end
        in_batch = len(synced)
        store.put_job(C, {"job_id": 3, "name": "x"})
        assert len(synced) == in_batch + 1
    assert in_batch == 3  # the folder, the changes before the checkpoint, the checkpoint
