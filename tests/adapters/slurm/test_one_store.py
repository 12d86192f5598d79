"""One store for every daemon of a node: the Slurm collector, the Slurm adapter and the HTCondor follower, each a
real process, write the default store (SQLite) at once; the collector and the follower are SIGKILLed mid-run and
started again; every job is stored once with its end from accounting, every pending job judged once (its act
audited once in the store), every hold audited once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobaware.store import open_store
from tests.adapters.htcondor.conftest import ADAPTER as HTCONDOR
from tests.adapters.htcondor.conftest import real_events
from tests.adapters.htcondor.test_adapter import renumber
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.slow

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
TEMPLATE = real_events()  # a real OSPool log: 217 events, 3 holds


def _until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _kill(process: subprocess.Popen, signum: int = signal.SIGKILL) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signum)
    process.wait(60)


def test_collector_adapter_and_follower_share_the_default_store(accounted, failure_service, tmp_path):
    store_path = str(tmp_path / "store")  # a plain folder: the embedded default, SQLite
    env = {**accounted.env, "JOBAWARE_STORE": store_path, "JOBAWARE_HOME": str(tmp_path / "home"),
           "JOBAWARE_FAILURE_URL": failure_service, "JOBAWARE_RESOURCE_URL": f"http://127.0.0.1:{free_port()}",
           "PYTHONPATH": str(ROOT)}
    log = tmp_path / "EventLog"
    jobs = [renumber(TEMPLATE, 900 + n) for n in range(6)]
    log.write_bytes(jobs[0][0])

    def start(name: str, *command: str) -> subprocess.Popen:
        return subprocess.Popen(list(command), cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=open(tmp_path / f"{name}.err", "ab"))

    def collector() -> subprocess.Popen:
        return start("collector", sys.executable, "-m", "jobaware.adapters.slurm", "collect", "--interval", "1", "--forever",
                     "--cluster", "jobaware-test")

    def follower() -> subprocess.Popen:
        return start("follower", *HTCONDOR, "follow", str(log), "--seconds", "400")

    running = {"collector": collector(), "follower": follower(),
               "adapter": start("adapter", JOBAWARE, "slurm", "adapt", "--forever", "--interval", "1",
                                "--cluster", "jobaware-test")}
    ran = [accounted.sbatch("#!/bin/bash\nsleep 2\n", "--time=1"),
           accounted.sbatch("#!/bin/bash\nexit 2\n", "--time=1")]
    held = [accounted.sbatch("#!/bin/bash\nsleep 1\n", "--hold", "--time=1") for _ in range(3)]
    written = sum(e.startswith(b"012 ") for events in jobs for e in events)
    store = open_store(store_path)

    def records() -> dict:
        return {r["job_id"]: r for r in store.records(predictions="adapter:")}

    try:
        with open(log, "ab") as writer:
            writer.write(b"".join(e for events in jobs[:3] for e in events)[len(jobs[0][0]):])
        _until(lambda: set(ran + held) <= set(records()), 120, "the collector to store every job")
        _until(lambda: sum(1 for _ in store.events("htcondor.holds")) >= 3, 120, "the follower's first holds")
        _kill(running["collector"])  # mid-run: jobs still running, accounting not closed
        _kill(running["follower"])
        with open(log, "ab") as writer:
            writer.write(b"".join(e for events in jobs[3:] for e in events))
        ran.append(accounted.sbatch("#!/bin/bash\nexit 0\n", "--time=1"))
        running["collector"], running["follower"] = collector(), follower()
        _until(lambda: all((records().get(i, {}).get("final") or {}).get("source") == "sacct" for i in ran), 240,
               "accounting's end of every job that ran")
        _until(lambda: all(records()[i]["predictions"] for i in held), 240, "a verdict for every pending job")
        _until(lambda: len([e for e in store.events("htcondor.holds") if e["record"]["kind"] == "hold"]) >= written,
               120, "every hold audited")
    finally:
        for process in running.values():
            _kill(process, signal.SIGTERM)
    got = records()
    assert len(got) == len(store.keys()) and set(ran + held) <= set(got)
    for job_id in ran:
        states = [s["state"] for s in got[job_id]["states"]]
        assert all(a != b for a, b in zip(states, states[1:])), states  # no state change twice in a row
    assert [got[i]["final"]["exit_code"] for i in ran] == [0, 2, 0]
    assert all(len(got[i]["predictions"]) == 1 for i in held)  # judged once: one verdict per job and versions
    holds = [e for e in store.events("htcondor.holds") if e["record"]["kind"] == "hold"]
    assert len(holds) == written == 18 and len({e["id"] for e in holds}) == 18
    acts = [e["record"] for e in store.events("slurm.adapt")]  # the adapter's audit, in the same store
    assert all(a["dry_run"] and a["action"] == "update" for a in acts)
    assert all([a["job_id"] for a in acts].count(i) == 1 for i in held)  # one comment act per verdict, audited once
    assert store.checkpoint("jobaware-test")["sacct_until"] > 0
    assert store.checkpoints().keys() >= {"jobaware-test", f"htcondor.follow:{log}"}
    store.close()
    for name in ("collector", "follower", "adapter"):
        assert "Traceback" not in (tmp_path / f"{name}.err").read_text(), name
