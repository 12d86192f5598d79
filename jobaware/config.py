"""Runtime configuration from environment variables, with the embedded defaults."""

from __future__ import annotations

import os
from pathlib import Path


def home(create: bool = True) -> Path:
    """JOBAWARE_HOME, default `.jobaware/` in the working directory; created only when asked to."""
    path = Path(os.environ.get("JOBAWARE_HOME", ".jobaware")).resolve()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def tracking_uri(create: bool = True) -> str:
    """MLFLOW_TRACKING_URI, else a SQLite store under JOBAWARE_HOME."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{home(create) / 'mlflow.db'}"


def local_store(uri: str) -> Path | None:
    """The database file of a `sqlite:///` tracking URI, else None."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def artifact_root() -> str:
    return (home() / "artifacts").as_uri()


def logs_dir() -> Path:
    path = home() / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def service_url(key: str, keys: list[str]) -> str:
    """Where the service of capability `key` answers: JOBAWARE_<KEY>_URL, else the port `jobaware demo` gives it
    on localhost (3000 for the first registered capability, then one port per capability in registry order)."""
    return os.environ.get(f"JOBAWARE_{key.upper()}_URL") or f"http://127.0.0.1:{3000 + keys.index(key)}"


def audit_dir() -> Path:
    path = home() / "audit"
    path.mkdir(parents=True, exist_ok=True)
    return path
