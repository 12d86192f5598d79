"""A job's name is the user's text: written into any jobaware log it stays on one line, its control characters
escaped, so that `sbatch -J $'x\\nFAKE LINE'` cannot forge a line an admin (or a log shipper) reads as jobaware's.
Each handler jobaware sets up (the mail log, the Slurm adapter's and collector's logs, the HTCondor follower's log and
its warnings on stderr) is checked, and the mail log end to end through a real delivery."""

from __future__ import annotations

import logging
import os

import pytest

from jobaware.usage.spool import Settings, Spool, deliver, log_to
from tests.smtp import smtp_server

NAME = "x\nFAKE LINE\r\x1b[31mred\x1b[0m\u2028\u2029\x85\x00end"


def lines_of(path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def assert_one_line_each(path, records: int) -> None:
    found = lines_of(path)
    assert len(found) == records, found
    text = path.read_text(encoding="utf-8")
    for forged in ("\r", "\x1b", "\u2028", "\u2029", "\x85", "\x00"):
        assert forged not in text
    assert all(not line.startswith("FAKE LINE") for line in found)
    assert "x\\nFAKE LINE\\r\\x1b[31mred\\x1b[0m\\u2028\\u2029\\x85\\x00end" in text


@pytest.fixture
def restored_logging():
    """Each handler setup changes a logger of the process: put them back after the test."""
    names = ("", "jobaware.mail", "jobaware.adapters.htcondor")
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level,
                    logging.getLogger(name).propagate) for name in names}
    for name in names[1:]:  # set up afresh here, whatever an earlier test of the session left on them
        logging.getLogger(name).handlers[:] = []
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


def test_the_mail_log_keeps_a_forged_job_name_on_one_line(tmp_path, restored_logging):
    with smtp_server() as (inbox, port):
        settings = Settings.from_env({"JOBAWARE_SMTP": f"127.0.0.1:{port}", "JOBAWARE_MAIL_FROM": "slurm@example.org",
                                      "JOBAWARE_MAIL_SPOOL": str(tmp_path / "spool")})
        log = log_to(tmp_path / "logs")
        Spool(settings.spool).put(["alice@example.org"], f"Slurm Job_id=7 Name={NAME} Ended", "body")
        done = deliver(Spool(settings.spool), settings)
    assert done.sent == 1 and len(inbox.mails) == 1
    assert_one_line_each(log, 1)


def test_a_traceback_in_the_mail_log_is_one_line_too(tmp_path, restored_logging):
    log = log_to(tmp_path)
    try:
        raise ValueError(f"bad job name {NAME}")
    except ValueError:
        logging.getLogger("jobaware.mail").exception("mail %s failed", NAME)
    assert_one_line_each(log, 1)
    assert "Traceback (most recent call last):\\n" in log.read_text()


def test_the_slurm_adapter_and_collector_logs_keep_a_forged_job_name_on_one_line(tmp_path, monkeypatch,
                                                                                   restored_logging):
    from jobaware.adapters.slurm.commands import _logging

    monkeypatch.setenv("JOBAWARE_HOME", str(tmp_path))
    path = _logging("slurm-collect")
    logging.getLogger("jobaware.adapters.slurm.collector").warning("job %s: no state", NAME)
    logging.getLogger("jobaware.adapters.slurm.collector").warning(f"job {NAME}: formatted before logging")
    assert_one_line_each(path, 2)


def test_the_htcondor_follower_log_and_its_warnings_keep_a_forged_name_on_one_line(tmp_path, capsys,
                                                                                     restored_logging):
    from jobaware.adapters.htcondor.commands import _log_to

    path = tmp_path / "hold-follow.log"
    _log_to(path)
    logging.getLogger("jobaware.adapters.htcondor").warning("hold of job %s: %s", 7, NAME)
    assert_one_line_each(path, 1)
    warned = capsys.readouterr().err
    assert warned.count("\n") == 1 and "\x1b" not in warned and "x\\nFAKE LINE" in warned


def test_a_log_never_appends_through_a_link_planted_at_its_name(tmp_path):
    """A link at the log's name (a planted `logs/mail.log -> /etc/shadow`) is refused, not written through."""
    from jobaware.logs import file_handler

    target = tmp_path / "root-only"
    target.write_text("kept\n")
    (tmp_path / "mail.log").symlink_to(target)
    with pytest.raises(OSError):
        file_handler(tmp_path / "mail.log")
    assert target.read_text() == "kept\n"
    os.mkfifo(tmp_path / "fifo.log")
    with pytest.raises(OSError):
        file_handler(tmp_path / "fifo.log")  # never blocks
