"""`jobaware-mail`, Slurm's MailProg: it returns at once (slurmctld never waits on accounting or on a mail server),
spools every mail before anything else, and a detached delivery writes the efficiency lines from accounting
(`sacct` here answers with real output of the test cluster) and sends them through a real SMTP server on loopback,
retrying while the server is down; `jobaware mail status|flush` show and send what waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobaware.adapters.slurm.mailprog import ACCOUNTING_WAIT, compose, environment, parse
from jobaware.errors import JobawareError
from jobaware.store import JobKey, open_store
from jobaware.usage.spool import NotYet
from tests.conftest import ROOT, free_port
from tests.smtp import smtp_server

DATA = ROOT / "tests" / "data"  # `sacct -j ID -P -o ...` with SLURM_TIME_FORMAT=%s, of the test cluster
JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
SUBMIT = 1795752177  # job 1's submit time in that output
ENDED = {"SLURM_JOB_ID": "1", "SLURM_JOB_MAIL_TYPE": "Ended", "SLURM_CLUSTER_NAME": "jobaware-test",
         "SLURM_JOB_NAME": "burn2", "SLURM_JOB_USER": "root", "SLURM_JOB_STATE": "COMPLETED"}
SUBJECT = "Slurm Job_id=1 Name=burn2 Ended, Run time 00:00:26, COMPLETED, ExitCode 0"


@pytest.fixture
def site(tmp_path):
    """A fake `sacct` answering with the captures (job 1, array 6; any other job still running), settings."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    running = (DATA / "sacct_mail_burn2_22.05.txt").read_text().splitlines()[0] + "\n9|0:0||cpu=1|1|9|RUNNING|3|5||1|" \
        "cpu=1||1795752177|1795752179|Unknown|root|root|debug|slow\n"
    (tmp_path / "running.txt").write_text(running)
    (bin_dir / "sacct").write_text(f"""#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = "-j" ] && job=$2; shift; done
case $job in 1) cat {DATA / 'sacct_mail_burn2_22.05.txt'};; 6) cat {DATA / 'sacct_mail_array_22.05.txt'};;
  *) cat {tmp_path / 'running.txt'};; esac
""")
    (bin_dir / "sacct").chmod(0o755)
    (tmp_path / "tasks.txt").write_text("0\n1\n2\n")  # the tasks of array 6 slurmctld holds
    (bin_dir / "squeue").write_text(f"#!/bin/sh\ncat {tmp_path / 'tasks.txt'}\n")
    (bin_dir / "squeue").chmod(0o755)
    port = free_port()
    env_file = tmp_path / "jobaware.env"
    env_file.write_text(f"# the units' settings\nJOBAWARE_HOME={tmp_path / 'home'}\nJOBAWARE_STORE={tmp_path / 'store'}\n"
                        f"JOBAWARE_SMTP=127.0.0.1:{port}\nJOBAWARE_MAIL_FROM='slurm@cluster.example'\n"
                        "JOBAWARE_MAIL_DOMAIN=cluster.example\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "JOBAWARE_CONFIG": str(env_file), "PYTHONPATH": str(ROOT)}
    return {"env": env, "port": port, "spool": tmp_path / "home" / "mail", "home": tmp_path / "home",
            "settings": environment(env), "tmp": tmp_path}


def entry(subject: str = SUBJECT, request: dict | None = None, age: float = 0.0) -> dict:
    return {"id": "x", "created": time.time() - age, "to": ["alice"], "subject": subject, "body": None,
            "request": request or ENDED}


def test_the_command_line_and_the_settings(tmp_path):
    assert parse(["-s", "Slurm Job_id=1 Ended", "alice"]) == ("Slurm Job_id=1 Ended", ["alice"], set())
    assert parse(["--dry-run", "-r", "x@y", "-s", "s", "a", "b"]) == ("s", ["a", "b"], {"--dry-run"})
    file = tmp_path / "jobaware.env"
    file.write_text("# comment\nJOBAWARE_SMTP = mail:2525\nJOBAWARE_MAIL_FROM=\"jobs@site\"\nBAD LINE\n")
    with pytest.raises(JobawareError, match="jobaware.env, line 4: not a NAME=value setting"):
        environment({"JOBAWARE_CONFIG": str(file)})
    file.write_text("# comment\nJOBAWARE_SMTP = mail:2525\nJOBAWARE_MAIL_FROM=\"jobs@site\"\n")
    settings = environment({"JOBAWARE_CONFIG": str(file), "JOBAWARE_MAIL_DOMAIN": "site"})
    assert settings["JOBAWARE_SMTP"] == "mail:2525" and settings["JOBAWARE_MAIL_FROM"] == "jobs@site"
    assert environment({"JOBAWARE_CONFIG": str(file), "JOBAWARE_SMTP": "other:25"})["JOBAWARE_SMTP"] == "other:25"


def test_help_is_printed_and_spools_nothing(tmp_path):
    """`jobaware-mail --help` answers with its usage, exit 0 (it was exit 1: 'ValueError: no recipient given')."""
    env = {"JOBAWARE_CONFIG": "/nonexistent", "JOBAWARE_HOME": str(tmp_path / "home"),
           "JOBAWARE_MAIL_SPOOL": str(tmp_path / "spool")}
    for args in (["--help"], ["-h"]):
        done = subprocess.run([str(Path(sys.executable).with_name("jobaware-mail")), *args], capture_output=True,
                              text=True, env=env, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("usage: jobaware-mail -s SUBJECT USER") \
            and not done.stderr, done
    assert not (tmp_path / "spool").exists() and not (tmp_path / "home").exists()


def test_the_end_of_job_mail_says_what_the_job_used(site, monkeypatch):
    monkeypatch.setenv("PATH", site["env"]["PATH"])
    with open_store(str(site["tmp"] / "store")) as store:
        store.put_prediction(JobKey("jobaware-test", 1, SUBMIT), "adapter:failure=4", {"card": {
            "created": 1.0, "parts": {"failure": {"status": "ok", "p_fail": 0.12, "likely": "TIMEOUT",
                                                  "model_version": "4"}}}})
    body = compose(entry(), site["settings"])
    lines = body.splitlines()
    assert lines[0] == 'Job 1 "burn2" (user root, account root, partition debug): COMPLETED, exit code 0'
    assert lines[1] == "Time: ran 0:00:26 of the 0:05:00 asked (9%); waited 0:00:02 in the queue"
    assert lines[2] == "CPU: 2 CPUs, 0:00:06 of CPU time used of 0:00:52 allocated (12%)"
    assert lines[3] == "Memory: 29 MiB used at most (step batch) of 200 MiB asked per node (15%)"
    assert lines[5] == "Next time, ask for: --mem=64M, 1 CPU (this run's use plus a fifth, rounded up)"
    assert lines[6] == "Before it ran, jobaware said: failure: likely TIMEOUT, p_fail 0.12"
    summary = compose(entry("Slurm Array Summary Job_id=6_* (6) Name=array Ended, COMPLETED, ExitCode [0-0]",
                            {**ENDED, "SLURM_JOB_ID": "6", "SLURM_ARRAY_JOB_ID": "6", "SLURM_ARRAY_TASK_ID": "2",
                             "SLURM_JOB_NAME": "array"}), site["settings"])
    assert summary.startswith('Array 6_[0-2] "array" (user root, account root, partition debug): 3 tasks: '
                              "3 COMPLETED\nTime: median 1% (10th-90th percentile 0%-1%) of the 0:05:00 asked; longest 0:00:02\n"
                              "CPU: median 0% (10th-90th percentile 0%-0%) of 1 CPU\nMemory: median 9%")
    assert compose(entry(request={**ENDED, "SLURM_JOB_MAIL_TYPE": "Began"}), site["settings"]) == ""  # the usual mail


def test_a_job_accounting_has_not_closed_is_asked_again_then_mailed_with_a_note(site, monkeypatch):
    monkeypatch.setenv("PATH", site["env"]["PATH"])
    running = {**ENDED, "SLURM_JOB_ID": "9"}
    with pytest.raises(NotYet):
        compose(entry(request=running), site["settings"])
    body = compose(entry(request=running, age=ACCOUNTING_WAIT + 1), site["settings"])
    assert "accounting had no final record of job 9 120 s after Slurm's mail" in body


def test_an_array_summary_waits_for_accounting_to_have_every_task_slurmctld_holds(site, monkeypatch):
    monkeypatch.setenv("PATH", site["env"]["PATH"])
    (site["tmp"] / "tasks.txt").write_text("0\n1\n2\n3\n")  # task 3 ended, but accounting has only 0-2 yet
    summary = entry("Slurm Array Summary Job_id=6_* (6) Name=array Ended, COMPLETED, ExitCode [0-0]",
                    {**ENDED, "SLURM_JOB_ID": "6", "SLURM_ARRAY_JOB_ID": "6", "SLURM_ARRAY_TASK_ID": "3"})
    with pytest.raises(NotYet):
        compose(summary, site["settings"])
    late = compose({**summary, "created": summary["created"] - ACCOUNTING_WAIT - 1}, site["settings"])
    assert "3 tasks: 3 COMPLETED" in late and "accounting had no final record of job 6 120 s after" in late


def _mailprog(site, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """The program as slurmctld runs it: the job's SLURM_* variables only, its output read through a pipe until
    it closes."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", *args], capture_output=True, text=True,
                          env={**site["env"], **ENDED, **(env or {})}, timeout=60)
    return done, time.monotonic() - started


def _deliveries(spool: Path) -> list[int]:
    """The delivery processes this test started (their environment names its spool)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if b"adapters.slurm.mailprog\0--deliver" in (proc / "cmdline").read_bytes() and \
                    f"JOBAWARE_MAIL_SPOOL={spool}".encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def test_mailprog_returns_at_once_and_the_delivery_sends_the_mail(site):
    with smtp_server(site["port"]) as (inbox, _):
        done, seconds = _mailprog(site, "-s", SUBJECT, "alice")
        assert done.returncode == 0 and done.stdout == done.stderr == "" and seconds < 5, (done, seconds)
        [mail] = inbox.wait(1, seconds=60)
    assert mail["Subject"] == SUBJECT and mail["To"] == "alice@cluster.example"
    assert mail["From"] == "slurm@cluster.example"
    assert "CPU: 2 CPUs, 0:00:06 of CPU time used" in mail.get_payload(decode=True).decode()
    deadline = time.monotonic() + 30
    while _deliveries(site["spool"]) and time.monotonic() < deadline:  # the delivery ends with an empty queue
        time.sleep(0.2)
    assert not _deliveries(site["spool"]) and "sent to alice" in (site["home"] / "logs" / "mail.log").read_text()


def test_with_the_mail_server_down_mailprog_still_returns_at_once_and_nothing_is_lost(site):
    done, seconds = _mailprog(site, "-s", SUBJECT, "alice")  # nothing listens on the SMTP port
    try:
        assert done.returncode == 0 and seconds < 5, (done, seconds)
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            status = subprocess.run([JOBAWARE, "mail", "status", "--json"], capture_output=True, text=True,
                                    env=site["env"], cwd=ROOT, timeout=60)
            mails = json.loads(status.stdout)["mails"]
            if mails and mails[0]["tries"] == 1:
                break
            time.sleep(0.5)
        assert mails[0]["where"] == "queue" and "ConnectionRefusedError" in mails[0]["last error"], status.stdout
        refused = subprocess.run([JOBAWARE, "mail", "flush"], capture_output=True, text=True, env=site["env"],
                                 cwd=ROOT, timeout=60)
        assert refused.returncode == 1 and "1 waiting" in refused.stderr and refused.stderr.count("\n") == 1
        with smtp_server(site["port"]) as (inbox, _):  # the server is back: a flush sends it at once
            flushed = subprocess.run([JOBAWARE, "mail", "flush"], capture_output=True, text=True, env=site["env"],
                                     cwd=ROOT, timeout=60)
            assert flushed.returncode == 0 and "sent 1" in flushed.stdout, flushed.stderr
            assert inbox.mails[0]["Subject"] == SUBJECT
        assert "try 1 failed" in (site["home"] / "logs" / "mail.log").read_text()
    finally:
        for pid in _deliveries(site["spool"]):  # the delivery waiting for its next try
            os.kill(pid, signal.SIGTERM)


def test_a_mail_that_cannot_be_spooled_is_said_to_slurmctld(site):
    (site["home"]).mkdir(parents=True)
    (site["home"] / "mail").write_text("a file where the spool should be")
    done, _ = _mailprog(site, "-s", SUBJECT, "alice")
    assert done.returncode == 1 and done.stderr.startswith("jobaware-mail: the mail to alice (") and \
        done.stderr.count("\n") == 1, done.stderr
    dry, _ = _mailprog(site, "--dry-run", "-s", SUBJECT, "alice")
    assert dry.returncode == 0 and "Subject: " + SUBJECT in dry.stdout and "CPU: 2 CPUs" in dry.stdout


def test_many_mails_at_once_are_all_sent_by_one_delivery(site):
    """An array's tasks each mailed (`--mail-type=ARRAY_TASKS`): many MailProgs at once; one delivery runs, the
    others see it and leave the mail to it; every mail arrives, and no delivery outlives an empty queue."""
    with smtp_server(site["port"]) as (inbox, _):
        started = [subprocess.Popen([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", "-s", f"{SUBJECT} #{i}", "alice"],
                                    env={**site["env"], **ENDED}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for i in range(12)]
        assert [p.wait(60) for p in started] == [0] * 12
        for process in started:
            process.stdout.close()
            process.stderr.close()
        mails = inbox.wait(12, seconds=90)
    assert sorted(int(m["Subject"].rsplit("#", 1)[1]) for m in mails) == list(range(12))
    deadline = time.monotonic() + 30
    while _deliveries(site["spool"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _deliveries(site["spool"]) and not list((site["spool"] / "queue").glob("*.json"))
