"""Writing what a command produces: all or nothing, and `-` for standard output.

A file is written to a temporary file in its own folder, flushed to disk and renamed over the target only
when the writer finished; a refused or failed command leaves an existing file as it was.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from jobaware.errors import InputError

STDOUT = "-"


def is_stdout(path: str | Path) -> bool:
    return str(path) == STDOUT


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """A temporary path beside `path` for a writer that takes a path; renamed to `path` when the block ends
    without an exception, removed otherwise."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{target.parent}: cannot create the folder ({exc.strerror or exc})") from None
    if target.is_dir():
        raise InputError(f"{target}: is a folder; give a file name")
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o7777)
        else:
            os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_text(path: str | Path) -> Iterator[IO[str]]:
    """A text handle that becomes `path` when the block ends without an exception; `-` is standard output."""
    if is_stdout(path):
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_path(path) as temporary, open(temporary, "w") as handle:
        yield handle


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def staged(path: str | Path) -> Iterator[Path]:
    """For writers that make `path` and files beside it (a ground-truth file, a quarantine): a path of the
    same name inside a fresh temporary folder beside `path`. When the block ends without an exception,
    everything written there is flushed and moved beside `path` (replacing what was there); the temporary
    folder is removed in any case."""
    target = Path(path)
    if is_stdout(target):
        raise InputError("-: this command writes files; give a path")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{target.parent}: cannot create the folder ({exc.strerror or exc})") from None
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield staging / target.name
        for written in staging.rglob("*"):
            if written.is_file():
                with open(written, "rb+") as handle:
                    os.fsync(handle.fileno())
        for entry in sorted(staging.iterdir()):
            destination = target.parent / entry.name
            if destination.is_dir() and not destination.is_symlink():
                shutil.rmtree(destination)
            os.replace(entry, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
