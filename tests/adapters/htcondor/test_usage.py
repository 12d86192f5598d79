"""The follower keeps every terminated job's use from the real OSPool logs: CPU time, the slot's CPUs, memory and
disk used, asked and allocated, and the run's wall time from the job's last execute event."""

from __future__ import annotations

import datetime as dt

import pytest

from jobaware.adapters.htcondor.adapter import HoldAdapter
from jobaware.adapters.htcondor.audit import USAGE_STREAM, hold_records
from jobaware.adapters.htcondor.usage import terminate_usage
from jobaware.store import open_store
from jobaware.usage.jobs import Filters, report
from tests.adapters.htcondor.conftest import CONDOR, REAL_LOGS

TERMINATED = """005 (12634379.000.000) 2025-04-18 01:02:24 Job terminated.
\t(1) Normal termination (return value 0)
\t\tUsr 0 19:05:56, Sys 0 02:20:39  -  Run Remote Usage
\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
\t\tUsr 1 14:42:39, Sys 0 04:45:48  -  Total Remote Usage
\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage
\t90066471  -  Run Bytes Sent By Job
\tPartitionable Resources :         Usage  Request Allocated
\t   Cpus                 :          0.00        2         2
\t   Disk (KB)            :   56447643    83886080  84816807
\t   Memory (MB)          :      39663       65536     65536
\t   TimeExecute (s)      : 1744956110
...
"""


def _terminations(paths) -> int:
    return sum(p.read_bytes().count(b"\n005 (") + p.read_bytes().startswith(b"005 (") for p in paths)


def test_a_terminate_events_usage_lines_as_the_usage_dict():
    usage = terminate_usage(TERMINATED, elapsed_s=60131.0, wait_s=110.0)
    assert usage == {
        "source": "htcondor", "state": "COMPLETED", "elapsed_s": 60131.0, "wait_s": 110.0, "time_limit_s": None,
        "cpus": 2, "cpus_req": 2, "cpu_usage": 0.0, "cpu_time_s": 68756 + 8439, "total_cpu_time_s": 139359 + 17148,
        "nodes": None, "gpus": 0, "gpu_usage": None, "mem_req_mib": 65536.0, "mem_alloc_mib": 65536.0,
        "mem_used_mib": 39663.0, "mem_step": None, "disk_used_kib": 56447643.0, "disk_req_kib": 83886080.0,
        "disk_alloc_kib": 84816807.0, "exit_code": 0, "signal": None}
    gpu = TERMINATED.replace("(1) Normal termination (return value 0)", "(0) Abnormal termination (signal 9)") \
        .replace("   Memory", '   GPUs                 :                     2         2 "GPU-1,GPU-2"\n\t   Memory')
    failed = terminate_usage(gpu)
    assert (failed["state"], failed["exit_code"], failed["signal"], failed["gpus"], failed["gpu_usage"]) == \
        ("FAILED", None, 9, 2, None)
    unknown = terminate_usage(TERMINATED.replace("(1) Normal termination (return value 0)",
                                                 "(0) Abnormal termination (signal -1)"))
    assert (unknown["state"], unknown["signal"]) == ("FAILED", None)  # HTCondor's -1: no signal known
    assert terminate_usage("005 (1.000.000) 2025-04-18 01:02:24 Job terminated.\n...\n")["cpu_time_s"] is None


def test_the_follower_keeps_every_real_termination_once(tmp_path):
    store = open_store(str(tmp_path / "store"))
    for _ in range(2):  # a restart reads the logs again: each termination is kept once
        adapter = HoldAdapter(REAL_LOGS, None, store=store)
        adapter.run(once=True)
        adapter.close()
    kept = [event["record"] for event in store.events(USAGE_STREAM)]
    assert len(kept) == _terminations(REAL_LOGS) == 100
    assert len({record["id"] for record in kept}) == 100
    job = next(r for r in kept if r["job"] == "12634379.0.0")
    assert job["end_time"] == "2025-04-18 01:02:24" and job["where"].endswith("metl_12634379.log line 420")
    usage = job["usage"]
    # from the log: last execute 2025-04-17 08:20:13, submit 13:02:59 and first execute 13:04:49 the day before
    assert usage["elapsed_s"] == 60131.0 and usage["wait_s"] == 110.0
    assert (usage["cpu_time_s"], usage["cpus"], usage["mem_used_mib"], usage["mem_req_mib"]) == (77195, 2, 39663.0, 65536.0)
    ended = [r["usage"] for r in kept]
    assert sum(u["state"] == "COMPLETED" for u in ended) + sum(u["state"] == "FAILED" for u in ended) == 100
    assert all(u["mem_req_mib"] for u in ended if u["cpu_time_s"] is not None)
    # what `report holds` reads is unchanged: the holds stream has no usage record
    assert not any(r["kind"] == "usage" for r in hold_records(store))
    # `report jobs --htcondor`: the same efficiencies as Slurm's jobs
    found = report(store, Filters(), limit=1000, source="htcondor")
    assert found.jobs == 100 and len(found.rows) == 100
    row = next(r for r in found.rows if r["job"] == "12634379.0")
    assert row["cpu_eff"] == pytest.approx(77195 / (2 * 60131)) and row["mem_eff"] == pytest.approx(39663 / 65536)
    assert row["node_hours"] is None and row["state"] == "COMPLETED"
    ended = report(store, Filters(since=dt.datetime(2025, 4, 18).timestamp(), until=dt.datetime(2025, 4, 19).timestamp()),
                   source="htcondor")
    assert "12634379.0" in {r["job"] for r in ended.rows} and ended.jobs < 100  # by end time
    store.close()


def test_a_follower_without_a_store_writes_the_usage_into_its_audit_file(tmp_path):
    log = CONDOR / "mldag_standalone" / "metl_12634379.log"
    adapter = HoldAdapter([log], tmp_path / "audit.jsonl")
    adapter.run(once=True)
    adapter.close()
    [usage] = [r for r in hold_records(tmp_path / "audit.jsonl") if r["kind"] == "usage"]
    assert usage["job"] == "12634379.0.0" and usage["usage"]["mem_used_mib"] == 39663.0
