"""The job store's interface and the rules both backends share (which final state wins, what a record holds)."""

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


def empty_record(key: JobKey) -> dict:
    return {"cluster": key.cluster, "job_id": key.job_id, "submit_time": key.submit_time, "row": {},
            "states": [], "script": None, "final": None}


class JobStore(ABC):
    """Job records, state changes, scripts, final states, predictions, outcomes and a collector checkpoint.

    Every write is idempotent: replaying the same calls leaves the same records (a collector restarted after a
    crash repeats its last interval)."""

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
    def _write_final(self, key: JobKey, final: dict) -> None: ...

    @abstractmethod
    def get(self, key: JobKey) -> dict | None:
        """The job's record, or None."""

    @abstractmethod
    def keys(self) -> list[JobKey]:
        """Every job's key, by submit time then cluster and id."""

    @abstractmethod
    def open_keys(self, cluster: str) -> list[JobKey]:
        """The jobs of `cluster` without a final state from accounting yet."""

    @abstractmethod
    def put_prediction(self, key: JobKey, model_version: str, answer: dict) -> None:
        """Keep a model version's answer for the job (one per version: the latest given)."""

    @abstractmethod
    def predictions(self, key: JobKey) -> dict[str, dict]:
        """Model version -> answer, for the job."""

    @abstractmethod
    def checkpoint(self, cluster: str) -> dict:
        """The collector's checkpoint for `cluster` ({} before the first)."""

    @abstractmethod
    def put_checkpoint(self, cluster: str, checkpoint: dict) -> None: ...

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

    def put_final(self, key: JobKey, state: str, source: str, exit_code: int | None = None) -> bool:
        """Set the final state from `source` (see FINAL_SOURCES) unless a stronger source already gave one.
        True when it changed the record."""
        if source not in FINAL_SOURCES:
            raise ValueError(f"final state source: expected one of {', '.join(FINAL_SOURCES)}, got {source!r}")
        current = (self.get(key) or {}).get("final")
        final = {"state": state, "source": source, "exit_code": exit_code}
        if current == final or (current and FINAL_SOURCES.index(current["source"]) > FINAL_SOURCES.index(source)):
            return False
        self._write_final(key, final)
        return True

    def records(self) -> Iterator[dict]:
        """Every job's record, in `keys()` order."""
        for key in self.keys():
            record = self.get(key)
            if record is not None:
                yield record

    def outcomes(self) -> Iterator[dict]:
        """Finished jobs with the predictions made for them: {key, final, predictions}, in `keys()` order."""
        for key in self.keys():
            record = self.get(key)
            if record and record["final"]:
                yield {"key": key, "final": record["final"], "predictions": self.predictions(key)}


def now() -> float:
    return round(time.time(), 3)
