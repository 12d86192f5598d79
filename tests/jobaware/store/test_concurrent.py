"""Daemons share one store: real processes write at once, one is SIGKILLed mid-write and restarted, nothing is lost
or doubled."""

import os
import random
import signal
import subprocess
import sys

import pytest

from jobaware.store import open_store
from tests.conftest import ROOT
from tests.jobaware.store.writer import STATES, key

COUNT = 600


def _start(role: str, uri: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.jobaware.store.writer", role, uri, str(COUNT)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _reached(process: subprocess.Popen, item: int) -> bool:
    """Wait until the writer has written `item` (it goes on writing meanwhile); False when it ended before."""
    for line in process.stdout:
        if int(line) >= item:
            return True
    return False


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_three_daemons_write_at_once_and_a_sigkill_loses_and_doubles_nothing(tmp_path, backend, request):
    uri = f"sqlite:{tmp_path / 'store'}" if backend == "sqlite" else request.getfixturevalue("fresh_redis")
    rng = random.Random(11)
    running = {role: _start(role, uri) for role in ("collector", "adapter", "follower")}
    kills = 0
    try:
        for role, item in (("collector", 100), ("follower", 150), ("collector", 250), ("adapter", 300),
                           ("collector", 450)):
            if _reached(running[role], item + rng.randrange(50)):  # killed while it writes
                running[role].send_signal(signal.SIGKILL)
                running[role].wait(10)
                kills += 1
                running[role] = _start(role, uri)
        for role, process in running.items():
            process.stdout.read()
            assert process.wait(240) == 0, f"{role}: {process.stderr.read()}"
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert kills == 5
    with open_store(uri) as store:
        records = list(store.records())
        assert [r["job_id"] for r in records] == list(range(COUNT))
        assert all([s["state"] for s in r["states"]] == list(STATES) for r in records)
        assert all(r["script"] == f"#!/bin/bash\necho {r['job_id']}\n" for r in records)
        assert all(r["final"] == {"state": "COMPLETED", "source": "sacct", "exit_code": 0, "signal": None} for r in records)
        assert [k.job_id for k, _, _ in store.predictions_by_name("adapter:")] == list(range(COUNT))
        assert [e["id"] for e in store.events("holds")] == [f"{i}.0.0@t#{i * 100}" for i in range(COUNT)]
        assert [e["record"]["job"] for e in store.events("audit")] == list(range(COUNT))
        assert store.checkpoints() == {"adapter": {"done": COUNT}, "follower": {"at": COUNT}, "site": {"done": COUNT}}
        assert store.has_subject("holds", f"{COUNT - 1}.0.0") and store.open_keys("site") == []
        assert store.get(key(0))["row"]["user"] == "u0"


def _open_at(folder: str, barrier, said) -> None:
    from jobaware.store.sqlite import SqliteStore

    barrier.wait()
    try:
        SqliteStore(folder).db.close()
        said.put("opened")
    except Exception as exc:  # noqa: BLE001 - the test reports what any process met
        said.put(str(exc))


def test_daemons_that_open_a_new_sqlite_store_at_the_same_moment_all_open_it(tmp_path):
    """Six processes open one new store at once, twenty times: SQLite refuses a journal-mode change or a schema
    creation at once while another process makes it (no busy timeout there), and the store waits for it instead of
    failing; before, about one open in twenty failed with 'database is locked'."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    said = []
    for round_ in range(20):
        barrier, answers = context.Barrier(6), context.Queue()
        processes = [context.Process(target=_open_at, args=(str(tmp_path / str(round_)), barrier, answers))
                     for _ in range(6)]
        for process in processes:
            process.start()
        said += [answers.get(timeout=120) for _ in processes]
        for process in processes:
            process.join(60)
    assert said == ["opened"] * 120, [s for s in said if s != "opened"][:3]
