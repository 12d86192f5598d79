"""The audit: one JSON object per line, appended and synced before anything is acted upon.

Records (field `kind`):
  hold     a new hold and what was made of it: the job, hold time, code, subcode and reason, NumJobStarts and
           NumHolds, the model's answer (P(release), decision, version, what it was trained on) or why there
           was none, the site rule's call and the rule that fired, the model's call and the threshold that
           fired, the mode, the action taken or why not, and the equivalent command line;
  acted    the schedd's answer to an act (or its error), after the act;
  outcome  a later event of a job with an audited hold: released (013), terminated (005, normally or not),
           removed (009) (a re-hold is a new `hold` record);
  usage    a terminated job's use (`adapters.htcondor.usage`: CPU time, the slot's CPUs, memory and disk used,
           asked and allocated, the run's wall time), in the store's stream `htcondor.usage` (in the file, here).
Each record has an `id` (the event's job, time and byte offset in its file; `outcome:` and `acted:` in front
for those), so a follower restarted after a crash recognises what it has already recorded and never acts twice.

Where the audit lives: in the site's job store (`StoreAudit`: the event stream `htcondor.holds`, beside the
collector's and the adapter's records, written by every daemon of the node at once), or, for a follower without
a store, in a JSON Lines file (`Audit`). Both keep each record once under its id and sync it before any act.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from jobaware.errors import InputError
from jobaware.store import JobStore


STREAM = "htcondor.holds"  # the store's event stream of the follower's audit
USAGE_STREAM = "htcondor.usage"  # the store's event stream of terminated jobs' use (record kind `usage`)


def read_records(path: str | Path | JobStore) -> Iterator[dict]:
    """The audit's records (of a file, or of a job store's stream); an unfinished last line (a crash while writing)
    is left out, a bad one named."""
    if isinstance(path, JobStore):
        yield from (event["record"] for event in path.events(STREAM))
        return
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise InputError(f"{path}: cannot read the audit ({error.strerror or error})") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith(b"\n"):
                return
            try:
                record = json.loads(line)
            except ValueError:
                raise InputError(f"{path} line {number}: not a JSON audit record") from None
            if not isinstance(record, dict) or "kind" not in record:
                raise InputError(f"{path} line {number}: not an audit record (no `kind`)")
            yield record


class Audit:
    """Appends records durably; knows the ids already recorded and the jobs with audited holds."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ids: set[str] = set()
        self.jobs: set[str] = set()
        if self.path.exists():
            for record in read_records(self.path):
                self._remember(record)
            self._drop_unfinished_line()
        self._handle = open(self.path, "a")

    def _drop_unfinished_line(self) -> None:
        """A line cut by a crash is cut off (its record was never complete, so nothing followed from it)."""
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "rb+") as handle:
                handle.truncate(data.rfind(b"\n") + 1)

    def _remember(self, record: dict) -> None:
        if record.get("id"):
            self.ids.add(record["id"])
        if record["kind"] == "hold":
            self.jobs.add(record["job"])

    def __contains__(self, record_id: str) -> bool:
        return record_id in self.ids

    def write(self, record: dict) -> None:
        self._handle.write(json.dumps(record, default=str, allow_nan=False) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._remember(record)

    def close(self) -> None:
        self._handle.close()


class _Subjects:
    """`job in audit.jobs`: whether the store's stream holds a hold record of the job."""

    def __init__(self, store: JobStore):
        self.store = store

    def __contains__(self, job: str) -> bool:
        return self.store.has_subject(STREAM, job)


class StoreAudit:
    """The audit as a job store's event stream: each record once under its id (committed and synced by the store
    before the follower acts), a hold (or usage) record findable by its job. Asks the store, so it holds nothing in
    memory."""

    def __init__(self, store: JobStore, stream: str = STREAM):
        self.store, self.stream = store, stream
        self.jobs = _Subjects(store)

    def __contains__(self, record_id: str) -> bool:
        return self.store.has_event(self.stream, record_id)

    def write(self, record: dict) -> None:
        record = json.loads(json.dumps(record, default=str, allow_nan=False))
        self.store.put_event(self.stream, record["id"], record,
                             subject=record["job"] if record["kind"] in ("hold", "usage") else None)

    def close(self) -> None:
        """The store is the caller's to close."""
