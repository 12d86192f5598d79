"""The package's own files: the bundled real data, the data contracts, the deployment files (systemd, Kubernetes),
the plugins' sources. They are package data, found through `importlib.resources`, never through a checkout, so an
installed wheel has what the main job needs."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def bundled(*parts: str) -> Path:
    """The path of a file or folder the package carries (`bundled("data", "real", "swf")`); jobaware installs as
    files, never zipped, so it is a real path."""
    return Path(str(files("jobaware").joinpath(*parts)))
