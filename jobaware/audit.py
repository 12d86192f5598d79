"""The durable audit every scheduler-side act is written to, before anything it records is acted upon.

One interface, two places to keep it: a daemon's audit is either a JSON Lines file (`Audit`: one JSON object a
line, appended, flushed and synced) or an event stream of the site's job store (`StoreAudit`: written by every
daemon of a node, or of many nodes with Redis, at once). Both offer the same few things: `write(record)`,
`id in audit` (a record with an `id` is kept once, so a daemon restarted after a crash recognises what it has
recorded already and acts on nothing twice), `audit.has_subject(s)` (whether a record was written about `s`, as
the caller's `subject` function names it: a held job, say), and iteration over the records in the order written.

In a file, a line cut short by a crash (no newline at its end) is left out when the audit is read, and cut off
when a daemon opens it again: its record was never complete, so nothing followed from it. One-shot writers
(`jobaware card`, the card gateway) `append` without reading the file, to an audit bounded in size and rotated.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from jobaware.bodies import Limits
from jobaware.errors import InputError
from jobaware.jsonable import dumps
from jobaware.store import JobStore

Subject = Callable[[dict], "str | None"]  # what a record is about (a job), or None
MAX_LINE_BYTES = 4096  # a line of `append` (one-shot writers' audits)
MAX_FIELD_CHARS = 512  # a field of a line cut to fit


def _no_subject(record: dict) -> None:
    return None


def stamp(record: dict) -> dict:
    """The record with who and when: the epoch time, the host and the uid of the process that writes it."""
    return {"at": time.time(), "host": socket.gethostname(), "uid": os.getuid(), **record}


def _line(record: dict) -> str:
    return dumps(record) + "\n"


class AppendLimits(Limits):
    """How large the files of `append` may grow: JOBAWARE_AUDIT_MAX_BYTES a file (a line that would take it past the
    bound starts a new one) and JOBAWARE_AUDIT_BACKUPS older files kept beside it (`card.jsonl.1` the newest of
    them); with every line at most MAX_LINE_BYTES, an audit holds at most (backups + 1) x max_bytes."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_AUDIT_")
    max_bytes: int = Field(64 << 20, ge=4 * MAX_LINE_BYTES)
    backups: int = Field(5, ge=0, le=1000)


APPEND_LIMITS = AppendLimits.load()


def bounded_line(record: dict) -> bytes:
    """`record` as one JSON line of at most MAX_LINE_BYTES: a longer one keeps each of its fields to MAX_FIELD_CHARS
    (a longer field is cut and marked `cut`), and if it is still too long, only who, when and what (`action`)."""
    line = _line(record).encode()
    if len(line) <= MAX_LINE_BYTES:
        return line
    fields = {name: dumps(value) for name, value in record.items()}
    kept = {name: value if len(fields[name]) <= MAX_FIELD_CHARS else fields[name][:MAX_FIELD_CHARS] + "..."
            for name, value in record.items()}
    line = _line({**kept, "cut": True}).encode()
    if len(line) <= MAX_LINE_BYTES:
        return line
    return _line({**{name: kept[name] for name in ("at", "host", "uid", "action") if name in kept}, "cut": True}).encode()


def append(path: str | Path, record: dict, limits: AppendLimits | None = None) -> None:
    """Append one record durably (the file and its folder created when missing) to an audit that several processes
    may share (the card gateway's workers, an admin's `jobaware card`), bounded and rotated by size (`limits`, else
    `APPEND_LIMITS`); each line is bounded too (`bounded_line`).

    Not the standard library's RotatingFileHandler: each process keeps its own handle and its own view of the size
    there, so a second process goes on writing into a file another has rotated away (unbounded) or rotates it once
    more over the other's backup. Here the size check, the renames and the write are one step under an exclusive
    lock (`flock` on `<path>.lock`), and the file is opened by name for each record, so no process writes into a
    rotated file."""
    path, limits = Path(path), limits or APPEND_LIMITS
    line = bounded_line(record)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o640)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _rotate(path, len(line), limits)
            descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o640)
            try:
                os.write(descriptor, line)
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        finally:
            os.close(lock)  # the lock goes with its descriptor
    except OSError as exc:
        raise InputError(f"audit {path}: {exc.strerror or exc}") from None


def _rotate(path: Path, adding: int, limits: AppendLimits) -> None:
    """Under the lock: when `adding` bytes would take `path` past max_bytes, it becomes `path.1` (each older one moving
    up, the oldest beyond `backups` dropped) and the record starts a new file."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0 or size + adding <= limits.max_bytes:
        return
    if limits.backups == 0:
        path.unlink()
        return
    for number in range(limits.backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{number}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{number + 1}"))
    os.replace(path, path.with_name(f"{path.name}.1"))


def read_records(path: str | Path) -> Iterator[dict]:
    """The audit's records in order; an unfinished last line is left out, a bad line named (file and line)."""
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the audit ({exc.strerror or exc})") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith(b"\n"):
                return
            try:
                record = json.loads(line)
            except ValueError:
                raise InputError(f"{path} line {number}: not a JSON audit record") from None
            if not isinstance(record, dict):
                raise InputError(f"{path} line {number}: not an audit record (not a JSON object)")
            yield record


class Audit:
    """An audit file a daemon keeps open: it knows the ids (and subjects) recorded so far and appends durably."""

    def __init__(self, path: str | Path, subject: Subject = _no_subject):
        self.path = Path(path)
        self.subject = subject
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ids: set[str] = set()
        self.subjects: set[str] = set()
        if self.path.exists():
            for record in read_records(self.path):
                self._remember(record)
            self._drop_unfinished_line()
        self._handle = open(self.path, "a", encoding="utf-8")

    def _drop_unfinished_line(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "rb+") as handle:
                handle.truncate(data.rfind(b"\n") + 1)

    def _remember(self, record: dict) -> None:
        if record.get("id"):
            self.ids.add(record["id"])
        subject = self.subject(record)
        if subject is not None:
            self.subjects.add(subject)

    def __contains__(self, record_id: str) -> bool:
        return record_id in self.ids

    def has_subject(self, subject: str) -> bool:
        return subject in self.subjects

    def __iter__(self) -> Iterator[dict]:
        return read_records(self.path)

    def write(self, record: dict) -> bool:
        """Append `record` durably, unless its `id` is recorded already; True when appended."""
        if record.get("id") in self.ids:
            return False
        try:
            self._handle.write(_line(record))
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            raise InputError(f"audit {self.path}: {exc.strerror or exc}") from None
        self._remember(record)
        return True

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Audit:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class StoreAudit:
    """An audit as the job store's event stream `stream`: each record once under its `id` (committed by the store
    before the caller acts), findable by its subject. It asks the store, so it holds nothing in memory; the store
    is the caller's to close."""

    def __init__(self, store: JobStore, stream: str, subject: Subject = _no_subject):
        self.store, self.stream, self.subject = store, stream, subject

    def __contains__(self, record_id: str) -> bool:
        return self.store.has_event(self.stream, record_id)

    def has_subject(self, subject: str) -> bool:
        return self.store.has_subject(self.stream, subject)

    def __iter__(self) -> Iterator[dict]:
        return (event["record"] for event in self.store.events(self.stream))

    def write(self, record: dict) -> bool:
        """Keep `record` (it needs an `id`) unless the stream holds its id already; True when kept."""
        record = json.loads(_line(record))
        return self.store.put_event(self.stream, record["id"], record, subject=self.subject(record))

    def close(self) -> None:
        """Nothing to release: the store is the caller's."""

    def __enter__(self) -> StoreAudit:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
