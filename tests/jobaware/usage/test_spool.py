"""Mail through a real SMTP server on loopback: sent, retried while the server is down, given up on (and kept)
after its tries or at once when refused for good; a mail is never lost silently."""

from __future__ import annotations

import json

import pytest

from jobaware.usage.spool import TRIES, WORKER, NotYet, Settings, Spool, delay, deliver, message, send_due
from tests.conftest import free_port
from tests.smtp import smtp_server


def settings(tmp_path, port: int) -> Settings:
    return Settings.from_env({"JOBAWARE_SMTP": f"127.0.0.1:{port}", "JOBAWARE_MAIL_FROM": "slurm@cluster.example",
                              "JOBAWARE_MAIL_DOMAIN": "example.org", "JOBAWARE_MAIL_SPOOL": str(tmp_path / "spool")})


class Clock:
    def __init__(self, now: float = 1_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_settings_from_the_environment_and_one_line_errors(tmp_path):
    found = Settings.from_env({"JOBAWARE_SMTP": "mail.example.org", "JOBAWARE_HOME": str(tmp_path)})
    assert (found.host, found.port, found.spool) == ("mail.example.org", 25, tmp_path / "mail")
    assert found.sender == ""  # no name lookup while spooling (MailProg's path): the delivery's mail says the host
    import socket

    entry = {"to": ["alice"], "subject": "s", "body": "b", "created": 0.0, "id": "x"}
    assert message(entry, found)["From"] == f"jobaware@{socket.getfqdn()}"
    assert message(entry, Settings(sender="hpc@example.org"))["From"] == "hpc@example.org"
    from jobaware.errors import InputError

    with pytest.raises(InputError, match=r"JOBAWARE_SMTP 'host:x': expected host\[:port\]"):
        Settings.from_env({"JOBAWARE_SMTP": "host:x"})


def test_a_spooled_mail_is_sent_and_leaves_the_spool(tmp_path):
    with smtp_server() as (inbox, port):
        chosen = settings(tmp_path, port)
        spool = Spool(chosen.spool)
        path = spool.put(["alice", "bob@other.org"], "Slurm Job_id=7 Name=x Ended", "Job 7: COMPLETED\n")
        assert json.loads(path.read_text())["body"] == "Job 7: COMPLETED\n"  # on disk before any try
        done = send_due(spool, chosen)
        assert (done.sent, done.deferred, done.failed) == (1, 0, 0) and spool.entries() == []
        [mail] = inbox.mails
    assert inbox.envelopes == [("slurm@cluster.example", ["alice@example.org", "bob@other.org"])]
    assert mail["Subject"] == "Slurm Job_id=7 Name=x Ended" and mail.get_payload().strip() == "Job 7: COMPLETED"
    assert mail["Auto-Submitted"] == "auto-generated"


def test_a_server_that_is_down_is_retried_then_the_mail_is_kept_in_failed(tmp_path):
    chosen = settings(tmp_path, free_port())  # nothing listens there
    spool, clock = Spool(chosen.spool), Clock()
    spool.put(["alice"], "subject", "body", now=clock())
    done = deliver(spool, chosen, clock=clock, sleep=clock.sleep)
    assert (done.sent, done.failed) == (0, 1) and done.deferred == TRIES - 1
    assert clock.now - 1_000.0 == pytest.approx(sum(delay(t) for t in range(1, TRIES)))  # ~64 minutes of tries
    [(_, entry)] = spool.entries(spool.failed)
    assert entry["tries"] == TRIES and len(entry["errors"]) == TRIES and "ConnectionRefusedError" in entry["errors"][-1]
    # the server comes back: queued again, it is sent
    assert spool.retry_failed() == 1
    with smtp_server(chosen.port) as (inbox, _):
        assert send_due(spool, chosen).sent == 1
    assert len(inbox.mails) == 1 and spool.entries(spool.failed) == []


def test_a_mail_refused_for_good_is_not_tried_again(tmp_path):
    with smtp_server(refuse="550 5.1.1 no such user") as (inbox, port):
        chosen = settings(tmp_path, port)
        spool = Spool(chosen.spool)
        spool.put(["nobody"], "subject", "body")
        done = send_due(spool, chosen)
    assert done.failed == 1 and "550" in done.errors[0] and inbox.mails == []
    assert [e["tries"] for _, e in spool.entries(spool.failed)] == [1]


def test_a_mail_whose_text_is_not_ready_waits_and_one_delivery_runs_at_a_time(tmp_path):
    with smtp_server() as (inbox, port):
        chosen = settings(tmp_path, port)
        spool, clock = Spool(chosen.spool), Clock()
        spool.put(["alice"], "subject", None, kind="slurm", request={"n": 0}, now=clock())
        asked = []

        def compose(entry):
            asked.append(clock())
            if len(asked) < 3:
                raise NotYet(5.0)
            return "composed"

        with spool.locked(WORKER) as held:
            assert held and deliver(spool, chosen, compose) is None  # another delivery runs: it sends this mail
        done = deliver(spool, chosen, compose, clock=clock, sleep=clock.sleep)
        assert done.sent == 1 and asked == [1000.0, 1005.0, 1010.0]
        assert inbox.mails[0].get_payload().strip() == "composed"


def test_an_unreadable_spool_file_is_moved_aside_not_lost(tmp_path):
    with smtp_server() as (inbox, port):
        chosen = settings(tmp_path, port)
        spool = Spool(chosen.spool)
        spool.put(["alice"], "good", "body")
        (spool.queue / "0-broken.json").write_text("{not json")
        assert send_due(spool, chosen).sent == 1
    assert (spool.failed / "0-broken.json").read_text() == "{not json"


def test_a_flush_tries_every_mail_now_while_a_delivery_waits_for_its_retry(tmp_path):
    port = free_port()
    chosen = settings(tmp_path, port)
    spool, clock = Spool(chosen.spool), Clock()
    spool.put(["alice"], "subject", "body", now=clock())
    assert send_due(spool, chosen, clock=clock).deferred == 1  # the server is down: the next try in 30 s
    with smtp_server(port) as (inbox, _), spool.locked(WORKER):  # a delivery is waiting for that try
        assert send_due(spool, chosen, clock=clock).sent == 0  # not due yet
        assert send_due(spool, chosen, every=True, clock=clock).sent == 1  # `jobaware mail flush`
    assert len(inbox.mails) == 1 and spool.entries() == []


def test_a_mail_that_cannot_be_written_is_kept_in_failed_and_the_others_still_go(tmp_path):
    """A job name with a line break (`sbatch -J $'x\\nBcc: ...'`) reaches Slurm's subject: the subject goes on one
    line; an address with a line break cannot be written at all and is given up on, kept with its error. Before,
    either stopped the delivery with a ValueError, and every later mail waited behind it for ever."""
    with smtp_server() as (inbox, port):
        chosen = settings(tmp_path, port)
        spool = Spool(chosen.spool)
        spool.put(["alice"], "Slurm Job_id=1 Name=x\nBcc: eve@example.org Ended", "body", now=1.0)
        spool.put(["bob\nBcc: eve@example.org"], "Slurm Job_id=2 Ended", "body", now=2.0)
        spool.put(["carol"], "Slurm Job_id=3 Ended", "body", now=3.0)
        (spool.queue / "0-not-an-entry.json").write_text("[]")
        done = send_due(spool, chosen)
        assert (done.sent, done.failed) == (2, 1) and spool.entries() == []
    assert [mail["Subject"] for mail in inbox.mails] == ["Slurm Job_id=1 Name=x Bcc: eve@example.org Ended",
                                                         "Slurm Job_id=3 Ended"]
    assert [to for _, to in inbox.envelopes] == [["alice@example.org"], ["carol@example.org"]]
    failed = {path.name: entry for path, entry in spool.entries(spool.failed)}
    assert (spool.failed / "0-not-an-entry.json").read_text() == "[]"
    [kept] = [entry for entry in failed.values() if entry["to"] == ["bob\nBcc: eve@example.org"]]
    assert "cannot be written as a mail" in kept["errors"][-1]


def test_a_pass_that_cannot_write_a_mail_leaves_it_to_the_delivery(tmp_path):
    """A digest's pass (no compose) over a spool holding an end-of-job mail that waits for accounting: it sent
    that mail with an empty text before."""
    with smtp_server() as (inbox, port):
        chosen = settings(tmp_path, port)
        spool = Spool(chosen.spool)
        spool.put(["alice"], "Slurm Job_id=1 Ended", None, kind="slurm", request={"SLURM_JOB_ID": "1"})
        spool.put(["bob"], "jobaware: your jobs", "digest", kind="digest")
        assert send_due(spool, chosen, every=True).sent == 1
    assert [mail["Subject"] for mail in inbox.mails] == ["jobaware: your jobs"]
    assert [entry["subject"] for _, entry in spool.entries()] == ["Slurm Job_id=1 Ended"]
