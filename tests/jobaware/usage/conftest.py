"""A job store holding finished jobs of known use: single jobs of every end, a job without accounting data, a job
not finished yet, and an array of ten tasks; the adapter's cards kept for two of them."""

from __future__ import annotations

import pytest

from jobaware.store import JobKey, open_store

NOW = 1_780_000_000  # 2026-05-28: in the past, so that `--until now` keeps every job
CLUSTER = "c1"


def usage(elapsed, limit, cpus, cpu_time, asked, used, state="COMPLETED", nodes=1, **extra) -> dict:
    return {"source": "sacct", "state": state, "elapsed_s": elapsed, "time_limit_s": limit, "cpus": cpus,
            "cpu_time_s": cpu_time, "nodes": nodes, "gpus": 0, "mem_req_mib": asked, "mem_used_mib": used,
            "mem_step": "batch", "exit_code": 0, "signal": None, **extra}


def record(job_id, submit, user, state, use=None, account="phys", partition="debug", row=None, final=True,
           exit_code=0, signal=None) -> dict:
    base = {"user": user, "account": account, "partition": partition, "name": f"job{job_id}",
            "start_time": submit + 30, "end_time": submit + 30 + ((use or {}).get("elapsed_s") or 0), "state": state}
    return {"cluster": CLUSTER, "job_id": job_id, "submit_time": submit, "row": {**base, **(row or {})},
            "states": [{"state": "PENDING", "time": float(submit)}], "script": None,
            "final": {"state": state, "source": "sacct" if use else "scontrol", "exit_code": exit_code,
                      "signal": signal} if final else None, "usage": use}


def card(parts: dict, created: float) -> dict:
    return {"card": {"job_id": 0, "created": created, "parts": parts, "missing": []}, "acts": [], "dry_run": True}


FAILURE_SAID = {"status": "ok", "reason": None, "p_fail": 0.82, "likely": "TIMEOUT", "threshold": 0.3,
                "likely_fail": True, "model_version": "3"}


def fill(store) -> None:
    day = NOW - 86_400
    jobs = [
        record(101, day, "alice", "COMPLETED", usage(600, 3600, 2, 1080.0, 4096.0, 1024.0)),
        record(102, day + 10, "bob", "FAILED", usage(100, 600, 4, 40.0, 1000.0, 100.0, "FAILED"), exit_code=1),
        record(103, day + 20, "bob", "TIMEOUT", usage(600, 600, 1, 590.0, 500.0, 450.0, "TIMEOUT"),
               account="chem", partition="long"),
        record(104, day + 30, "alice", "COMPLETED", None, row={"run_time": 50.0, "wallclock_req": 60.0,
                                                                "processors_req": 1, "mem_req": 100.0,
                                                                "nodes_req": 1}),
        record(105, day + 40, "alice", "PENDING", None, final=False),
        record(106, day + 50, "carol", "OUT_OF_MEMORY", usage(30, 600, 1, 25.0, 100.0, 99.0, "FAILED"), signal=9),
    ]
    for task in range(10):  # array 200: raw ids 200..209, one task failed
        state = "FAILED" if task == 7 else "COMPLETED"
        jobs.append(record(200 + task, day + 100, "dave", state,
                           usage(100 + 10 * task, 1200, 1, 50.0 + 5 * task, 2048.0, 200.0 + task, state,
                                 array_job_id=200, array_task_id=task)))
    with store.batch():
        for job in jobs:
            store.put_record(job)
        store.put_prediction(JobKey(CLUSTER, 103, day + 20), "adapter:failure=3:dry-run",
                             card({"failure": FAILURE_SAID, "resource": {"status": "unavailable", "reason": "down"}},
                                  day + 21))
        store.put_prediction(JobKey(CLUSTER, 101, day), "adapter:failure=2:dry-run",
                             card({"failure": {**FAILURE_SAID, "p_fail": 0.9, "model_version": "2"}}, day + 1))
        store.put_prediction(JobKey(CLUSTER, 101, day), "adapter:failure=3:dry-run",
                             card({"failure": {**FAILURE_SAID, "p_fail": 0.05, "likely_fail": False}}, day + 2))


@pytest.fixture
def store_uri(tmp_path) -> str:
    uri = str(tmp_path / "store")
    with open_store(uri) as store:
        fill(store)
    return uri
