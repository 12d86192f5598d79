"""Root's commands open nothing a user planted: no home from the current folder, and a home, registry, store or
settings file that another user owns or may write is refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def _as_root(*args: str, cwd: Path, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "HOME": "/root", "JOBAWARE_CONFIG": "/nonexistent/jobaware.env"}
    return subprocess.run([JOBAWARE, *args], cwd=cwd, env={**base, **env}, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def planted(local_user) -> Path:
    """A user's folder holding a `.jobaware/` as the old default home would have found it: its registry a FIFO (a
    read would block), its logs a link to a root-only file, a pickle that leaves a marker when loaded."""
    import secrets

    folder = local_user.home / f"project-{secrets.token_hex(4)}"
    script = (f"mkdir -p {folder}/.jobaware/artifacts && mkfifo {folder}/.jobaware/mlflow.db && "
              f"ln -s /etc/shadow {folder}/.jobaware/logs && echo 'job_id,user' > {folder}/jobs.csv")
    local_user.run("sh", "-c", script)
    return folder


def test_a_root_command_in_a_user_s_folder_opens_nothing_planted_there(planted, tmp_path):
    site = tmp_path / "site-home"
    settings = tmp_path / "jobaware.env"
    settings.write_text(f"JOBAWARE_HOME={site}\n")
    shadow = Path("/etc/shadow").read_bytes()
    for command in (["models", "list"], ["predict", "failure", "--input", "jobs.csv", "--output", str(tmp_path / "o")],
                    ["report", "live"]):
        done = _as_root(*command, cwd=planted, env={"JOBAWARE_CONFIG": str(settings)})  # a FIFO read would hang here
        assert ".jobaware" not in done.stdout + done.stderr, done.stderr
    assert Path("/etc/shadow").read_bytes() == shadow
    assert not (site / "logs").is_symlink()


def test_root_s_default_home_is_the_site_s_not_the_current_folder(planted):
    done = _as_root("models", "list", cwd=planted, env={})
    assert "/var/lib/jobaware" in done.stderr and ".jobaware" not in done.stderr.replace("/var/lib/jobaware", "")


def test_a_home_another_user_owns_is_refused_in_one_line(planted):
    done = _as_root("models", "list", cwd="/", env={"JOBAWARE_HOME": str(planted / ".jobaware")})
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert "JOBAWARE_HOME" in done.stderr and "not by you or root: refused" in done.stderr


def test_a_store_another_user_owns_is_refused(local_user, tmp_path):
    from jobaware.store import open_store

    open_store(str(tmp_path / "mine")).close()
    local_user.run("mkdir", "-p", str(local_user.home / "store"))
    done = _as_root("store", "copy", "--input", str(tmp_path / "mine"), "--output", str(local_user.home / "store"),
                    cwd="/", env={"JOBAWARE_HOME": str(tmp_path)})
    assert done.returncode == 1 and "the job store" in done.stderr and "refused" in done.stderr, done.stderr


@pytest.mark.parametrize("mode, says", [(0o666, "writable by every user"), (0o664, "writable by its group")])
def test_a_settings_file_others_may_write_is_refused(tmp_path, mode, says):
    settings = tmp_path / "jobaware.env"
    settings.write_text(f"JOBAWARE_HOME={tmp_path}\n")
    settings.chmod(mode)
    import os

    os.chown(settings, 0, 100)  # a group other than root's
    done = _as_root("models", "list", cwd="/", env={"JOBAWARE_CONFIG": str(settings)})
    assert done.returncode == 1 and says in done.stderr, done.stderr


def test_a_registry_its_group_may_write_is_refused(tmp_path):
    import os

    registry = tmp_path / "registry"
    registry.mkdir()
    registry.chmod(0o775)
    os.chown(registry, 0, 100)
    done = _as_root("models", "list", cwd="/", env={"JOBAWARE_HOME": str(tmp_path),
                                                    "MLFLOW_TRACKING_URI": f"sqlite:///{registry}/mlflow.db"})
    assert done.returncode == 1 and "the model registry" in done.stderr and "group" in done.stderr, done.stderr
