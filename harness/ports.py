"""Loopback servers in tests and benchmarks: a free port, and waiting for a URL to answer."""

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
