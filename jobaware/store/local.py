"""The folder store: one append-only log of changes, each fsynced (or a batch of them at once), replayed into memory.

The embedded store before SQLite, kept so that a site can read its old store and move it (`jobaware store copy`),
and as the reference the others are measured against. Opening replays the log; a line cut short by a crash (no
newline) is not a change and is cut off by the next writer. One writer at a time (an exclusive lock on the folder,
freed when the process dies); any number of readers. Everything it holds is in memory.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jobaware.errors import JobawareError
from jobaware.store.base import RECORD_PARTS, JobKey, JobStore, empty_record, in_window, now, order

LOG = "jobs.log"
LOCK = "writer.lock"


def _plain(value):
    """`value` as it reads back from JSON (the same values every backend returns)."""
    return json.loads(json.dumps(value))


class LocalStore(JobStore):
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.path = self.folder / LOG
        self.jobs: dict[JobKey, dict] = {}
        self.preds: dict[JobKey, dict[str, dict]] = {}
        self.checkpoints_: dict[str, dict] = {}
        self.streams_: dict[str, dict[str, tuple[str | None, dict]]] = {}
        self.handle = None
        self.lock = None
        self.batching = self.unsynced = False
        if self.path.exists():
            self._replay(self.path.read_bytes())

    def _replay(self, data: bytes) -> None:
        complete = data[: data.rfind(b"\n") + 1]
        for number, line in enumerate(complete.splitlines(), start=1):
            try:
                self._apply(json.loads(line))
            except (ValueError, KeyError, TypeError, IndexError):
                raise JobawareError(f"{self.path}, line {number}: not a job store change") from None

    def _apply(self, change: list) -> None:
        kind, target, *args = change
        if kind == "ckpt":
            self.checkpoints_[target] = args[0]
            return
        if kind == "event":
            event_id, subject, record = args
            self.streams_.setdefault(target, {}).setdefault(event_id, (subject, record))
            return
        key = JobKey.parse(target)
        if kind == "pred":
            self.preds.setdefault(key, {})[args[0]] = args[1]
            return
        if kind == "record":  # a log written before `usage` has records without it
            self.jobs[key] = {**empty_record(key), **{k: args[0][k] for k in RECORD_PARTS if k in args[0]}}
            return
        record = self.jobs.setdefault(key, empty_record(key))
        if kind == "job":
            record["row"] = args[0]
        elif kind == "state":
            record["states"].append({"state": args[0], "time": args[1]})
        elif kind == "script":
            record["script"] = args[0]
        elif kind == "final":
            record["final"] = args[0]
        elif kind == "usage":
            record["usage"] = args[0]
        else:
            raise KeyError(kind)

    def _write(self, *change) -> None:
        """Append one change to the log (fsynced), then apply it."""
        change = _plain(list(change))
        if self.handle is None:
            self._open_for_writing()
        self.handle.write(json.dumps(change, separators=(",", ":")).encode() + b"\n")
        self.handle.flush()  # in the kernel: a killed process loses nothing written
        if self.batching:
            self.unsynced = True
        else:
            os.fsync(self.handle.fileno())
        self._apply(change)

    def _sync(self) -> None:
        if self.unsynced:
            os.fsync(self.handle.fileno())
            self.unsynced = False

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One fsync for the changes made inside, when it ends (a crash of the machine loses at most those)."""
        self.batching = True
        try:
            yield
        finally:
            self.batching = False
            self._sync()

    def _open_for_writing(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = open(self.folder / LOCK, "a")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock.close()
            self.lock = None
            raise JobawareError(f"store {self.folder}: another process is writing to it (a folder store has one "
                                "writer; move it to SQLite with `jobaware store copy`)") from None
        handle = open(self.path, "ab+")
        handle.seek(0)
        data = handle.read()
        if data and not data.endswith(b"\n"):  # a change cut short by a crash: never applied, cut off
            handle.truncate(data.rfind(b"\n") + 1)
        # changes another writer made after this store was opened
        self.jobs, self.preds, self.checkpoints_, self.streams_ = {}, {}, {}, {}
        self._replay(data)
        handle.seek(0, os.SEEK_END)
        self.handle = handle
        dir_fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # ------------------------------------------------------------------ jobs
    def put_job(self, key: JobKey, row: dict) -> None:
        record = self.jobs.get(key)
        if record is None or record["row"] != _plain(row):
            self._write("job", key.text(), row)

    def add_state(self, key: JobKey, state: str, at: float | None = None) -> bool:
        record = self.jobs.get(key)
        if record and record["states"] and record["states"][-1]["state"] == state:
            return False
        self._write("state", key.text(), state, now() if at is None else at)
        return True

    def put_script(self, key: JobKey, script: str) -> None:
        record = self.jobs.get(key)
        if record is None or record["script"] is None:
            self._write("script", key.text(), script)

    def _write_final(self, key: JobKey, final: dict, unless: dict | None) -> bool:
        self._write("final", key.text(), final)  # one writer: nothing changed it meanwhile
        return True

    def put_usage(self, key: JobKey, usage: dict) -> None:
        record = self.jobs.get(key)
        if record is None or record["usage"] != _plain(usage):
            self._write("usage", key.text(), usage)

    def put_record(self, record: dict) -> None:
        key = JobKey(record["cluster"], record["job_id"], record["submit_time"])
        parts = {k: record.get(k) for k in RECORD_PARTS}
        if self.get(key) != {**empty_record(key), **_plain(parts)}:
            self._write("record", key.text(), parts)

    def get(self, key: JobKey) -> dict | None:
        record = self.jobs.get(key)
        return _plain(record) if record is not None else None

    def keys(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> list[JobKey]:
        return sorted((k for k in self.jobs if in_window(k, cluster, since, until)), key=order)

    def records(self, cluster: str | None = None, since: float | None = None, until: float | None = None, *,
                newest_first: bool = False, predictions: str | None = None) -> Iterator[dict]:
        keys = self.keys(cluster, since, until)
        for key in reversed(keys) if newest_first else keys:
            record = self.get(key)
            if predictions is not None:
                record["predictions"] = {n: a for n, a in self.predictions(key).items() if n.startswith(predictions)}
            yield record

    def count(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> int:
        return sum(in_window(k, cluster, since, until) for k in self.jobs)

    def open_keys(self, cluster: str) -> list[JobKey]:
        return [k for k in self.keys(cluster) if self.jobs[k]["final"] is None]

    # ------------------------------------------------------------------ predictions
    def put_prediction(self, key: JobKey, model_version: str, answer: dict) -> None:
        if self.preds.get(key, {}).get(model_version) != _plain(answer):
            self._write("pred", key.text(), model_version, answer)

    def predictions(self, key: JobKey) -> dict[str, dict]:
        return _plain(dict(sorted(self.preds.get(key, {}).items())))

    def predictions_by_name(self, prefix: str = "", cluster: str | None = None, since: float | None = None,
                            until: float | None = None) -> Iterator[tuple[JobKey, str, dict]]:
        for key in sorted((k for k in self.preds if in_window(k, cluster, since, until)), key=order):
            for name, answer in self.predictions(key).items():
                if name.startswith(prefix):
                    yield key, name, answer

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, cluster: str) -> dict:
        return _plain(self.checkpoints_.get(cluster, {}))

    def put_checkpoint(self, cluster: str, checkpoint: dict) -> None:
        if self.checkpoints_.get(cluster) != _plain(checkpoint):
            self._sync()  # what the checkpoint covers is on disk before the checkpoint is
            batching, self.batching = self.batching, False
            try:
                self._write("ckpt", cluster, checkpoint)
            finally:
                self.batching = batching

    def checkpoints(self) -> dict[str, dict]:
        return _plain(dict(sorted(self.checkpoints_.items())))

    # ------------------------------------------------------------------ event streams
    def put_event(self, stream: str, event_id: str, record: dict, subject: str | None = None) -> bool:
        if event_id in self.streams_.get(stream, {}):
            return False
        self._write("event", stream, event_id, subject, record)
        return True

    def has_event(self, stream: str, event_id: str) -> bool:
        return event_id in self.streams_.get(stream, {})

    def has_subject(self, stream: str, subject: str) -> bool:
        return any(s == subject for s, _ in self.streams_.get(stream, {}).values())

    def events(self, stream: str) -> Iterator[dict]:
        for event_id, (subject, record) in list(self.streams_.get(stream, {}).items()):
            yield {"id": event_id, "subject": subject, "record": _plain(record)}

    def streams(self) -> list[str]:
        return sorted(name for name, held in self.streams_.items() if held)

    def close(self) -> None:
        for handle in (self.handle, self.lock):
            if handle is not None:
                handle.close()
        self.handle = self.lock = None
