"""`harness.ports.stop`: the one way tests and benchmarks stop a server they started in a session of its own."""

from __future__ import annotations

import signal
import subprocess
import time

from harness.ports import stop


def test_a_server_is_asked_to_stop_and_one_that_ignores_it_is_killed():
    polite = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stop(polite)
    assert polite.returncode == -signal.SIGTERM
    deaf = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60"], start_new_session=True)
    time.sleep(0.2)  # the trap is set
    started = time.monotonic()
    stop(deaf, seconds=1)
    assert deaf.returncode == -signal.SIGKILL and time.monotonic() - started < 10


def test_a_server_that_has_already_gone_is_no_error():
    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait(10)
    stop(gone)
    assert gone.returncode == 0
