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


DEPLOYMENTS = {"systemd": ("deploy", "systemd"), "k8s": ("k8s",)}  # `jobaware deploy KIND`: the folder it writes
PRIVATE = {"credentials.env"}  # a site writes its secrets there: made 0600, the others 0644


def write_deployment(kind: str, out: Path, overwrite: bool = False) -> list[Path]:
    """Write the package's deployment files of `kind` (DEPLOYMENTS) into `out`, keeping their layout, each file whole
    (written beside it and renamed); a new file is made 0644 (0600 for PRIVATE), a replaced one keeps its mode. Files
    that exist are refused, every one named, unless `overwrite`: then nothing is written."""
    from jobaware.errors import JobawareError
    from jobaware.outputs import atomic_path

    source = bundled(*DEPLOYMENTS[kind])
    files = sorted(path for path in source.rglob("*") if path.is_file() and "__pycache__" not in path.parts)
    targets = [(path, out / path.relative_to(source)) for path in files]
    existing = [str(target) for _, target in targets if target.exists() or target.is_symlink()]
    if existing and not overwrite:
        more = f" and {len(existing) - 1} more files" if len(existing) > 1 else ""
        raise JobawareError(f"{existing[0]}{more} already exist; give --overwrite to replace them")
    for path, target in targets:
        new = not (target.exists() or target.is_symlink())
        with atomic_path(target) as temporary:
            temporary.write_bytes(path.read_bytes())
        if new:
            target.chmod(0o600 if target.name in PRIVATE else 0o644)
    return [target for _, target in targets]
