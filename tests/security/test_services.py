"""Attacks on the services and their clients, by an ordinary user of the login node, against a real `bentoml serve`
(the card gateway, started here on a free loopback port; the failure service of the session for /predict):

- the user binds the port a service URL names before the service starts, and answers for it (a forged failure risk
  that would be written into every job's comment, card and sbatch line, and could hold jobs): the adapter's client,
  the card gateway, `jobaware card`, the HTCondor follower and `slurm doctor` refuse it, having the site's token;
- half-sent requests (1,100 of them) and a body sent a byte at a time: cut off within the read deadlines, and the
  connections held at once capped, while /readyz answers;
- a POST without `Content-Type: application/json` (what a browser sends across sites without asking) is not read;
- a caller of /card cannot grow the audit without bound;
- callers of /predict naming a user cannot change what a later caller is answered about that user.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from harness.ports import free_port, stop, wait_for
from jobaware import card as cards
from jobaware import config, identity
from jobaware.errors import JobawareError
from tests.conftest import ROOT

FORGED_RISK = 0.99
FORGER = """
import hashlib, hmac, json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FORGED = {"/predict": {"model_version": "forged", "predictions": [{"job_id": 1, "p_fail": %r, "threshold": 0.1,
          "most_likely_failure": "TIMEOUT", "likely_fail": True}]},
          "/hold-decision": {"p_release": 0.0, "decision": "remove", "model_version": "forged"}}


class Forger(BaseHTTPRequestHandler):
    def answer(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps(FORGED.get(self.path, {})).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        nonce = self.headers.get("x-jobaware-nonce")
        if nonce:  # a proof made with a guessed secret: the header is there, the proof is not
            mac = hmac.new(b"guessed", nonce.encode() + hashlib.sha256(body).digest(), hashlib.sha256).hexdigest()
            self.send_header("x-jobaware-proof", mac)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Forger).serve_forever()
""" % FORGED_RISK
JOB = {"job_id": 1, "user": "victim", "wallclock_req": 3600.0, "nodes_req": 1, "processors_req": 4,
       "submit_time": "2019-03-01 10:00:00"}
MAX_CONNECTIONS = 256
AUDIT_MAX_BYTES, AUDIT_BACKUPS = 16_384, 2


@pytest.fixture(scope="module")
def token_file(tmp_path_factory) -> Path:
    """The site's service token: root's, 0640 (the attacker cannot read it)."""
    path = config.make_service_token(tmp_path_factory.mktemp("etc") / "service.token")
    assert path.stat().st_mode & 0o777 == 0o640
    return path


@pytest.fixture(scope="module")
def forger(local_user, open_folder) -> str:
    """The attacker's server, run as the throwaway user with the system's own Python, on the port the deployment
    names as its failure (and hold) service's, bound before any service of the deployment started."""
    script = open_folder / "forger.py"
    script.write_text(FORGER)
    script.chmod(0o644)
    port = free_port()
    process = subprocess.Popen([shutil.which("runuser") or "/usr/sbin/runuser", "-u", local_user.name, "--",
                                "/usr/bin/python3", str(script), str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=open_folder, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/readyz", 30, process)
        yield url
    finally:
        stop(process, 10)


@pytest.fixture(scope="module")
def gateway(forger, token_file, tmp_path_factory) -> dict:
    """The card gateway of the deployment, with the site's token, asking the failure service at the URL the
    attacker holds; its connection cap and audit bound set low here (the defaults: 1,024 and 64 MiB x 6)."""
    home = tmp_path_factory.mktemp("gateway-home")
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not (k.startswith("JOBAWARE_") and k.endswith("_URL"))},
           "JOBAWARE_HOME": str(home), "BENTOML_HOME": str(home / "bentoml"), "JOBAWARE_FAILURE_URL": forger,
           config.TOKEN_FILE_ENV: str(token_file), "JOBAWARE_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
           "JOBAWARE_AUDIT_MAX_BYTES": str(AUDIT_MAX_BYTES), "JOBAWARE_AUDIT_BACKUPS": str(AUDIT_BACKUPS)}
    process = subprocess.Popen([str(Path(sys.executable).with_name("bentoml")), "serve", "jobaware.serving.card:CardService",
                                "--port", str(port)], stdout=open(home / "serve.log", "wb"), stderr=subprocess.STDOUT,
                               start_new_session=True, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/readyz", 120, process)
        yield {"url": url, "home": home}
    finally:
        stop(process, 20)


@pytest.fixture
def site_token(token_file, monkeypatch) -> bytes:
    monkeypatch.setenv(config.TOKEN_FILE_ENV, str(token_file))
    return config.service_token()


# ---------------------------------------------------------------- a user answers for a service
def test_a_user_on_a_service_port_cannot_answer_for_the_service(forger, gateway, site_token):
    from jobaware.adapters.common.services import FailOpen
    from jobaware.adapters.htcondor.client import DecisionClient

    refused = f"{forger}/predict: {identity.NO_PROOF}"
    # the adapter's client (root or SlurmUser): an outage, backed off, never a verdict; its probe refused too
    adapter = FailOpen({"failure": forger}, backoff_s=60)
    reply = adapter.post("failure", "/predict", {"jobs": [JOB]})
    assert (reply.status, reply.reason, reply.answer) == ("unavailable", refused, None)
    adapter.probed.clear()
    adapter.probe_s = 0
    assert not adapter.available("failure")
    adapter.close()

    # `jobaware card`'s card: the failure part is missing, saying why; no forged risk in its comment line
    with cards.Services({"failure": forger}) as services:
        card = cards.make_card({"job_id": 1, "job": JOB}, services, keys=["failure"])
    assert card["parts"]["failure"] == {"status": "unavailable", "reason": refused} and card["missing"] == ["failure"]
    assert "99%" not in card["short"]

    # the card gateway: the same, and its own answer proves it is the deployment's gateway
    with cards.Services({}) as client:
        answer = client.request("POST", f"{gateway['url']}/card", json={"job_id": 1, "job": JOB}).json()
    assert answer["parts"]["failure"] == {"status": "unavailable", "reason": refused}

    # the HTCondor follower: no decision, so nothing released or removed
    follower = DecisionClient(forger)
    assert follower.decide(1, 0, 0, b"").status == "unavailable"
    follower.close()

    # what each of them took before, and what a client without the token still takes: the forgery
    with cards.Services({"failure": forger}, token=None) as blind:
        assert blind.post("failure", "/predict", {"jobs": [JOB]}).answer["predictions"][0]["p_fail"] == FORGED_RISK


def test_slurm_doctor_names_a_service_that_is_not_the_deployments(forger, gateway, site_token):
    from jobaware.adapters.slurm.adapter import Policy
    from jobaware.adapters.slurm.doctor import check_identity, check_services

    identified, token = check_identity()
    assert identified.ok and token == site_token
    off = {key: False for key in cards.declared() if key not in ("failure", "resource")}
    checks = {c.name: c for c in check_services({"failure": forger, "resource": gateway["url"]}, token,
                                                 Policy(capabilities=off))}
    assert set(checks) == {"service failure", "service resource"}  # the ones the policy switched off: not checked
    assert not checks["service failure"].ok
    assert checks["service failure"].detail.startswith(f"{forger}/readyz: {identity.NO_PROOF}")
    assert checks["service resource"].ok  # the gateway stands in for a service of the deployment: it proves itself
    # one the policy leaves on without a URL: the adapter never asks it, and needs failure's part for every verdict
    unnamed = {c.name: c for c in check_services({}, token, Policy(capabilities=off))}
    assert unnamed["service resource"].ok and "not deployed (no JOBAWARE_RESOURCE_URL)" in unnamed[
        "service resource"].detail
    assert not unnamed["service failure"].ok and "switch failure off" in unnamed["service failure"].detail


def test_no_service_has_a_default_url(monkeypatch):
    """A capability the deployment names no URL for is not deployed: nothing asks a port anyone may have bound
    first; the adapter refuses to start without the one whose part every verdict needs."""
    from jobaware.adapters.slurm.adapter import PendingJobAdapter, Policy

    for name in list(os.environ):
        if name.startswith("JOBAWARE_") and name.endswith("_URL"):
            monkeypatch.delenv(name)
    assert cards.service_urls() == {} and all(config.service_url(key) is None for key in cards.declared())
    monkeypatch.setenv("JOBAWARE_WAIT_URL", "http://127.0.0.1:9")
    assert cards.service_urls() == {"wait": "http://127.0.0.1:9"}
    with pytest.raises(JobawareError, match=r"^failure: every verdict needs its part, but no JOBAWARE_FAILURE_URL"):
        PendingJobAdapter(None, "c", cards.service_urls(), Policy())


@pytest.mark.parametrize(("mode", "text", "refusal"), [
    (0o644, "a" * 64, "lets others read it"),
    (0o660, "a" * 64, "lets others read it or its group write it"),
    (0o640, "short", "holds 5 bytes, expected at least 32"),
])
def test_a_token_others_may_read_or_guess_is_refused(tmp_path, monkeypatch, mode, text, refusal):
    path = tmp_path / "service.token"
    path.write_text(text)
    path.chmod(mode)
    monkeypatch.setenv(config.TOKEN_FILE_ENV, str(path))
    with pytest.raises(JobawareError, match=refusal):
        config.service_token()
    monkeypatch.setenv(config.TOKEN_FILE_ENV, str(tmp_path / "none"))
    with pytest.raises(JobawareError, match="cannot read the service token"):
        config.service_token()


def test_a_user_who_cannot_read_the_token_is_told_the_answers_are_unverified(tmp_path, monkeypatch):
    """`jobaware card` run by a user: the site's token (root:jobaware 0640) is not theirs to open, so the card's
    answers are shown unverified, and said to be; whoever may read it has them verified."""
    from jobaware.adapters.slurm.commands import readable_token

    path = config.make_service_token(tmp_path / "service.token")
    monkeypatch.setenv(config.TOKEN_FILE_ENV, str(path))
    assert readable_token() == (config.service_token(), None)
    monkeypatch.setenv(config.TOKEN_FILE_ENV, str(tmp_path / "not-theirs"))  # as open() fails for them
    token, why = readable_token()
    assert token is None and why.startswith(f"{config.TOKEN_FILE_ENV}={tmp_path / 'not-theirs'}: cannot read")
    monkeypatch.delenv(config.TOKEN_FILE_ENV)
    assert readable_token() == (None, f"{config.TOKEN_FILE_ENV} is not set")


# ---------------------------------------------------------------- read deadlines and the connection cap
def _closed(sock: socket.socket) -> bool:
    """Whether the server closed this connection (end of file or reset), without waiting."""
    try:
        return sock.recv(1024, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_half_sent_requests_are_cut_off_and_capped_while_readyz_answers(gateway):
    """1,100 requests that stop half-way through their headers: the service holds at most its cap of them, /readyz
    from another client still answers 200 at once, and every half-sent one is closed by the service within the
    header deadline (5 s)."""
    host, port = "127.0.0.1", int(gateway["url"].rsplit(":", 1)[1])
    held = []
    try:
        started = time.monotonic()
        for _ in range(1100):
            sock = socket.create_connection((host, port), timeout=10)
            sock.sendall(b"POST /card HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n")
            sock.setblocking(False)
            held.append(sock)
        asked = time.monotonic()
        assert httpx.get(f"{gateway['url']}/readyz", timeout=10).status_code == 200
        answered = time.monotonic() - asked
        assert answered < 4.0, f"/readyz took {answered:.1f} s"
        open_now = sum(not _closed(sock) for sock in held)
        assert open_now <= MAX_CONNECTIONS, f"{open_now} half-sent connections held, the cap is {MAX_CONNECTIONS}"
        deadline = started + 5.0 + 10.0  # the header deadline, and time for a loaded machine
        while time.monotonic() < deadline and not all(_closed(sock) for sock in held):
            time.sleep(0.25)
        left = sum(not _closed(sock) for sock in held)
        assert left == 0, f"{left} half-sent connections still open {time.monotonic() - started:.0f} s on"
    finally:
        for sock in held:
            sock.close()
    assert httpx.get(f"{gateway['url']}/readyz", timeout=10).status_code == 200
    exposition = httpx.get(f"{gateway['url']}/metrics", timeout=10).text  # each close counted by its reason
    for reason in ("header_timeout", "over_cap"):
        found = re.search(rf'jobaware_service_connections_closed_total{{[^}}]*reason="{reason}"[^}}]*}} (\S+)', exposition)
        assert found and float(found.group(1)) > 0, f"no {reason} close counted"


def test_a_body_sent_a_byte_at_a_time_is_cut_off(gateway):
    host, port = "127.0.0.1", int(gateway["url"].rsplit(":", 1)[1])
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"POST /card HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n"
                     b"\r\n{")
        sock.setblocking(False)
        started = time.monotonic()
        while time.monotonic() - started < 30 and not _closed(sock):
            try:
                sock.sendall(b" ")
            except OSError:
                break
            time.sleep(0.5)
        cut = time.monotonic() - started
    assert cut < 5.0 + 5.0 + 5.0, f"a body trickling for {cut:.0f} s was not cut off"  # header + body deadlines


# ---------------------------------------------------------------- JSON only as JSON
@pytest.mark.parametrize("headers", [{}, {"content-type": "text/plain"}, {"content-type": "application/x-www-form-urlencoded"}])
def test_a_body_not_sent_as_json_is_not_read(gateway, headers):
    """What a page on any site can make a browser post to loopback without asking (no preflight): refused, 415,
    in the one error shape, the body unread."""
    response = httpx.post(f"{gateway['url']}/card", content=json.dumps({"job_id": 1, "job": JOB}).encode(),
                          headers=headers, timeout=30)
    assert response.status_code == 415, response.text[:300]
    assert response.json() == {"error": "body: expected JSON (content-type: application/json), got "
                                        + (repr(headers["content-type"]) if headers else "no content-type"),
                               "field": None}


# ---------------------------------------------------------------- the audit stays bounded
def test_many_cards_keep_the_audit_within_its_bound(gateway):
    audit = gateway["home"] / "audit"
    with httpx.Client(timeout=30) as client:
        for number in range(300):
            response = client.post(f"{gateway['url']}/card", json={"job_id": number, "job": {**JOB, "job_id": number}})
            assert response.status_code == 200
    files = sorted(path for path in audit.iterdir() if path.name.startswith("card.jsonl") and path.suffix != ".lock")
    sizes = {path.name: path.stat().st_size for path in files}
    assert set(sizes) == {"card.jsonl", "card.jsonl.1", "card.jsonl.2"}, sizes  # rotated, two kept
    assert all(size <= AUDIT_MAX_BYTES for size in sizes.values()), sizes
    newest = [json.loads(line) for line in (audit / "card.jsonl").read_text().splitlines()]
    assert newest[-1]["job_id"] == 299


# ---------------------------------------------------------------- /predict keeps nothing a caller sent
def test_requests_naming_a_user_do_not_change_what_is_answered_about_them(failure_service):
    """A caller sends 40 requests of 25 new jobs of user0001, all in the second the probe job is submitted: the
    probe's answer is the same before and after (failure's submission counts came from callers)."""
    probe = {**JOB, "job_id": 10**9, "user": "user0001", "account": "account0001", "partition": "partition002"}

    def asked() -> dict:
        response = httpx.post(f"{failure_service}/predict", json={"jobs": [probe]}, timeout=60)
        assert response.status_code == 200, response.text[:300]
        return response.json()["predictions"][0]

    before = asked()
    for request in range(40):
        jobs = [{**probe, "job_id": 2 * 10**9 + request * 25 + number} for number in range(25)]
        assert httpx.post(f"{failure_service}/predict", json={"jobs": jobs}, timeout=60).status_code == 200
    assert asked() == before
