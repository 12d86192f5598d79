"""The job store's interface and the rules every backend shares (which final state wins, what a record holds)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

# Where a final state came from, weakest first: a later, stronger source replaces an earlier one, never the reverse.
FINAL_SOURCES = ("observed", "scontrol", "sacct")


class JobKey(NamedTuple):
    """A job, once: Slurm reuses job ids (after a reset or a wrap), never with the same submit time."""

    cluster: str
    job_id: int
    submit_time: int  # epoch seconds, as Slurm reports it

    def text(self) -> str:
        return f"{self.cluster}:{self.job_id}:{self.submit_time}"

    @classmethod
    def parse(cls, text: str) -> JobKey:
        cluster, job_id, submit = text.rsplit(":", 2)
        return cls(cluster, int(job_id), int(submit))


def order(key: JobKey) -> tuple:
    """The order of every listing: submit time, then cluster, then job id."""
    return key.submit_time, key.cluster, key.job_id


def empty_record(key: JobKey) -> dict:
    return {"cluster": key.cluster, "job_id": key.job_id, "submit_time": key.submit_time, "row": {},
            "states": [], "script": None, "final": None, "usage": None}


RECORD_PARTS = ("row", "states", "script", "final", "usage")  # what a record holds beside its key


def in_window(key: JobKey, cluster: str | None, since: float | None, until: float | None) -> bool:
    """Whether `key` is of `cluster` (any when None) and was submitted in [since, until)."""
    return ((cluster is None or key.cluster == cluster) and (since is None or key.submit_time >= since)
            and (until is None or key.submit_time < until))


class JobStore(ABC):
    """Job records, state changes, scripts, final states, use, predictions, outcomes, checkpoints and event streams.

    Every write is idempotent: replaying the same calls leaves the same records (a collector restarted after a
    crash repeats its last interval). Listings are bounded by what they are asked for: a submit-time window, a
    cluster's open jobs, predictions by name; none of them needs the whole store in memory."""

    # ------------------------------------------------------------------ jobs
    @abstractmethod
    def put_job(self, key: JobKey, row: dict) -> None:
        """Set the job's canonical row (the latest observation of its fields)."""

    @abstractmethod
    def add_state(self, key: JobKey, state: str, at: float | None = None) -> bool:
        """Append a state change, unless the job's last state already is `state`. True when appended."""

    @abstractmethod
    def put_script(self, key: JobKey, script: str) -> None:
        """Keep the job's batch script (the first one given)."""

    @abstractmethod
    def _write_final(self, key: JobKey, final: dict, unless: dict | None) -> bool:
        """Write `final` unless the record's final state changed from `unless` meanwhile; True when written."""

    @abstractmethod
    def put_usage(self, key: JobKey, usage: dict) -> None:
        """Keep what accounting says of the finished job's use (`jobaware.usage.measures`: elapsed, limit, CPUs, CPU
        time, memory asked and used, nodes, ...); the latest given replaces an earlier one."""

    @abstractmethod
    def put_record(self, record: dict) -> None:
        """Set a whole record as `get` returns it (row, states, script, final, usage): what `store copy` writes."""

    @abstractmethod
    def get(self, key: JobKey) -> dict | None:
        """The job's record, or None."""

    @abstractmethod
    def keys(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> list[JobKey]:
        """The keys of the jobs of `cluster` (every cluster when None) submitted in [since, until), in `order`."""

    @abstractmethod
    def records(self, cluster: str | None = None, since: float | None = None, until: float | None = None, *,
                newest_first: bool = False, predictions: str | None = None) -> Iterator[dict]:
        """The records of `keys(cluster, since, until)`, read a page at a time (oldest first, or newest first).
        With `predictions` (a name prefix; "" for all) each record also holds `predictions`: name -> answer of
        the job's predictions whose name starts with it."""

    @abstractmethod
    def count(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> int:
        """How many jobs `keys(cluster, since, until)` lists."""

    @abstractmethod
    def open_keys(self, cluster: str) -> list[JobKey]:
        """The jobs of `cluster` without a final state yet, in `order`."""

    # ------------------------------------------------------------------ predictions
    @abstractmethod
    def put_prediction(self, key: JobKey, model_version: str, answer: dict) -> None:
        """Keep a model version's answer for the job (one per name: the latest given)."""

    @abstractmethod
    def predictions(self, key: JobKey) -> dict[str, dict]:
        """Name (model version) -> answer, for the job, by name."""

    @abstractmethod
    def predictions_by_name(self, prefix: str = "", cluster: str | None = None, since: float | None = None,
                            until: float | None = None) -> Iterator[tuple[JobKey, str, dict]]:
        """(key, name, answer) of every prediction whose name starts with `prefix`, for the jobs in the window,
        in key `order` then name (a job needs no record to hold predictions)."""

    # ------------------------------------------------------------------ checkpoints
    @abstractmethod
    def checkpoint(self, cluster: str) -> dict:
        """The checkpoint named `cluster` ({} before the first): a collector's, a follower's position."""

    @abstractmethod
    def put_checkpoint(self, cluster: str, checkpoint: dict) -> None: ...

    @abstractmethod
    def checkpoints(self) -> dict[str, dict]:
        """Every checkpoint, by name."""

    # ------------------------------------------------------------------ event streams (audits)
    @abstractmethod
    def put_event(self, stream: str, event_id: str, record: dict, subject: str | None = None) -> bool:
        """Append `record` to `stream` under `event_id` unless the stream holds that id already (True when
        appended): an audit a restarted daemon writes again holds each event once. `subject` (a job, say) can be
        asked for with `has_subject`."""

    @abstractmethod
    def has_event(self, stream: str, event_id: str) -> bool: ...

    @abstractmethod
    def has_subject(self, stream: str, subject: str) -> bool:
        """Whether any event of `stream` was put with this subject."""

    @abstractmethod
    def events(self, stream: str) -> Iterator[dict]:
        """The stream's events in the order they were appended: {"id", "subject", "record"}."""

    @abstractmethod
    def streams(self) -> list[str]:
        """The names of the streams that hold events, sorted."""

    # ------------------------------------------------------------------ shared behaviour
    def close(self) -> None:
        """Release the backend's resources."""

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Changes made inside are durable together when it ends (a backend may sync once instead of each)."""
        yield

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def put_final(self, key: JobKey, state: str, source: str, exit_code: int | None = None,
                  signal: int | None = None) -> bool:
        """Set the final state from `source` (see FINAL_SOURCES), with the exit code and the signal that ended the
        job, unless a stronger source already gave one. True when it changed the record."""
        if source not in FINAL_SOURCES:
            raise ValueError(f"final state source: expected one of {', '.join(FINAL_SOURCES)}, got {source!r}")
        final = {"state": state, "source": source, "exit_code": exit_code, "signal": signal}
        for _ in range(100):  # another writer may change the final state between the read and the write
            current = (self.get(key) or {}).get("final")
            if current == final or (current and FINAL_SOURCES.index(current["source"]) > FINAL_SOURCES.index(source)):
                return False
            if self._write_final(key, final, current):
                return True
        raise RuntimeError(f"job {key.text()}: its final state kept changing under another writer")

    def outcomes(self, cluster: str | None = None, since: float | None = None,
                 until: float | None = None) -> Iterator[dict]:
        """Finished jobs with the predictions made for them: {key, final, predictions}, in `order`."""
        for record in self.records(cluster, since, until, predictions=""):
            if record["final"]:
                key = JobKey(record["cluster"], record["job_id"], record["submit_time"])
                yield {"key": key, "final": record["final"], "predictions": record["predictions"]}


def now() -> float:
    return round(time.time(), 3)
