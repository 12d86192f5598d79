"""The collector killed with SIGKILL at 20 random moments on a live cluster: every job in the store exactly once,
with its final state from accounting."""

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from itertools import pairwise

import pytest

from jobaware.store import open_store
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

KILLS = 20
JOBS = {0: ("#!/bin/bash\necho {n}\n", "COMPLETED", 0), 1: ("#!/bin/bash\nsleep 2\nexit 2\n", "FAILED", 2),
        2: ("#!/bin/bash\nsleep 1\necho {n}\n", "COMPLETED", 0)}


def start(store: str, env: dict, log) -> subprocess.Popen:
    command = [sys.executable, "-m", "jobaware.adapters.slurm", "collect", "--store", store, "--interval", "0.5", "--forever",
               "--cluster", "jobaware-test"]
    return subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=ROOT)


def test_sigkill_at_20_random_moments_loses_and_duplicates_nothing(accounted, tmp_path):
    rng = random.Random(26)
    store = str(tmp_path / "store")
    env = {**accounted.env, "PYTHONPATH": str(ROOT), "JOBAWARE_HOME": str(tmp_path / "home")}
    log = open(tmp_path / "collector.log", "ab")
    submitted: dict[int, tuple[str, str, int]] = {}
    process = None
    try:
        for _kill in range(KILLS):
            process = start(store, env, log)
            for _ in range(2):
                script, state, code = JOBS[len(submitted) % len(JOBS)]
                script = script.format(n=len(submitted))
                submitted[accounted.sbatch(script, "--time=1")] = (script, state, code)
            time.sleep(rng.uniform(0.5, 4.0))
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        process = start(store, env, log)  # the last run: it must catch up on everything
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            finals = {r["job_id"]: r["final"] for r in open_store(store).records()}
            if all((finals.get(i) or {}).get("source") == "sacct" for i in submitted):
                break
            assert process.poll() is None, (tmp_path / "collector.log").read_text()[-2000:]
            time.sleep(1)
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            process.wait(30)
        log.close()
    records = [r for r in open_store(store).records() if r["job_id"] in submitted]  # the cluster ran others' too
    counts = Counter(r["job_id"] for r in records)
    assert {i: counts[i] for i in submitted} == dict.fromkeys(submitted, 1), "a job is missing or stored twice"
    for record in records:
        script, state, code = submitted[record["job_id"]]
        assert record["final"] == {"state": state, "source": "sacct", "exit_code": code, "signal": None}, record
        assert record["script"] == script and record["states"][-1]["state"] == state
        states = [s["state"] for s in record["states"]]
        assert all(a != b for a, b in pairwise(states)), f"a state change stored twice: {states}"
