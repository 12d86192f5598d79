"""The attacker of `tests/security/`: a throwaway unprivileged user of this machine (`useradd`), who acts through
`runuser`, as an ordinary user of a cluster would, and is removed with everything it started."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class LocalUser:
    name: str
    uid: int
    gid: int
    home: Path  # theirs alone (0700), inside a folder every user may pass through

    def run(self, *command: str, timeout: float = 60, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        """`command` run as this user, with a clean environment (their HOME, a plain PATH)."""
        env = {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name,
               "PATH": "/usr/local/bin:/usr/bin:/bin", **kwargs.pop("env", {})}
        return subprocess.run([shutil.which("runuser") or "/usr/sbin/runuser", "-u", self.name, "--", *command], env=env, cwd=kwargs.pop("cwd", self.home),
                              capture_output=True, text=True, timeout=timeout, check=check, **kwargs)


def _require_root() -> None:
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None:
        reason = "the attacks need root to create a throwaway user (useradd, runuser)"
        if os.environ.get("JOBAWARE_REQUIRE_SLURM"):  # CI runs as root: there it must not be skipped
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def open_folder() -> Path:
    """A folder every user of the machine may pass through (pytest's own temporary folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="jobaware-security-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def local_user(open_folder) -> LocalUser:
    """A throwaway unprivileged user with a home of its own; removed, with its processes, after the session."""
    _require_root()
    name = "jasec" + secrets.token_hex(3)
    home = open_folder / name
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", "--home-dir", str(home),
                    name], check=True, capture_output=True)
    try:
        home.mkdir(mode=0o700)
        import pwd

        entry = pwd.getpwnam(name)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        yield LocalUser(name, entry.pw_uid, entry.pw_gid, home)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        subprocess.run(["userdel", name], capture_output=True)
