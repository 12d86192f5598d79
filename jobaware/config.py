"""Runtime configuration: the site's settings file, where jobaware keeps its state, and whom it trusts with it.

Every user of a cluster can write files that a root command might read. So the home is never taken from the current
folder (a user's folder may hold a planted registry): it is JOBAWARE_HOME, else `/var/lib/jobaware` for root, else
`$XDG_DATA_HOME/jobaware` (`~/.local/share/jobaware`). A home, registry, store or spool whose folder (or a folder
above it) another user owns or may write is refused in one line (`Untrusted`).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from jobaware.errors import JobawareError

SETTINGS_FILE = "/etc/jobaware/jobaware.env"
SITE_HOME = "/var/lib/jobaware"
_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,99}")
_trusted: set[tuple[str, bool]] = set()  # folders already checked in this process


class Untrusted(JobawareError):
    """A folder or file jobaware would read or write is owned or writable by another user; nothing was opened."""


def read_settings(path: str | Path) -> dict[str, str]:
    """The `NAME=value` lines of a settings file (systemd's EnvironmentFile: `#` comments, quotes taken off); {} when
    it is absent or not readable by the caller (a user cannot read the site's credentials). A file another user may
    write is refused: its values would choose what root runs and where it writes."""
    path = Path(path)
    try:
        text = path.read_text()
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise JobawareError(f"{path}: cannot read the settings ({exc})") from None
    trusted(path, "the settings file", group_write=False)
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, equals, value = line.partition("=")
        name, value = name.strip().removeprefix("export "), value.strip()
        if not equals or not _NAME.fullmatch(name.strip()):
            raise JobawareError(f"{path}, line {number}: not a NAME=value setting")
        if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name.strip()] = value
    return values


def site_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The settings every command reads: JOBAWARE_CONFIG (default /etc/jobaware/jobaware.env), then the credentials
    file it or the environment names (JOBAWARE_CREDENTIALS, 0640 root:jobaware on a site), under `environ` (the
    process's own environment wins)."""
    environ = dict(os.environ if environ is None else environ)
    values = read_settings(environ.get("JOBAWARE_CONFIG") or SETTINGS_FILE)
    credentials = environ.get("JOBAWARE_CREDENTIALS") or values.get("JOBAWARE_CREDENTIALS")
    if credentials:
        values.update(read_settings(credentials))
    return {**values, **environ}


def load_site_settings() -> None:
    """The site's settings into this process's environment, under what it already holds (once, at a command's start)."""
    for name, value in site_settings().items():
        os.environ.setdefault(name, value)


# MLflow waits minutes on a tracking server that does not answer (7 retries with a backoff factor of 2 s: about 4 min,
# and 120 s a request). A person's command (`fail_fast`) waits seconds: these bound it, where neither the environment
# nor the site's settings set them; pipeline steps and services keep MLflow's patience (`patient`).
MLFLOW_WAITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
REACH_SECONDS = 3.0  # to connect to a tracking server, and again for its first answer
_bounded: set[str] = set()  # the MLFLOW_WAITS this process set itself
_reached: set[str] = set()  # the tracking servers that answered this process
_waits = {"bounded": False}  # whether this process is a person's command (`fail_fast`)


def fail_fast() -> None:
    """This process is a person's command: MLflow's HTTP waits bounded (MLFLOW_WAITS, where not set), and a tracking
    server is checked to answer at all (`reach`) before MLflow is asked anything."""
    _waits["bounded"] = True
    for name, value in MLFLOW_WAITS.items():
        if name not in os.environ:
            os.environ[name] = value
            _bounded.add(name)


def patient(environ: dict[str, str]) -> dict[str, str]:
    """`environ` for long work a command starts (pipeline steps, services): MLflow's own waits, where only
    `fail_fast` bounded them."""
    return {name: value for name, value in environ.items() if name not in _bounded}


def reach(uri: str, seconds: float = REACH_SECONDS) -> None:
    """In a person's command (`fail_fast`), a tracking server must answer, anything at all, within `seconds` to
    connect and as many for the answer; else a JobawareError names it and why, instead of MLflow's minutes of
    retries. Nothing but `GET /health` is sent (no credentials); a URI that is no HTTP server is left to MLflow."""
    if not _waits["bounded"] or not uri.startswith(("http://", "https://")) or uri in _reached:
        return
    import httpx

    from jobaware.text import redacted

    try:  # any answer will do: a server behind authentication, or a proxy, answers 401 or 404
        httpx.get(f"{uri.rstrip('/')}/health", timeout=seconds, verify=False, follow_redirects=False)
    except httpx.ConnectTimeout:
        why = f"no connection within {seconds:g} s"
    except httpx.ReadTimeout:
        why = f"it took the connection but gave no answer within {seconds:g} s"
    except httpx.ConnectError as exc:
        why = f"cannot connect ({str(exc)[:200]})"
    except httpx.HTTPError as exc:
        why = f"{type(exc).__name__}: {str(exc)[:200]}"
    else:
        _reached.add(uri)
        return
    raise JobawareError(f"MLflow at {redacted(uri)} (MLFLOW_TRACKING_URI) is unreachable: {why}")


def trusted(path: Path, what: str, group_write: bool = True) -> Path:
    """`path` when it and every folder above it are owned by the caller or root and writable by no one else (a
    sticky folder such as /tmp aside); group write is allowed only where `group_write` (the store and the spool are
    shared by the jobaware group; the registry and settings are not, but for root's group). Else `Untrusted`."""
    key = (str(path), group_write)
    if key in _trusted:
        return path
    me = os.geteuid()
    for index, folder in enumerate([path, *path.parents]):
        try:
            info = os.stat(folder)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise Untrusted(f"{what} {path}: cannot check {folder} ({exc.strerror})") from None
        where = f"{what} {path}" + ("" if index == 0 else f": the folder above it, {folder},")
        if info.st_uid not in (0, me):
            raise Untrusted(f"{where} is owned by {_owner(info.st_uid)}, not by you or root: refused (another user "
                            "could plant what jobaware reads there)")
        sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
        if info.st_mode & stat.S_IWOTH and not (index and sticky):
            raise Untrusted(f"{where} is writable by every user: refused (chmod o-w)")
        if index == 0 and not group_write and info.st_mode & stat.S_IWGRP and info.st_gid != 0:
            raise Untrusted(f"{where} is writable by its group: refused (chmod g-w; the group's members could "
                            "change what root and the services load)")
    _trusted.add(key)
    return path


def _owner(uid: int) -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} ({uid})"
    except KeyError:
        return f"uid {uid}"


def default_home() -> Path:
    """Root's is the site's, /var/lib/jobaware; a user's is $XDG_DATA_HOME/jobaware (~/.local/share/jobaware)."""
    if os.geteuid() == 0:
        return Path(SITE_HOME)
    data = os.environ.get("XDG_DATA_HOME", "")
    return (Path(data) if Path(data).is_absolute() else Path.home() / ".local" / "share") / "jobaware"


def home(create: bool = True) -> Path:
    """JOBAWARE_HOME, else `default_home()`; checked as trusted, created (0700) only when asked to."""
    given = os.environ.get("JOBAWARE_HOME")
    path = (Path(given).expanduser() if given else default_home()).resolve()
    if create:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return trusted(path, "JOBAWARE_HOME")


def tracking_uri(create: bool = True) -> str:
    """MLFLOW_TRACKING_URI, else a SQLite store under JOBAWARE_HOME."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{home(create) / 'mlflow.db'}"


def local_store(uri: str) -> Path | None:
    """The database file of a `sqlite:///` tracking URI, else None."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def local_registry(uri: str) -> Path | None:
    """The database file of a local (SQLite) registry, its folder checked: models are loaded from there, so no one
    but its owner (the caller or root) may write it."""
    store = local_store(uri)
    if store is not None:
        trusted(store.resolve().parent, "the model registry", group_write=False)
    return store


def artifact_root(uri: str) -> str:
    """Where a local registry keeps its models' files: `artifacts/` beside its database."""
    store = local_registry(uri)
    assert store is not None, "artifact_root is for a local (SQLite) registry"
    return (store.resolve().parent / "artifacts").as_uri()


def logs_dir() -> Path:
    path = home() / "logs"
    path.mkdir(exist_ok=True)
    return trusted(path, "the logs folder")


def service_url(key: str) -> str | None:
    """Where the service of capability `key` answers: JOBAWARE_<KEY>_URL; None when it is not set (the capability
    is not deployed here, and nothing asks it: no port is assumed, since any local user may bind one first)."""
    return os.environ.get(f"JOBAWARE_{key.upper()}_URL") or None


TOKEN_FILE_ENV = "JOBAWARE_SERVICE_TOKEN_FILE"
MIN_TOKEN_BYTES = 32


def service_token() -> bytes | None:
    """The secret the services prove themselves with (`jobaware.identity`): the file JOBAWARE_SERVICE_TOKEN_FILE
    names (a site's is /etc/jobaware/service.token, root:jobaware 0640), stripped; None when it names none. A file
    that cannot be read, that others may read or its group write, owned by neither root nor the caller, or holding
    fewer than 32 bytes is refused in one line."""
    name = os.environ.get(TOKEN_FILE_ENV)
    if not name:
        return None
    where = f"{TOKEN_FILE_ENV}={name}"
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise JobawareError(f"{where}: cannot read the service token ({exc.strerror or exc})") from None
    with os.fdopen(descriptor, "rb") as handle:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            raise JobawareError(f"{where}: not a regular file")
        if found.st_uid not in (0, os.geteuid()):
            raise JobawareError(f"{where}: owned by uid {found.st_uid}, neither root nor the caller")
        if found.st_mode & 0o027:
            raise JobawareError(f"{where}: mode {found.st_mode & 0o777:04o} lets others read it or its group write "
                                f"it; expected 0640 (chmod 0640 {name})")
        token = handle.read(4096).strip()
    if len(token) < MIN_TOKEN_BYTES:
        raise JobawareError(f"{where}: holds {len(token)} bytes, expected at least {MIN_TOKEN_BYTES} (make one: "
                            f"`openssl rand -hex 32 > {name}`)")
    return token


def make_service_token(path: Path) -> Path:
    """A new random service token in `path` (0640), unless one is there already; the path."""
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o640)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
    return path


def audit_dir() -> Path:
    path = home() / "audit"
    path.mkdir(exist_ok=True)
    return trusted(path, "the audit folder")


PIPELINE_RUN_ENV = "JOBAWARE_PIPELINE_RUN"  # the local runner names each pipeline run to its steps (tracking tags it)
