"""Follow HTCondor job event logs as they grow: new whole events, in order, each read once.

A followed log is a path (the schedd's EVENT_LOG, or a user log); one not written yet (missing, or empty) is read
once it is (`unwritten` names them). The schedd rotates its event log by
renaming: with EVENT_LOG_MAX_ROTATIONS = 1 to `<log>.old`, with more to `<log>.1` (the newest) ... `<log>.N`.
A position is (file identity, byte offset): the identity is the file's device and inode plus a digest of its
first bytes, so a renamed file is found again under its new name and a file truncated in place, or a new
file that reuses an inode, is told apart. On each poll the follower finishes the file it was in (wherever it
now lies), then reads the newer rotations and the live log in order.

Only whole events are taken: a read stops after the last `...` line, so an event being written is waited for.
A rotated file whose last event stays unfinished for `settle_seconds` is given up: that tail is reported as a
bad record and the follower moves on. Events are decoded by the hold slice's reader (jobaware.hold.reader);
records it cannot read are reported (file, line, reason) and skipped.

The position is kept in a job store's checkpoint, or in a state file written atomically (a temporary file, fsync,
rename), after the caller has recorded what it did with the events read (`commit`), so a restart after a SIGKILL
reads again from the last committed position: nothing is skipped; repeats are recognised by the caller (by each
event's identity).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from jobaware.errors import InputError
from jobaware.hold.reader import EventLogReader, ReadOptions, Source
from jobaware.outputs import atomic_text

logger = logging.getLogger("jobaware.adapters.htcondor")

HEAD_BYTES = 64  # the digest of a file's first bytes, part of its identity
MAX_READ = 8 << 20  # bytes read per file per poll (a poll reads on at the next call)
_TERMINATOR = re.compile(rb"^\.\.\.\r?\n", re.MULTILINE)
_ROTATED = re.compile(r"\.(\d+)$")


@dataclass
class Event:
    """One whole event: where it was (file identity, byte offset, line), its raw text and its decoded fields."""

    file: str
    offset: int
    path: str
    line: int
    raw: bytes
    code: int
    cluster: int
    proc: int
    subproc: int
    time: object  # pandas Timestamp, the log's wall clock
    hold_code: int | None
    hold_subcode: int | None
    reason: str | None
    normal: bool | None

    @property
    def job(self) -> tuple[int, int, int]:
        return self.cluster, self.proc, self.subproc

    @property
    def identity(self) -> str:
        """The job, the event's time and its byte offset: the same under a rename and in a copy of the file
        (logrotate's copytruncate), different for any two events a schedd writes."""
        return f"{self.cluster}.{self.proc}.{self.subproc}@{self.time.isoformat(sep=' ')}#{self.offset}"


def _identity(path: Path, head_bytes: int = HEAD_BYTES) -> tuple[str, str, int] | None:
    """(`dev:inode`, digest of the first bytes, how many bytes it covers), or None when gone or still empty."""
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            head = handle.read(head_bytes)
    except FileNotFoundError:
        return None
    if not head:
        return None
    return f"{stat.st_dev}:{stat.st_ino}", hashlib.sha1(head).hexdigest()[:16], len(head)


def rotation_chain(log: Path) -> list[Path]:
    """The rotated files of `log` that exist, oldest first (`.N` ... `.2`, `.1`, `.old`), then `log` itself."""
    numbered = []
    for sibling in log.parent.glob(log.name + ".*"):
        match = _ROTATED.search(sibling.name[len(log.name):])
        if match and sibling.name == f"{log.name}.{match.group(1)}":
            numbered.append((int(match.group(1)), sibling))
    chain = [path for _, path in sorted(numbered, reverse=True)]
    old = log.with_name(log.name + ".old")
    if old.exists():
        chain.append(old)
    return chain + [log]


@dataclass
class Position:
    """Where a log was read to: the file (`dev:inode`), the digest of its first `head_len` bytes, the offset."""

    file: str | None = None
    head: str = ""
    head_len: int = 0
    offset: int = 0
    line: int = 1

    def names(self, path: Path) -> bool:
        """True when `path` is the file of this position (same inode, same first bytes)."""
        if self.file is None:
            return False
        found = _identity(path, self.head_len)
        return found is not None and (found[0], found[1]) == (self.file, self.head)

    def move_to(self, path: Path) -> bool:
        """Start at the beginning of `path`; False when it is gone or empty."""
        found = _identity(path)
        if found is None:
            return False
        self.file, self.head, self.head_len = found
        self.offset, self.line = 0, 1
        return True


class Follower:
    """New whole events of several logs. `poll()` returns them; `commit(state)` makes their positions durable."""

    def __init__(self, logs: list[str | Path], state_file: str | Path | tuple, *, year: int | None = None,
                 settle_seconds: float = 5.0):
        """`state_file`: a path, or (a job store, a checkpoint name) to keep the position in the store."""
        if not logs:
            raise InputError("no event log given to follow")
        self.logs = [Path(log) for log in logs]
        for log in self.logs:
            if not log.parent.is_dir():
                raise InputError(f"{log}: no such folder")
        self.checkpoint = state_file if isinstance(state_file, tuple) else None
        self.state_file = None if self.checkpoint else Path(state_file)
        self.options = ReadOptions(year=year)
        self.settle_seconds = settle_seconds
        self.positions = {str(log): Position() for log in self.logs}
        self.extra: dict = {}
        self.bad_records = 0
        self._load()

    def _load(self) -> None:
        if self.checkpoint:
            store, name = self.checkpoint
            state = store.checkpoint(name)
            if not state:
                return
        elif not self.state_file.exists():
            return
        origin = f"store checkpoint {self.checkpoint[1]}" if self.checkpoint else self.state_file
        try:
            if not self.checkpoint:
                state = json.loads(self.state_file.read_text())
            for log, where in state["positions"].items():
                if log in self.positions:
                    self.positions[log] = Position(where["file"], where["head"], int(where["head_len"]),
                                                   int(where["offset"]), int(where["line"]))
            self.extra = state.get("extra", {})
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(f"{origin}: not a follower state file ({error})") from None

    def commit(self, extra: dict | None = None) -> None:
        """Write the positions (and the caller's `extra`) atomically."""
        if extra is not None:
            self.extra = extra
        state = {"positions": {log: p.__dict__ for log, p in self.positions.items()}, "extra": self.extra}
        if self.checkpoint:
            store, name = self.checkpoint
            store.put_checkpoint(name, state)
            return
        with atomic_text(self.state_file) as handle:  # whole, or as it was (a full disk included)
            json.dump(state, handle)

    def unwritten(self) -> list[Path]:
        """The logs never read that are not written yet (missing, or empty): `poll` reads each once it is."""
        return [log for log in self.logs if self.positions[str(log)].file is None and _identity(log) is None]

    def poll(self) -> list[Event]:
        """The whole events written since the last poll, log by log, each log in its order."""
        events: list[Event] = []
        for log in self.logs:
            events += self._poll_log(log, self.positions[str(log)])
        return events

    def _poll_log(self, log: Path, at: Position) -> list[Event]:
        chain = rotation_chain(log)
        mine = [i for i, path in enumerate(chain) if at.names(path)]
        if mine:
            start = mine[-1]
        elif at.file is None:  # first start: the live log from its beginning
            start = len(chain) - 1
            if not at.move_to(chain[start]):
                return []
        else:
            logger.warning("%s: the file read last is gone or was rewritten; reading from the oldest file there", log)
            start = 0
            at.file = None
        events: list[Event] = []
        for index in range(start, len(chain)):
            path = chain[index]
            if not at.names(path) and not at.move_to(path):
                continue
            if not self._read(path, at, events, newest=index == len(chain) - 1):
                break
        return events

    def _read(self, path: Path, at: Position, events: list[Event], newest: bool) -> bool:
        """Read `path` from the position on; True when a rotated file is done (the caller moves on)."""
        try:
            handle = open(path, "rb")
        except FileNotFoundError:
            return True
        with handle:
            stat = os.fstat(handle.fileno())
            if stat.st_size < at.offset:  # truncated in place below the position (the head still matches)
                logger.warning("%s: truncated below the position read; reading it from its start", path)
                at.offset, at.line = 0, 1
            handle.seek(at.offset)
            data = handle.read(MAX_READ)
        matches = list(_TERMINATOR.finditer(data))
        whole = matches[-1].end() if matches else 0
        if whole:
            self._decode(data[:whole], path, at, events)
        tail = data[whole:]
        if newest or not tail.strip():
            return not newest and len(data) < MAX_READ
        if len(data) >= MAX_READ and whole:
            return False  # more to read in this rotated file
        if time.time() - stat.st_mtime < self.settle_seconds:
            return False  # the rotated file's last event may still be finished: wait
        self.bad_records += 1
        logger.warning("%s line %d: an unfinished event at the end of a rotated file; skipped", path, at.line)
        at.offset += len(tail)
        at.line += tail.count(b"\n")
        return True

    def _decode(self, chunk: bytes, path: Path, at: Position, events: list[Event]) -> None:
        """Decode a run of whole events with the slice's reader and advance the position past it."""
        line_starts = [0] + [m.end() for m in re.finditer(rb"\n", chunk)]
        terminators = [m.end() for m in _TERMINATOR.finditer(chunk)]

        def bad(record) -> None:
            self.bad_records += 1
            logger.warning("%s line %d: %s; skipped", path, at.line + record.line - 1, record.reason)

        reader = EventLogReader([Source.text(chunk, str(path))], self.options, on_bad=bad)
        for batch in reader.batches():
            rows = batch.to_pydict()
            for i in range(batch.num_rows):
                line = rows["line"][i]
                start = line_starts[line - 1]
                end = terminators[bisect.bisect_right(terminators, start)]
                time_ = rows["time"][i]
                events.append(Event(
                    file=f"{at.file}:{at.head}", offset=at.offset + start, path=str(path), line=at.line + line - 1,
                    raw=chunk[start:end],
                    code=rows["event_code"][i], cluster=rows["cluster"][i], proc=rows["proc"][i],
                    subproc=rows["subproc"][i], time=time_, hold_code=rows["code"][i],
                    hold_subcode=rows["subcode"][i], reason=rows["reason"][i], normal=rows["terminated_normally"][i]))
        at.offset += len(chunk)
        at.line += chunk.count(b"\n")
