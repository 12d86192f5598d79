"""Writing what a command produces: all or nothing, never destroying, and `-` for standard output.

A file is written to a temporary file in its own folder, flushed to disk and renamed over the target only
when the writer finished; a refused or failed command leaves an existing file as it was, and removes the
folders it created for the output. No folder is ever removed or replaced: a command that writes a folder
adds its files to it.
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

from jobaware.errors import InputError, JobawareError

STDOUT = "-"


def is_stdout(path: str | Path) -> bool:
    return str(path) == STDOUT


@contextlib.contextmanager
def parents(path: Path) -> Iterator[None]:
    """The folders above `path` made where missing; those made here are removed again (when still empty) if the
    block raises."""
    missing = []
    for parent in path.absolute().parents:
        if parent.exists():
            break
        missing.append(parent)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path.parent}: cannot create the folder ({exc.strerror or exc})") from None
    try:
        yield
    except BaseException:
        for folder in missing:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """A temporary path beside `path` for a writer that takes a path; renamed to `path` when the block ends
    without an exception, removed otherwise. A folder at `path` is refused, never replaced."""
    target = Path(path)
    if target.is_dir():
        raise InputError(f"{target}: is a folder; give a file name")
    with parents(target):
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
        os.close(fd)
        temporary = Path(name)
        try:
            with _named(target, temporary):
                yield temporary
                with open(temporary, "rb+") as handle:
                    os.fsync(handle.fileno())
            if target.is_file() and not target.is_symlink():  # a link is replaced, never followed
                os.chmod(temporary, target.stat().st_mode & 0o7777)
            else:
                os.chmod(temporary, 0o666 & ~_umask())
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def _named(target: Path, temporary: Path) -> Iterator[None]:
    """An OSError of writing `temporary` (a full disk, a quota: no file named, or the temporary one) as a one-line
    error naming `target`, the file it was for."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None and not str(exc.filename).startswith(str(temporary)):
            raise
        raise JobawareError(f"{target}: cannot be written ({exc.strerror or exc}); nothing was left of it") from None


@contextlib.contextmanager
def new_folder(path: str | Path) -> Iterator[Path]:
    """For a writer that makes a whole folder (a new job store): a fresh temporary folder beside `path`, renamed to
    `path` when the block ends without an exception; removed with everything in it otherwise (a full disk
    included), so that `path` is whole or absent. `path` must not exist yet."""
    target = Path(path)
    if target.exists() or target.is_symlink():
        raise InputError(f"{target}: exists; a new folder is made only where none is")
    with parents(target):
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            os.chmod(staging, 0o777 & ~_umask())  # as mkdir would make it
            yield staging
            try:
                os.rename(staging, target)  # onto nothing (or a folder made empty meanwhile): never a file or a store
            except OSError as exc:
                raise JobawareError(f"{target}: cannot be made ({exc.strerror or exc}); nothing was left of it"
                                    ) from None
            _sync_folder(target.parent)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _sync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


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
def staged(path: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """For writers that make `path` (a file or a folder) and files beside it (a ground-truth file, a quarantine): a
    path of the same name inside a fresh temporary folder beside `path`. When the block ends without an exception,
    everything written there is flushed and moved beside `path`: a new name as it is; onto an existing file only
    with `overwrite`; onto an existing folder file by file (the same rule for each; nothing in it is removed). When
    anything would be refused, nothing is moved. The temporary folder, and the folders made for it, go in any
    case."""
    target = Path(path)
    if is_stdout(target):
        raise InputError("-: this command writes files; give a path")
    with parents(target):
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            with _named(target, staging):
                yield staging / target.name
            moves = [move for entry in sorted(staging.iterdir()) for move in _moves(entry, target.parent / entry.name)]
            for source, destination in moves:
                if destination.is_dir() and not source.is_dir():
                    raise InputError(f"{destination}: a folder is there; it is never replaced")
                if source.is_dir() and destination.exists():
                    raise InputError(f"{destination}: a file is there, where a folder goes")
                if (destination.exists() or destination.is_symlink()) and not overwrite:
                    raise InputError(f"{destination}: exists; give --overwrite to replace it")
            with _named(target, staging):
                for written in staging.rglob("*"):
                    if written.is_file():
                        with open(written, "rb+") as handle:
                            os.fsync(handle.fileno())
            for source, destination in moves:
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(source, destination)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _moves(source: Path, destination: Path) -> list[tuple[Path, Path]]:
    """What moving `source` to `destination` takes: itself, or, onto an existing folder, each of its entries."""
    if source.is_dir() and destination.is_dir() and not destination.is_symlink():
        return [move for entry in sorted(source.iterdir()) for move in _moves(entry, destination / entry.name)]
    return [(source, destination)]
