"""Attacks on the mail: the spool (writable by the group jobaware, as the deployment makes it) is untrusted input,
a job's name is the user's text, and so is a recipient. A member of the group plants a spooled mail whose request
names their own PATH, LD_PRELOAD and SLURM_CONF; root's delivery sends it through a real SMTP server on loopback
without running any of it. Slurm's own words are real recordings of Slurm 22.05 (`tests/data/`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobaware.adapters.slurm.mailprog import ACCOUNTING_WAIT, REQUEST
from tests.conftest import ROOT, free_port
from tests.smtp import smtp_server

DATA = ROOT / "tests" / "data"
SUBJECT = "Slurm Job_id=1 Name=burn2 Ended, Run time 00:00:26, COMPLETED, ExitCode 0"
RECORDED = json.loads((DATA / "mailprog_env_22.05.json").read_text())  # MailProg's argv and environment, recorded
PRELOAD = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open("MARKER", O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
}
"""


def _sacct_double(folder: Path, calls: Path) -> Path:
    """The site's `sacct` in a test: answers the recorded output of job 1 (`burn2`) and notes the environment it
    was run with."""
    folder.mkdir(parents=True, exist_ok=True)
    sacct = folder / "sacct"
    sacct.write_text(f"#!/bin/sh\nenv >> {calls}\necho --- >> {calls}\ncat {DATA / 'sacct_mail_burn2_22.05.txt'}\n")
    sacct.chmod(0o755)
    return folder


@pytest.fixture
def group_spool(local_user, open_folder, tmp_path):
    """A spool as the deployment makes it (2770, group jobaware: here the attacker's own group), and the site's
    settings: its sacct, its slurm.conf, an SMTP port."""
    spool = open_folder / f"spool-{os.urandom(3).hex()}"
    for folder in (spool, spool / "queue"):
        folder.mkdir()
        os.chown(folder, 0, local_user.gid)
        folder.chmod(0o2770)
    calls = tmp_path / "sacct-calls.txt"
    site_bin = _sacct_double(tmp_path / "site-bin", calls)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=jobaware-test\n")
    port = free_port()
    env_file = tmp_path / "jobaware.env"
    env_file.write_text(f"JOBAWARE_HOME={tmp_path / 'home'}\nJOBAWARE_MAIL_SPOOL={spool}\n"
                        f"JOBAWARE_SMTP=127.0.0.1:{port}\nJOBAWARE_MAIL_FROM=slurm@cluster.example\n"
                        f"JOBAWARE_MAIL_DOMAIN=cluster.example\nSLURM_CONF={conf}\n")
    yield {"spool": spool, "calls": calls, "bin": site_bin, "conf": conf, "port": port, "env_file": env_file,
           "home": tmp_path / "home"}
    subprocess.run(["rm", "-rf", str(spool)], check=False)


def _plant(local_user, path: Path, text: str) -> None:
    """The attacker writes `text` at `path` with a shell, as a member of the group jobaware would."""
    local_user.run("sh", "-c", f"cat > '{path}'", input=text)


def _deliver(site: dict) -> subprocess.CompletedProcess:
    """The delivery as root runs it (`jobaware-mail --deliver`: started by MailProg, or by an admin's flush), the
    site's sacct on its PATH."""
    return subprocess.run([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", "--deliver"], capture_output=True,
                          text=True, timeout=120, cwd="/", env={"PATH": f"{site['bin']}:/usr/bin:/bin",
                                                                "JOBAWARE_CONFIG": str(site["env_file"]),
                                                                "PYTHONPATH": str(ROOT)})


def _entry(request: dict, **fields) -> dict:
    return {"id": "20990101T000000-planted", "created": time.time() - ACCOUNTING_WAIT - 1, "kind": "slurm",
            "to": ["alice"], "subject": SUBJECT, "body": None, "request": request, "tries": 0,
            "next_try": time.time() - 1, "errors": [], **fields}


def test_a_planted_spool_request_cannot_set_the_environment_of_sacct(local_user, group_spool):
    site, home = group_spool, local_user.home
    # the attacker's own programs: an sacct first on their PATH, a library to preload, a slurm.conf of theirs
    local_user.run("sh", "-c", "mkdir -p bin && printf '#!/bin/sh\\n/usr/bin/touch %s/sacct-ran\\n' \"$HOME\" "
                   "> bin/sacct && chmod 755 bin/sacct && echo ClusterName=evil > slurm.conf")
    source = PRELOAD.replace('"MARKER"', f'"{home}/preload-ran"')
    _plant(local_user, home / "planted.c", source)
    built = local_user.run("gcc", "-shared", "-fPIC", "-o", str(home / "planted.so"), str(home / "planted.c"),
                           check=False)
    assert built.returncode == 0, built.stderr
    request = {"SLURM_JOB_ID": "1", "SLURM_JOB_MAIL_TYPE": "Ended", "SLURM_CLUSTER_NAME": "jobaware-test",
               "PATH": f"{home}/bin", "LD_PRELOAD": f"{home}/planted.so", "SLURM_CONF": f"{home}/slurm.conf"}
    _plant(local_user, site["spool"] / "queue" / "20990101T000000-planted.json", json.dumps(_entry(request)))
    with smtp_server(site["port"]) as (inbox, _):
        done = _deliver(site)
        assert done.returncode == 0, done.stderr
        mails = inbox.wait(1, seconds=30)
    ran = [marker for marker in ("sacct-ran", "preload-ran") if (home / marker).exists()]
    assert not ran, f"the delivery ran the attacker's code: {ran}"
    assert len(mails) == 1 and "CPU: 2 CPUs, 0:00:06 of CPU time used" in mails[0].get_content()  # the site's sacct
    calls = site["calls"].read_text()
    assert f"SLURM_CONF={site['conf']}\n" in calls and "LD_PRELOAD" not in calls and str(home) not in calls
    assert f"PATH={site['bin']}:/usr/bin:/bin\n" in calls and "SLURM_TIME_FORMAT=%s\n" in calls


def test_a_planted_request_of_a_wrong_form_goes_to_failed_with_its_error_and_the_next_mail_is_sent(local_user,
                                                                                                   group_spool):
    site = group_spool
    bad = _entry({"SLURM_JOB_ID": "1 --json", "SLURM_JOB_MAIL_TYPE": "Ended"})
    _plant(local_user, site["spool"] / "queue" / "20990101T000000-planted.json", json.dumps(bad))
    later = _entry({"SLURM_JOB_ID": "1", "SLURM_JOB_MAIL_TYPE": "Ended"}, id="20990101T000001-good")
    _plant(local_user, site["spool"] / "queue" / "20990101T000001-good.json", json.dumps(later))
    for name, text in (("20990101T000002-types", json.dumps({**later, "next_try": "soon", "id": "x"})),
                       ("20990101T000003-list", json.dumps([later]))):
        _plant(local_user, site["spool"] / "queue" / f"{name}.json", text)
    local_user.run("mkfifo", str(site["spool"] / "queue" / "20990101T000004-fifo.json"))
    local_user.run("ln", "-s", "/etc/shadow", str(site["spool"] / "queue" / "20990101T000005-link.json"))
    with smtp_server(site["port"]) as (inbox, _):
        done = _deliver(site)  # a FIFO would have held it for ever; a wrong type raised TypeError out of it
        assert done.returncode == 0, done.stderr
        mails = inbox.wait(1, seconds=30)
    assert len(mails) == 1 and "CPU: 2 CPUs" in mails[0].get_content()
    failed = sorted(p.name for p in (site["spool"] / "failed").iterdir())
    assert failed == ["20990101T000000-planted.json", "20990101T000002-types.json", "20990101T000003-list.json",
                      "20990101T000004-fifo.json", "20990101T000005-link.json"]
    kept = json.loads((site["spool"] / "failed" / "20990101T000000-planted.json").read_text())
    assert "SLURM_JOB_ID '1 --json': expected ASCII digits" in kept["errors"][-1]
    log = (site["home"] / "logs" / "mail.log").read_text()
    assert "next_try: expected int or float, got str" in log and "not a regular file" in log
    assert "Too many levels of symbolic links" in log and "root:" not in log  # the link was not read
    assert "1 --json" in log


def test_mailprog_spools_only_the_slurm_variables_it_needs_and_refuses_one_of_a_wrong_form(tmp_path):
    """MailProg run as slurmctld runs it, with the environment it gave a job named to forge records (recorded)."""
    recorded = RECORDED["2"]
    env_file = tmp_path / "jobaware.env"
    env_file.write_text(f"JOBAWARE_HOME={tmp_path / 'home'}\nJOBAWARE_SMTP=127.0.0.1:{free_port()}\n")
    environment = {**recorded["environment"], "JOBAWARE_CONFIG": str(env_file), "PYTHONPATH": str(ROOT)}
    spool = tmp_path / "home" / "mail"
    try:
        done = subprocess.run([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", *recorded["argv"]],
                              capture_output=True, text=True, timeout=60, env=environment)
        assert done.returncode == 0, done.stderr
        [spooled] = [json.loads(p.read_text()) for p in (spool / "queue").glob("*.json")] or \
            [json.loads(p.read_text()) for p in (spool / "failed").glob("*.json")]
        assert set(spooled["request"]) <= set(REQUEST) and spooled["request"]["SLURM_JOB_ID"] == "2"
        bad = {**environment, "SLURM_ARRAY_JOB_ID": "2\n3"}
        refused = subprocess.run([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", *recorded["argv"]],
                                 capture_output=True, text=True, timeout=60, env=bad)
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
        assert "SLURM_ARRAY_JOB_ID '2\\n3': expected ASCII digits" in refused.stderr
        [kept] = [json.loads(p.read_text()) for p in (spool / "failed").glob("*.json")
                  if "SLURM_ARRAY_JOB_ID" in json.dumps(json.loads(p.read_text())["errors"])]
        assert kept["subject"] == recorded["argv"][1] and kept["to"] == ["alice"]
    finally:
        _stop_deliveries(spool)


def _stop_deliveries(spool: Path) -> None:
    """End the deliveries MailProg started for `spool` (their environment names it)."""
    import signal

    for proc in Path("/proc").iterdir():
        try:
            if b"adapters.slurm.mailprog\0--deliver" in (proc / "cmdline").read_bytes() and \
                    f"JOBAWARE_MAIL_SPOOL={spool}".encode() in (proc / "environ").read_bytes():
                os.kill(int(proc.name), signal.SIGTERM)
        except (OSError, ValueError):
            continue


def _recorded_sacct(folder: Path) -> Path:
    """The site's `sacct` in a test, answering what Slurm 22.05 answered for jobs 2 (named to forge a record:
    `x\\n2|0:0||...|y`) and 3 (named `a|b`), to the very fields it is asked: with JobName or without."""
    folder.mkdir(parents=True, exist_ok=True)
    sacct = folder / "sacct"
    sacct.write_text(f"""#!/bin/sh
fields=; job=
while [ $# -gt 0 ]; do case $1 in -o) fields=$2;; -j) job=$2;; esac; shift; done
case $job in 2) name=forged;; 3) name=pipe;; *) exit 1;; esac
case $fields in *JobName*) cat {DATA}/sacct_mail_${{name}}_22.05.txt;; *) cat {DATA}/sacct_mail_${{name}}_noname_22.05.txt;; esac
""")
    sacct.chmod(0o755)
    return folder


@pytest.mark.parametrize("job", ["2", "3"])
def test_a_job_name_cannot_forge_accounting_records_in_its_end_of_job_mail(tmp_path, job):
    """MailProg run as slurmctld ran it for the job (argv and environment recorded, no PATH); the delivery asks
    the site's sacct, which answers as Slurm 22.05 did; the mail reaches a real SMTP server."""
    recorded = RECORDED[job]
    port = free_port()
    env_file = tmp_path / "jobaware.env"
    env_file.write_text(f"JOBAWARE_HOME={tmp_path / 'home'}\nJOBAWARE_SMTP=127.0.0.1:{port}\n"
                        f"JOBAWARE_MAIL_DOMAIN=cluster.example\nPATH={_recorded_sacct(tmp_path / 'bin')}:/usr/bin:/bin\n")
    environment = {**recorded["environment"], "JOBAWARE_CONFIG": str(env_file), "PYTHONPATH": str(ROOT)}
    with smtp_server(port) as (inbox, _):
        try:
            done = subprocess.run([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", *recorded["argv"]],
                                  capture_output=True, text=True, timeout=60, env=environment)
            assert done.returncode == 0, done.stderr
            mails = inbox.wait(1, seconds=60)
        finally:
            _stop_deliveries(tmp_path / "home" / "mail")
    assert len(mails) == 1, mails
    body = mails[0].get_content().replace("\r\n", "\n")
    name = recorded["environment"]["SLURM_JOB_NAME"].replace("\n", "\\n")
    # one record, the job's own: its real run (1 s of the 5 min asked), its name shown as text on its own line
    assert body.startswith(f'Job {job} "{name}" (user root, account root, partition debug): COMPLETED, exit code 0\n'
                           "Time: ran 0:00:01 of the 0:05:00 asked"), body
    assert body.count(f"Job {job} ") == 1 and "ran 1:00:00" not in body and "no final record" not in body


def _jobaware(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("jobaware")), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "COLUMNS": "250", **env})


@pytest.fixture
def digest_site(tmp_path):
    """A store of finished jobs (tests/jobaware/usage), one of a user named `<script>alert(1)</script>` (a store's
    rows are the scheduler's words: an HTCondor Owner, a record copied in), and the mail settings."""
    from jobaware.store import open_store
    from tests.jobaware.usage.conftest import NOW, fill, record, usage

    uri = str(tmp_path / "store")
    with open_store(uri) as store:
        fill(store)
        store.put_record(record(301, NOW - 3600, "<script>alert(1)</script>", "COMPLETED",
                                usage(60, 600, 1, 50.0, 100.0, 50.0)))
    port = free_port()
    env = {"JOBAWARE_SMTP": f"127.0.0.1:{port}", "JOBAWARE_MAIL_DOMAIN": "cluster.example",
           "JOBAWARE_MAIL_FROM": "hpc@cluster.example", "JOBAWARE_MAIL_SPOOL": str(tmp_path / "spool"),
           "JOBAWARE_CONFIG": str(tmp_path / "none.env"), "JOBAWARE_HOME": str(tmp_path / "home")}
    return {"store": uri, "port": port, "env": env, "spool": tmp_path / "spool"}


def test_a_digest_to_an_address_that_is_not_one_is_an_error_naming_it_never_mailed(digest_site):
    site = digest_site
    with smtp_server(site["port"]) as (inbox, _):
        for to in ("a@b@c", "alice@example.org, eve@example.org", "Alice <alice@example.org>"):
            done = _jobaware("report", "digest", "--store", site["store"], "--since", "all", "--by", "account",
                             "--mail", "--to", to, env=site["env"])
            assert done.returncode == 2 and "mailed" not in done.stdout, (to, done.stdout, done.stderr)
            assert done.stderr.startswith(f"error: --to: address '{to}': not a mail address") and \
                done.stderr.count("\n") == 1, done.stderr
        time.sleep(0.5)
    assert inbox.mails == []


def test_a_user_named_like_markup_is_not_mailed_at_another_mailbox(digest_site):
    """`<script>alert(1)</script>@cluster.example` was read by the SMTP client as the mailbox `script`: the
    digest of that user went to another one, and the command said 'mailed'."""
    site = digest_site
    with smtp_server(site["port"]) as (inbox, _):
        done = _jobaware("report", "digest", "--store", site["store"], "--since", "all", "--mail", env=site["env"])
        inbox.wait(4, seconds=10)
    recipients = sorted(rcpt for _, rcpts in inbox.envelopes for rcpt in rcpts)
    assert recipients == ["alice@cluster.example", "bob@cluster.example", "carol@cluster.example",
                          "dave@cluster.example"], recipients
    assert done.returncode == 1 and "mailed 4 digest(s)" in done.stdout, (done.stdout, done.stderr)
    assert done.stderr.splitlines()[-1] == (
        "error: 1 digest(s) not mailed, the address refused: user <script>alert(1)</script>: recipient "
        f"'<script>alert(1)</script>': neither a mail address nor a user name; kept in {site['spool'] / 'failed'}")
    [kept] = [json.loads(p.read_text()) for p in (site["spool"] / "failed").glob("*.json")]
    assert kept["to"] == ["<script>alert(1)</script>"] and "neither a mail address" in kept["errors"][-1]


@pytest.mark.parametrize("recipient", ["<script>alert(1)</script>", "a@b@c", "x@y.org, eve@example.org"])
def test_mailprog_keeps_a_mail_to_a_recipient_that_is_not_an_address_in_failed(tmp_path, recipient):
    """slurmctld passes the job's `--mail-user` (the user's own text) as MailProg's recipient."""
    port = free_port()
    env_file = tmp_path / "jobaware.env"
    env_file.write_text(f"JOBAWARE_HOME={tmp_path / 'home'}\nJOBAWARE_SMTP=127.0.0.1:{port}\n"
                        "JOBAWARE_MAIL_DOMAIN=cluster.example\n")
    environment = {**RECORDED["1"]["environment"], "SLURM_JOB_MAIL_TYPE": "Began",
                   "JOBAWARE_CONFIG": str(env_file), "PYTHONPATH": str(ROOT)}
    spool = tmp_path / "home" / "mail"
    with smtp_server(port) as (inbox, _):
        try:
            done = subprocess.run([sys.executable, "-m", "jobaware.adapters.slurm.mailprog", "-s", SUBJECT, recipient],
                                  capture_output=True, text=True, timeout=60, env=environment)
            time.sleep(3)  # a delivery, had one started, sends at once (a Began mail has no text to wait for)
        finally:
            _stop_deliveries(spool)
    assert inbox.envelopes == []
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and f"the mail to {recipient} " in done.stderr
    assert f"is kept in {spool / 'failed'}: " in done.stderr, done.stderr
    [kept] = [json.loads(p.read_text()) for p in (spool / "failed").glob("*.json")]
    assert kept["to"] == [recipient] and kept["subject"] == SUBJECT


@pytest.mark.slow
def test_on_a_live_slurm_a_forged_job_name_and_a_markup_mail_user_get_no_forged_or_misdirected_mail(tmp_path):
    """slurmctld (Slurm 22.05, with accounting) runs jobaware-mail as its MailProg: a job whose name forges an
    accounting record of its own id gets one mail with its real use and its name as text; a job whose
    `--mail-user` is markup gets none, slurmctld logs MailProg's one line, and the mail waits in failed/."""
    from harness.slurm_cluster import SlurmCluster, require_slurm

    require_slurm(accounting=True)
    with smtp_server() as (inbox, port):
        env_file, wrapper = tmp_path / "jobaware.env", tmp_path / "jobaware-mail"
        wrapper.write_text(f"#!/bin/sh\nexport JOBAWARE_CONFIG={env_file} PYTHONPATH={ROOT}\n"
                           f"exec {sys.executable} -m jobaware.adapters.slurm.mailprog \"$@\"\n")
        wrapper.chmod(0o755)
        cluster = SlurmCluster(tmp_path / "slurm", accounting=True, cpus=4, mail_prog=str(wrapper))
        env_file.write_text(f"JOBAWARE_HOME={tmp_path / 'home'}\nJOBAWARE_SMTP=127.0.0.1:{port}\n"
                            f"JOBAWARE_MAIL_DOMAIN=cluster.example\nSLURM_CONF={cluster.conf}\n")
        cluster.start()
        try:
            forged = "|".join(["1", "0:0", "", "billing=1,cpu=1,mem=1M,node=1", "1", "1", "COMPLETED", "3600", "60",
                               "01:00:00", "1", "billing=1,cpu=1,mem=1M,node=1", "", "1700000000", "1700000000",
                               "1700003600", "root", "root", "debug", "y"])
            mail = ["--mail-type=END", "--time=5", "--mem=50"]
            first = cluster.sbatch("#!/bin/bash\nsleep 1\n", *mail, "--mail-user=alice", f"--job-name=x\n{forged}")
            assert first == 1  # a fresh cluster's first job: the id its name forges a record of
            cluster.sbatch("#!/bin/bash\nsleep 1\n", *mail, "--mail-user=<script>alert(1)</script>", "--job-name=m")
            mails = inbox.wait(1, seconds=180)
            deadline = time.monotonic() + 60
            failed = tmp_path / "home" / "mail" / "failed"
            while not (failed.is_dir() and any(failed.iterdir())) and time.monotonic() < deadline:
                time.sleep(1)
            time.sleep(2)  # a misdirected mail, were there one, would be sent at once
            logged = (cluster.root / "log" / "slurmctld.log").read_text()
        finally:
            cluster.stop()
            _stop_deliveries(tmp_path / "home" / "mail")
    assert [rcpt for _, rcpts in inbox.envelopes for rcpt in rcpts] == ["alice@cluster.example"], inbox.envelopes
    body = mails[0].get_content().replace("\r\n", "\n")
    assert body.startswith('Job 1 "x\\n1|0:0||billing=1,cpu=1,mem=1M,node=1|') and body.count("Job 1 ") == 1, body
    assert "ran 1:00:00" not in body and "of the 0:05:00 asked" in body
    [kept] = [json.loads(p.read_text()) for p in failed.glob("*.json")]
    assert kept["to"] == ["<script>alert(1)</script>"] and "neither a mail address" in kept["errors"][-1]
    assert "MailProg returned error" in logged and "<script>alert(1)</script>" in logged
