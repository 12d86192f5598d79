"""Servers tied to the command that started them: none outlives `jobaware serve` or `jobaware demo`, however it ends.

BentoML starts its workers in sessions of their own, so a SIGKILL of the starter (or of its whole process group)
would leave them running, orphaned, still answering on the port. A server therefore runs under a guard: a small
process in a session of its own (a signal to the starter's process group does not reach it) that is the
subreaper of the server's process tree (PR_SET_CHILD_SUBREAPER: an orphaned worker becomes its child, not
init's) and holds the reading end of a pipe whose writing end only the starter holds. When the starter ends,
whatever way (an exit, SIGTERM, SIGKILL), the kernel closes the pipe; the guard then sends SIGTERM to every process
of the tree, SIGKILL after a grace period to what is left, and exits. When the server ends by itself, the guard
exits with its status. The server is also asked to stop (SIGTERM) should the guard itself die.

    python -m jobaware.supervise --fd N --grace S -- COMMAND...   (what `start` runs)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from jobaware.errors import JobawareError

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
GRACE_SECONDS = 10.0  # below `jobaware demo`'s own 20 s wait for its guards
PORT_WAIT_SECONDS = 15.0


def _prctl(option: int, value: int) -> bool:
    """Linux's prctl(2); False where it is not available."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# ---------------------------------------------------------------- the starter's side
class Guarded:
    """A server started under a guard; `stop` (or the starter's end) stops its whole tree."""

    def __init__(self, command: list[str], env: dict | None = None, stdout=None, stderr=None,
                 grace: float = GRACE_SECONDS):
        reading, self._writing = os.pipe()  # both ends not inherited, but `reading` by the guard alone
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-m", "jobaware.supervise", "--fd", str(reading), "--grace", str(grace), "--",
                 *command], env=env, stdout=stdout, stderr=stderr, pass_fds=(reading,), start_new_session=True)
        except BaseException:
            os.close(self._writing)
            raise
        finally:
            os.close(reading)
        self.pid, self.grace = self.process.pid, grace

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.process.wait(timeout)

    def release(self) -> None:
        """Tell the guard to stop the server (as the starter's end would)."""
        if self._writing is not None:
            os.close(self._writing)
            self._writing = None

    def stop(self) -> int | None:
        """Stop the server and wait for its guard (bounded: the guard's grace, then a SIGKILL of the guard)."""
        self.release()
        try:
            return self.process.wait(self.grace + 10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)


def wait_for_port(host: str, port: int, seconds: float = PORT_WAIT_SECONDS,
                  say: Callable[[str], None] = lambda line: None) -> None:
    """Return once `host:port` can be listened on; a port still held (a server that is stopping) is waited for up
    to `seconds`, said in one line; past that, a one-line error."""
    if not 1 <= port <= 65535:
        raise JobawareError(f"--port: expected 1..65535, got {port}")
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise JobawareError(f"--host {host}: cannot resolve ({exc.strerror})") from None
    deadline, said = time.monotonic() + seconds, False
    while True:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
                return
            except OSError as exc:
                error = exc
        if error.errno != 98 or time.monotonic() >= deadline:  # EADDRINUSE: wait; anything else is at once
            waited = f" after waiting {seconds:.0f} s" if said else ""
            raise JobawareError(f"--port {port}: cannot listen on {host}:{port} ({error.strerror}){waited}; "
                                "pick a free port with --port") from None
        if not said:
            say(f"port {port} on {host} is still in use (a server stopping?); waiting up to {seconds:.0f} s for it")
            said = True
        time.sleep(0.25)


def serve(command: list[str], env: dict, host: str, port: int, say: Callable[[str], None]) -> int:
    """Run a server in the foreground under a guard (the port waited for first); its exit status. Ctrl-C and
    SIGTERM (which the CLI turns into SystemExit) stop it; a SIGKILL of this process stops it too."""
    wait_for_port(host, port, say=say)
    sys.stdout.flush()
    sys.stderr.flush()
    server = Guarded(command, env)
    try:
        return server.wait()
    finally:
        server.stop()


# ---------------------------------------------------------------- the guard
def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        parent = int(text[text.rindex(")") + 2:].split()[1])
        tree.setdefault(parent, []).append(int(stat.parent.name))
    return tree


def _descendants(pid: int) -> list[int]:
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    """Collect every child that has ended (the server, and orphans of its tree that became ours)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _signal_tree(signum: int) -> list[int]:
    pids = _descendants(os.getpid())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    return pids


def stop_tree(grace: float) -> None:
    """SIGTERM to every process below this one; after `grace` seconds, SIGKILL to what is left."""
    deadline = time.monotonic() + grace
    _signal_tree(signal.SIGTERM)
    while time.monotonic() < deadline:
        _reap()
        if not _descendants(os.getpid()):
            return
        time.sleep(0.1)
    while _signal_tree(signal.SIGKILL):
        time.sleep(0.1)
        _reap()


def guard(fd: int, grace: float, command: list[str]) -> int:
    """Run `command` until it ends, or until the pipe `fd` closes (the starter ended) or this guard gets SIGTERM;
    then stop its whole tree. Returns the command's status (128 + signal when it was stopped)."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    stopping = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.append(signum))
    server = subprocess.Popen(command, preexec_fn=lambda: _prctl(PR_SET_PDEATHSIG, signal.SIGTERM))
    while not stopping:
        with contextlib.suppress(InterruptedError):
            readable, _, _ = select.select([fd], [], [], 0.2)
            if readable and not os.read(fd, 1):
                break  # the starter is gone: its end of the pipe closed
        if server.poll() is not None:
            stop_tree(grace)  # what the server left behind
            return server.returncode if server.returncode >= 0 else 128 - server.returncode
    stop_tree(grace)
    return 128 + signal.SIGTERM


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m jobaware.supervise", description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True, help="the reading end of the starter's pipe")
    parser.add_argument("--grace", type=float, default=GRACE_SECONDS, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    return guard(args.fd, args.grace, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
