"""What accounting says of a finished job's use, read from real `sacct -P` output of the test cluster (Slurm
22.05.8 with jobacct_gather/linux and memory enforced): two burners on 2 CPUs, a job holding 150 MiB, a job
with a 2-task step, a failed job, a job killed for memory (FAILED 0:9) and an array of three tasks."""

from __future__ import annotations

import pytest

from jobaware.adapters.slurm.collector import Collector
from jobaware.adapters.slurm.usage import mib, sacct_usage, seconds
from jobaware.store import open_store
from tests.adapters.slurm.test_collector import OOM_ENDS, OOM_SACCT, Replay
from tests.conftest import ROOT

USAGE = ROOT / "tests" / "data" / "sacct_usage_22.05.txt"  # `sacct --allusers -P -o <the collector's fields>`


def test_sizes_and_clocks_as_sacct_prints_them():
    assert mib("139352K") == pytest.approx(136.086) and mib("400M") == 400.0 and mib("1.5G") == 1536.0
    assert mib("") is None and mib("n/a") is None and mib("1048576") == 1.0
    assert seconds("00:06.209") == 6.209 and seconds("01:02:03") == 3723 and seconds("2-00:00:01") == 172_801
    assert seconds("") is None and seconds("x") is None


def test_each_jobs_use_from_its_line_and_its_steps():
    usage = sacct_usage(USAGE.read_text())
    assert sorted(usage) == [1, 2, 3, 4, 5, 6, 7, 8]
    burn = usage[1]
    assert burn == {"source": "sacct", "state": "COMPLETED", "elapsed_s": 26, "time_limit_s": 300, "cpus": 2,
                    "cpu_time_s": 6.209, "nodes": 1, "gpus": 0, "mem_req_mib": 200.0,
                    "mem_used_mib": pytest.approx(29736 / 1024, abs=1e-3), "mem_step": "batch", "exit_code": 0,
                    "signal": None}
    assert usage[2]["mem_used_mib"] == pytest.approx(170120 / 1024, abs=1e-3)  # 150 MiB held, and python
    steps = usage[3]  # srun -n 2: its step's tasks together (149652K), more than its batch step or one task
    assert steps["mem_step"] == "0" and steps["mem_used_mib"] == pytest.approx(149652 / 1024, abs=1e-3)
    assert (usage[4]["state"], usage[4]["exit_code"]) == ("FAILED", 3)
    killed = usage[5]
    assert (killed["state"], killed["exit_code"], killed["signal"]) == ("FAILED", 0, 9)
    assert killed["mem_used_mib"] > killed["mem_req_mib"] == 100.0
    tasks = {u["array_task_id"]: job for job, u in usage.items() if u.get("array_job_id") == 6}
    assert tasks == {0: 7, 1: 8, 2: 6}


def test_output_without_a_header_or_with_bad_lines_gives_nothing_it_cannot_read():
    assert sacct_usage("") == {} and sacct_usage("1|0:0|||1\n") == {}
    header = USAGE.read_text().splitlines()[0]
    assert sacct_usage(f"{header}\nnot|enough\nx.batch|" + "|" * (header.count("|") - 1) + "\n") == {}


def test_the_collector_keeps_the_use_beside_the_final_state(tmp_path):
    """The killed-for-memory capture, its parsable output given a header: the use is kept with the end."""
    ends = "JobIDRaw|ExitCode|MaxRSS|AllocTRES|NNodes\n" + OOM_ENDS.read_text()
    slurm = Replay(squeue='{"jobs": []}', sacct=lambda c: OOM_SACCT.read_text() if "--json" in c else ends,
                   scontrol_write=lambda c: "#!/bin/bash\n")
    store = open_store(str(tmp_path / "store"))
    Collector(store, "jobaware-test", slurm, clock=lambda: 1_795_747_600.0).poll()
    records = {r["job_id"]: r for r in store.records()}
    assert records[1]["final"]["state"] == "OUT_OF_MEMORY"
    assert records[1]["usage"]["mem_used_mib"] == pytest.approx(313988 / 1024, abs=1e-3)
    assert records[1]["usage"]["mem_req_mib"] == 100.0 and records[1]["usage"]["signal"] == 9
    sacct = next(c for c in slurm.commands if c[0] == "sacct" and "--json" not in c)
    assert "-n" not in sacct and sacct[sacct.index("-o") + 1].startswith("JobIDRaw,ExitCode,MaxRSS,AllocTRES,NNodes,")
