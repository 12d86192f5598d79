"""Loopback servers in tests and benchmarks: a free port, waiting for a URL to answer, and stopping a server."""

from __future__ import annotations


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float = 90.0, process=None) -> None:
    """Poll `url` until it answers 200, at most `seconds` (bounded), or fail with the reason."""
    import time

    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {seconds:.0f} s")


def stop(process, seconds: float = 30.0) -> None:
    """Stop a server started in a session of its own (`start_new_session=True`) with its whole process group: SIGTERM,
    then SIGKILL if it is still there after `seconds`. A group already gone is no error."""
    import os
    import signal
    import subprocess

    def group(signum: int) -> None:
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            pass

    group(signal.SIGTERM)
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        group(signal.SIGKILL)
        process.wait(10)
