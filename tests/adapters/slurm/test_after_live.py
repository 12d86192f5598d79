"""After the job, on a live Slurm with accounting (jobacct_gather/linux): jobs that really burn known CPU time and
hold known memory; the collector keeps their use, `jobaware report jobs` shows efficiencies that match what the
jobs measured of themselves, and slurmctld's MailProg (`jobaware-mail`) mails each end, with the same efficiency
lines, through a real SMTP server on loopback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.adapters.slurm.collector import Collector, Slurm
from jobaware.store import JobKey, open_store
from tests.adapters.slurm.test_collector_live import collect_until
from tests.conftest import ROOT
from tests.smtp import smtp_server

pytestmark = pytest.mark.slow

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
BURN = 5.0  # CPU-seconds each burner spends, whatever the machine's load
HOLD_MIB = 200  # memory the memory job holds
# each burner spins until its own CPU time reaches BURN: the job's CPU time is known whatever the machine's load (on
# a loaded machine its elapsed time grows, and its efficiency falls, with it)
BURNER = f"python3 -c \"import time; t = time.process_time()\nwhile time.process_time() - t < {BURN}: pass\""
SCRIPTS = {
    "burn2": f"#!/bin/bash\n{BURNER} &\n{BURNER} &\nwait\n",
    "burn1": f"#!/bin/bash\n{BURNER}\n",
    "sleep": "#!/bin/bash\nsleep 4\n",
    "memory": ("#!/bin/bash\npython3 -c \"import time; x = bytearray(" + str(HOLD_MIB) + " * 2**20); "
               "x[::4096] = b'x' * len(x[::4096]); time.sleep(4)\"\n"),
    "fails": "#!/bin/bash\nsleep 1\nexit 3\n",
}
OPTIONS = {"burn2": ["-c", "2"], "burn1": ["-c", "2"], "sleep": [], "memory": ["--mem=500"], "fails": []}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A cluster whose MailProg is jobaware-mail (a wrapper naming this tree and its settings), an SMTP server, a
    store."""
    require_slurm(accounting=True)
    root = tmp_path_factory.mktemp("after")
    with smtp_server() as (inbox, port):
        env_file = root / "jobaware.env"
        wrapper = root / "jobaware-mail"
        wrapper.write_text(f"#!/bin/sh\nexport JOBAWARE_CONFIG={env_file} PYTHONPATH={ROOT}\n"
                           f"exec {sys.executable} -m jobaware.adapters.slurm.mailprog \"$@\"\n")
        wrapper.chmod(0o755)
        cluster = SlurmCluster(root / "slurm", accounting=True, cpus=8, mail_prog=str(wrapper))
        env_file.write_text(f"JOBAWARE_HOME={root / 'home'}\nJOBAWARE_STORE={root / 'store'}\n"
                            f"JOBAWARE_SMTP=127.0.0.1:{port}\nJOBAWARE_MAIL_FROM=slurm@cluster.example\n"
                            f"JOBAWARE_MAIL_DOMAIN=cluster.example\nSLURM_CONF={cluster.conf}\n")
        cluster.start()
        try:
            yield cluster, inbox, root
        finally:
            cluster.stop()


def body(mail) -> str:
    return mail.get_payload(decode=True).decode()


def _report(store: Path, *args: str) -> dict:
    done = subprocess.run([JOBAWARE, "report", "jobs", "--store", str(store), "--since", "1h", "--json", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env={"PATH": "/usr/bin:/bin",
                                                                                      "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_efficiencies_of_jobs_of_known_use_in_the_report_and_the_end_of_job_mails(site):
    cluster, inbox, root = site
    mail = ["--mail-type=END,FAIL", "--mail-user=alice", "--time=5"]
    ids = {name: cluster.sbatch(script, *OPTIONS[name], *mail, f"--job-name={name}") for name, script in SCRIPTS.items()}
    array = cluster.sbatch("#!/bin/bash\nsleep 1\n", "--array=0-3", *mail, "--job-name=array")
    store = open_store(str(root / "store"))
    collector = Collector(store, "jobaware-test", Slurm(cluster.env))
    collector.poll()
    burn2 = next(r for r in store.records() if r["job_id"] == ids["burn2"])
    key = JobKey("jobaware-test", ids["burn2"], burn2["submit_time"])
    said = {"status": "ok", "reason": None, "p_fail": 0.12, "likely": "TIMEOUT", "model_version": "4"}
    store.put_prediction(key, "adapter:failure=4:dry-run", {"card": {"job_id": ids["burn2"], "created": 1.0,
                                                                     "parts": {"failure": said}, "missing": []}})

    def done() -> bool:
        records = list(store.records())
        return len(records) == len(ids) + 4 and all(r["usage"] and r["final"]["source"] == "sacct" for r in records)

    collect_until(collector, done, polls=90, interval=2.0)
    usage = {r["job_id"]: r["usage"] for r in store.records()}

    # accounting's word on each job, against what the job did
    burn = usage[ids["burn2"]]
    assert burn["cpus"] == 2 and 2 * BURN <= burn["cpu_time_s"] <= 2 * BURN + 2.0, burn
    assert usage[ids["burn1"]]["cpus"] == 2 and BURN <= usage[ids["burn1"]]["cpu_time_s"] <= BURN + 1.0
    assert usage[ids["sleep"]]["cpu_time_s"] < 0.5 and usage[ids["sleep"]]["elapsed_s"] >= 4
    memory = usage[ids["memory"]]
    assert memory["mem_req_mib"] == 500.0 and HOLD_MIB <= memory["mem_used_mib"] <= HOLD_MIB + 40, memory
    assert usage[ids["fails"]]["exit_code"] == 3 and usage[ids["fails"]]["state"] == "FAILED"
    assert sorted(u["array_task_id"] for u in usage.values() if u.get("array_job_id") == array) == [0, 1, 2, 3]

    rows = {row["job"]: row for row in _report(root / "store")["jobs"]}
    assert set(rows) == {str(i) for i in ids.values()} | {f"{array}_[0-3]"}
    for name, busy in (("burn2", 2 * BURN), ("burn1", BURN)):
        row = rows[str(ids[name])]
        # the report's efficiency is accounting's CPU time over 2 CPUs x the elapsed seconds; the burners' own CPU
        # time over the same allocation agrees within the rounding of the elapsed time to whole seconds
        assert row["cpu_eff"] == pytest.approx(row["cpu_time_s"] / (2 * row["elapsed_s"]))
        assert row["cpu_eff"] == pytest.approx(busy / (2 * row["elapsed_s"]), abs=0.1), row
    assert rows[str(ids["sleep"])]["cpu_eff"] < 0.1
    assert rows[str(ids["memory"])]["mem_eff"] == pytest.approx(memory["mem_used_mib"] / 500.0)
    assert rows[str(ids["fails"])]["state"] == "FAILED" and rows[str(ids["fails"])]["exit_code"] == 3
    assert rows[f"{array}_[0-3]"]["tasks"] == 4 and rows[f"{array}_[0-3]"]["states"] == {"COMPLETED": 4}
    assert rows[str(ids["burn2"])]["said"][0]["part"] == "failure"
    only = _report(root / "store", "--job", str(ids["memory"]))["jobs"]
    assert [r["job"] for r in only] == [str(ids["memory"])]

    # the mails: one per job end (the failed job's Failed, the array's summary), each with the efficiency lines
    mails = inbox.wait(len(ids) + 1, seconds=180)
    by_job = {re.search(r"Job_id=(\d+)", m["Subject"]).group(1): m for m in mails}
    assert len(mails) == len(ids) + 1 and set(by_job) == {str(i) for i in ids.values()} | {str(array)}, \
        [m["Subject"] for m in mails]
    assert all(m["To"] == "alice@cluster.example" for m in mails)
    text = body(by_job[str(ids["burn2"])])
    cpu = rows[str(ids["burn2"])]
    assert "CPU: 2 CPUs, " in text and f"({round(cpu['cpu_eff'] * 100)}%)" in text, text
    assert "Before it ran, jobaware said: failure: likely TIMEOUT, model_version" not in text  # version kept apart
    assert "Before it ran, jobaware said: failure: likely TIMEOUT, p_fail 0.12" in text
    used = rows[str(ids["memory"])]
    assert f"Memory: {used['mem_used_mib']:.0f} MiB used at most (step batch) of 500 MiB asked per node " \
           f"({round(used['mem_eff'] * 100)}%)" in body(by_job[str(ids["memory"])])
    assert "FAILED, exit code 3" in body(by_job[str(ids["fails"])])
    # Slurm's own subject, kept whole: its run time is whole seconds that a busy machine can round up
    assert re.search(r"Failed, Run time 00:00:0\d, FAILED, ExitCode 3$", by_job[str(ids["fails"])]["Subject"])
    summary = by_job[str(array)]
    assert "Array Summary" in summary["Subject"] and "4 tasks: 4 COMPLETED" in body(summary)
    log = (cluster.root / "log" / "slurmctld.log").read_text()
    assert "MailProg returned error" not in log
    spool = root / "home" / "mail" / "queue"
    assert not list(spool.glob("*.json"))  # every mail left the spool
    store.close()
