"""The durable audit every scheduler-side act is written to: one JSON object a line, appended, flushed and synced
before anything it records is acted upon.

A line cut short by a crash (no newline at its end) is left out when the audit is read, and cut off when a daemon
opens it again: its record was never complete, so nothing followed from it. A record with an `id` is remembered,
so that a daemon restarted after a crash recognises what it has recorded already and acts on nothing twice.
One-shot writers (`jobaware card`, the card gateway) `append` without reading the file.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from jobaware.errors import InputError
from jobaware.jsonable import dumps


def stamp(record: dict) -> dict:
    """The record with who and when: the epoch time, the host and the uid of the process that writes it."""
    return {"at": time.time(), "host": socket.gethostname(), "uid": os.getuid(), **record}


def _line(record: dict) -> str:
    return dumps(record) + "\n"


def append(path: str | Path, record: dict) -> None:
    """Append one record durably (the file and its folder created when missing)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(_line(record))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise InputError(f"audit {path}: {exc.strerror or exc}") from None


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
    """An audit a daemon keeps open: it knows the ids recorded so far (`id in audit`) and appends durably."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ids: set[str] = set()
        if self.path.exists():
            for record in read_records(self.path):
                self.remember(record)
            self._drop_unfinished_line()
        self._handle = open(self.path, "a", encoding="utf-8")

    def _drop_unfinished_line(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "rb+") as handle:
                handle.truncate(data.rfind(b"\n") + 1)

    def remember(self, record: dict) -> None:
        """Note what a record says (its id); a subclass may note more."""
        if record.get("id"):
            self.ids.add(record["id"])

    def __contains__(self, record_id: str) -> bool:
        return record_id in self.ids

    def write(self, record: dict) -> None:
        try:
            self._handle.write(_line(record))
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            raise InputError(f"audit {self.path}: {exc.strerror or exc}") from None
        self.remember(record)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Audit:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
