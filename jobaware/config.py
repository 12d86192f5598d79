"""Runtime configuration from environment variables, with the embedded defaults."""

from __future__ import annotations

import os
from pathlib import Path

CAPABILITIES = ("failure",)


def home() -> Path:
    """JOBAWARE_HOME, default `.jobaware/` in the working directory."""
    path = Path(os.environ.get("JOBAWARE_HOME", ".jobaware")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI, else a SQLite store under JOBAWARE_HOME."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{home() / 'mlflow.db'}"


def artifact_root() -> str:
    return (home() / "artifacts").as_uri()


def experiment_name(key: str) -> str:
    return f"jobaware-{key}"


def model_name(key: str) -> str:
    return f"jobaware-{key}"
