"""No server outlives the `jobaware serve` (or `demo`) that started it, however that one dies; a port still closing
is waited for (said on a terminal; a refusal in a script is one line)."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, wait_for

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))

# a server as BentoML starts one: the main process starts a worker in a session of its own, which holds the port
FAKE_SERVER = """
import socket, subprocess, sys, time
port = int(sys.argv[1])
if sys.argv[2:] == ["worker"]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    while True:
        listener.accept()[0].close()
subprocess.Popen([sys.executable, __file__, str(port), "worker"], start_new_session=True)
while True:
    time.sleep(1)
"""


def _marked(mark: str) -> list[int]:
    """Processes whose environment holds `mark` (JOBAWARE_HOME=..., or the fake server's own mark)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark.encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def _kill_marked(mark: str) -> None:
    for pid in _marked(mark):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("guarded", [False, True])
def test_a_sigkill_of_the_starters_whole_group_leaves_no_server(tmp_path, guarded):
    """Without the guard the worker lives on, orphaned, answering on the port (what BentoML's did); with it, the
    port is free and no process is left."""
    fake, port, mark = tmp_path / "server.py", free_port(), f"FAKE_SERVER_MARK={tmp_path}"
    fake.write_text(FAKE_SERVER)
    server = [sys.executable, str(fake), str(port)]
    start = (f"from jobaware.supervise import Guarded; Guarded({server!r}).wait()" if guarded else
             f"import subprocess; subprocess.Popen({server!r}).wait()")
    starter = subprocess.Popen([sys.executable, "-c", start], cwd=ROOT, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT), "FAKE_SERVER_MARK": str(tmp_path)})
    try:
        assert _until(lambda: _listening(port), 30), "the server did not start"
        os.killpg(starter.pid, signal.SIGKILL)
        starter.wait(10)
        if not guarded:
            time.sleep(2)
            assert _listening(port) and _marked(mark), "the unguarded worker should have lived on"
            return
        assert _until(lambda: not _listening(port) and not _marked(mark), 20), "a server process outlived its starter"
    finally:
        _kill_marked(mark)


@pytest.mark.slow
def test_jobaware_serve_sigkilled_with_its_group_leaves_no_bentoml_behind(tmp_path):
    home, port = tmp_path / "home", free_port()
    process = subprocess.Popen([JOBAWARE, "serve", "failure", "--port", str(port)], start_new_session=True,
                               env={**os.environ, "JOBAWARE_HOME": str(home)}, stdout=open(tmp_path / "serve.log", "wb"),
                               stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/livez", 180, process)
        assert len(_marked(f"JOBAWARE_HOME={home}")) >= 3  # serve, its guard, BentoML and its worker
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        assert _until(lambda: not _listening(port) and not _marked(f"JOBAWARE_HOME={home}"), 30), \
            "a server process outlived `jobaware serve`"
    finally:
        _kill_marked(f"JOBAWARE_HOME={home}")


@pytest.mark.slow
def test_serve_waits_for_a_port_still_closing_then_says_so_in_one_line(tmp_path):
    home, port = tmp_path / "home", free_port()
    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        refused = subprocess.run([JOBAWARE, "serve", "failure", "--port", str(port)], env=env, capture_output=True,
                                 text=True, timeout=60)
        # not on a terminal: the wait is not said (it is logged), so that the refusal stays one line
        assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
            f"error: --port {port}: cannot listen on 127.0.0.1:{port} (Address already in use) after waiting 15 s; "
            "pick a free port with --port"]
        process = subprocess.Popen([JOBAWARE, "serve", "failure", "--port", str(port)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.err", "wb"))
        time.sleep(3)
        holder.close()  # the port closes while serve waits: it goes on
        wait_for(f"http://127.0.0.1:{port}/livez", 180, process)
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        assert not _listening(port) and not _marked(f"JOBAWARE_HOME={home}")
        assert "error:" not in (tmp_path / "serve.err").read_text()
    finally:
        holder.close()
        _kill_marked(f"JOBAWARE_HOME={home}")
