"""A password in a URI (the job store's and the notices' Redis, documented in jobaware.env) never shows: not in an
error line, a JSON error, a log line, a doctor's check, a copy's report or an export's header. A real `redis-server`
that asks for a password is given a wrong one; every word about it names the host, never the password."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobaware.errors import JobawareError
from jobaware.text import redacted
from tests.conftest import ROOT, free_port

PASSWORD = "S3cret-redis-pw"
WRONG = "wr0ng-Guess-pw"
JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


@pytest.fixture(scope="module")
def guarded_redis(tmp_path_factory):
    """Debian's redis-server on a free loopback port, with `--requirepass`; its host:port."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("JOBAWARE_REQUIRE_SLURM"):
            pytest.fail("redis-server is not installed here; apt-get install redis-server")
        pytest.skip("redis-server is not installed here; apt-get install redis-server")
    import redis

    port, folder = free_port(), tmp_path_factory.mktemp("redis-auth")
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--requirepass", PASSWORD,
                                "--dir", str(folder), "--save", "", "--appendonly", "no", "--daemonize", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, password=PASSWORD, socket_connect_timeout=1)
        for _ in range(100):  # bounded: 10 s
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        client.close()
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(20)


def _said(text: str, host: str) -> None:
    assert host in text, text
    assert WRONG not in text and PASSWORD not in text, text


@pytest.mark.parametrize("uri", ["redis://:{pw}@{host}/0", "redis://default:{pw}@{host}/0",
                                 "redis://{host}/0?password={pw}"])
def test_a_store_with_a_wrong_password_is_named_without_it(guarded_redis, uri, tmp_path):
    store = uri.format(pw=WRONG, host=guarded_redis)
    for args in (("report", "jobs", "--store", store), ("report", "jobs", "--store", store, "--json"),
                 ("store", "copy", "--input", store, "--output", f"sqlite:{tmp_path / 'copy'}")):
        done = subprocess.run([JOBAWARE, *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={**os.environ, "JOBAWARE_HOME": str(tmp_path / "home")})
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        said = done.stdout if "--json" in args else done.stderr
        _said(said, guarded_redis)
        assert said.count("\n") == 1 and "***" in said, said
    from jobaware.store.redis import RedisStore

    with pytest.raises(JobawareError) as refused:
        RedisStore(store)
    _said(str(refused.value), guarded_redis)


def test_the_notices_stream_with_a_wrong_password_is_named_without_it(guarded_redis):
    from jobaware.adapters.slurm.notices import open_notices

    with pytest.raises(JobawareError) as refused:
        open_notices(f"redis://:{WRONG}@{guarded_redis}/0?stream=jobaware:notices")
    _said(str(refused.value), guarded_redis)
    assert str(refused.value).startswith(f"notices redis://:***@{guarded_redis}/0?stream=jobaware:notices: ")


def test_the_doctor_names_a_store_without_its_password(guarded_redis):
    from jobaware.adapters.slurm.doctor import check_store

    for pw in (WRONG, PASSWORD):
        [check] = check_store(f"redis://:{pw}@{guarded_redis}/0")
        _said(check.detail, guarded_redis)


def test_a_copy_and_an_export_of_a_store_reached_with_its_password_never_write_it(guarded_redis, tmp_path):
    from jobaware.store import JobKey, open_store
    from jobaware.store.export import from_store

    store = f"redis://:{PASSWORD}@{guarded_redis}/0"
    with open_store(store) as opened:
        opened.put_job(JobKey("c1", 7, 1_780_000_000), {"user": "alice", "state": "COMPLETED"})
    done = subprocess.run([JOBAWARE, "store", "copy", "--input", store, "--output", f"sqlite:{tmp_path / 'copy'}"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "JOBAWARE_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    _said(done.stdout + done.stderr, guarded_redis)
    export = Path(from_store(store, tmp_path / "export")).read_text()
    assert json.loads(export.splitlines()[0]) == {"store": f"redis://:***@{guarded_redis}/0"}
    _said(export.splitlines()[0], guarded_redis)


def test_a_log_line_naming_a_uri_hides_its_password(tmp_path, monkeypatch):
    from jobaware.adapters.slurm.commands import _logging

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    monkeypatch.setenv("JOBAWARE_HOME", str(tmp_path))
    try:
        path = _logging("slurm-collect")
        logging.getLogger("jobaware.adapters.slurm.collector").error("store %s: lost", f"rediss://u:{WRONG}@db.example:6380/1")
        logging.getLogger("jobaware.adapters.slurm.collector").error(f"notices redis://db.example/0?password={WRONG}&x=1")
    finally:
        for handler in root.handlers:
            if handler not in saved[0]:
                handler.close()
        root.handlers[:], root.level = saved
    text = path.read_text()
    assert WRONG not in text and "rediss://u:***@db.example:6380/1" in text
    assert "redis://db.example/0?password=***&x=1" in text


def test_redaction_hides_every_form_of_uri_password_in_linear_time():
    cases = {
        "store redis://:pw@h:6379/0: x": "store redis://:***@h:6379/0: x",
        "redis://user:p%40ss@h/0 and rediss://:p@ss@h2": "redis://user:***@h/0 and rediss://:***@h2",
        "(redis://u:pw@h)": "(redis://u:***@h)",
        "unix:///run/redis.sock?db=0&password=pw": "unix:///run/redis.sock?db=0&password=***",
        "redis://h:6379/0 no password; mail a@b.c": "redis://h:6379/0 no password; mail a@b.c",
        "http://user@host/path": "http://user@host/path",
    }
    for text, shown in cases.items():
        assert redacted(text) == shown, text
    hostile = ("a://:" * 20_000) + "x@" + ("b" * 60_000) + " " + "redis://:" + "p" * 60_000 + "@h"
    started = time.process_time()
    hidden = redacted(hostile)
    assert "p" * 100 not in hidden and time.process_time() - started < 2.0  # generous: a loaded 2-core machine


def test_the_mail_settings_never_show_the_smtp_password():
    from jobaware.usage.spool import Settings

    settings = Settings.from_env({"JOBAWARE_SMTP": "mail.example.org:587", "JOBAWARE_SMTP_USER": "jobaware",
                                  "JOBAWARE_SMTP_PASSWORD": PASSWORD})
    assert settings.password == PASSWORD and PASSWORD not in repr(settings) and PASSWORD not in str(settings)


def test_a_service_url_s_password_never_reaches_a_card_s_reason():
    """The adapters reach services behind an ingress with its password in the URL (the credentials file): a part's
    reason, which users read on their cards and in their comments, names the service without it."""
    from jobaware.card import Services

    with Services({"failure": "https://jobaware:s3cret@127.0.0.1:9/failure"}, 1, token=None) as services:
        reason = services.post("failure", "/predict", {}).reason
    assert "s3cret" not in reason and "jobaware:***@127.0.0.1:9/failure/predict unreachable" in reason
