"""Move a site's store between backends (folder log, SQLite, Redis) losing nothing: every record (row, state
changes, script, final state with its source, exit code and signal), every prediction, checkpoint and event.

Whole records are written, so copying again gives the same store: an interrupted copy is finished by running it
again into the same destination.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jobaware.store.base import JobStore


@dataclass
class Copied:
    jobs: int = 0
    predictions: int = 0
    checkpoints: int = 0
    events: int = 0

    def items(self) -> int:
        return self.jobs + self.predictions + self.checkpoints + self.events


def is_empty(store: JobStore) -> bool:
    """Whether the store holds nothing at all."""
    return (store.count() == 0 and next(store.predictions_by_name(), None) is None and not store.checkpoints()
            and not store.streams())


def copy(source: JobStore, destination: JobStore, advance: Callable[[int], None] = lambda n: None,
         copied: Copied | None = None) -> Copied:
    """Everything `source` holds, into `destination` (a job there is replaced whole); `advance(n)` after each n
    items written. `copied` counts them as they go (a copy that stops half-way has said how far it got)."""
    copied = copied if copied is not None else Copied()
    with destination.batch():
        for record in source.records():
            destination.put_record(record)
            copied.jobs += 1
            advance(1)
        for key, name, answer in source.predictions_by_name():
            destination.put_prediction(key, name, answer)
            copied.predictions += 1
            advance(1)
        for name, checkpoint in source.checkpoints().items():
            destination.put_checkpoint(name, checkpoint)
            copied.checkpoints += 1
            advance(1)
        for stream in source.streams():
            for event in source.events(stream):
                destination.put_event(stream, event["id"], event["record"], event["subject"])
                copied.events += 1
                advance(1)
    return copied
