"""The hold adapter's audit (`jobaware.audit`: written and synced before anything is acted upon, each record once
under its id), where it is kept, and the records it holds.

Records (field `kind`):
  hold     a new hold and what was made of it: the job, hold time, code, subcode and reason, NumJobStarts and
           NumHolds, the model's answer (P(release), decision, version, what it was trained on) or why there
           was none, the site rule's call and the rule that fired, the model's call and the threshold that
           fired, the mode, the action taken or why not, and the equivalent command line;
  acted    the schedd's answer to an act (or its error), after the act;
  outcome  a later event of a job with an audited hold: released (013), terminated (005, normally or not),
           removed (009) (a re-hold is a new `hold` record);
  usage    a terminated job's use (`jobaware.adapters.htcondor.usage`: CPU time, the slot's CPUs, memory and disk used,
           asked and allocated, the run's wall time), in the store's stream `htcondor.usage` (in the file, here).
Each record has an `id` (the event's job, time and byte offset in its file; `outcome:` and `acted:` in front
for those), so a follower restarted after a crash recognises what it has already recorded and never acts twice.
A hold record's subject is its job, so a later event of the job is known for an outcome (`has_subject`).

Where the audit lives: in the site's job store (the event stream `htcondor.holds`, beside the collector's and the
Slurm adapter's records, written by every daemon of the node at once), or, for a follower without a store, in a
JSON Lines file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from jobaware.audit import Audit, StoreAudit, read_records
from jobaware.errors import InputError
from jobaware.store import JobStore

STREAM = "htcondor.holds"  # the store's event stream of the follower's audit
USAGE_STREAM = "htcondor.usage"  # the store's event stream of terminated jobs' use (record kind `usage`)


def held_job(record: dict) -> str | None:
    """The job a hold record is about (None for the other records)."""
    return record.get("job") if record.get("kind") == "hold" else None


def used_job(record: dict) -> str | None:
    """The job a usage record is about (None for the other records)."""
    return record.get("job") if record.get("kind") == "usage" else None


def usage_audit(place: Audit | JobStore) -> Audit | StoreAudit:
    """Where the follower keeps terminated jobs' use: the store's stream `htcondor.usage`, or beside the holds in
    the audit file (the open `Audit` given)."""
    return StoreAudit(place, USAGE_STREAM, subject=used_job) if isinstance(place, JobStore) else place


def hold_audit(place: str | Path | JobStore) -> Audit | StoreAudit:
    """The hold adapter's audit, kept open: the store's stream when given a job store, else a JSON Lines file."""
    if isinstance(place, JobStore):
        return StoreAudit(place, STREAM, subject=held_job)
    return Audit(place, subject=held_job)


def hold_records(place: str | Path | JobStore) -> Iterator[dict]:
    """The records of an audit (a file, or a job store's stream), for reading only; a record without `kind` named."""
    in_store = isinstance(place, JobStore)
    records = iter(StoreAudit(place, STREAM)) if in_store else read_records(place)
    for number, record in enumerate(records, 1):
        if "kind" not in record:
            raise InputError(f"{STREAM if in_store else place} {'event' if in_store else 'line'} {number}: "
                             "not a hold audit record (no `kind`)")
        yield record
