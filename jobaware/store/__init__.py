"""The job store: what a cluster did, kept once per job.

One interface (`JobStore`) with two backends: a local folder (the embedded default, an append-only log with fsync,
nothing to start) and Redis (`redis://host:port/db`). A job is keyed by (cluster, job_id, submit_time): Slurm
reuses job ids, never with the same submit time. Each record holds the job's canonical row, its state changes,
its batch script, its final state and where that came from; predictions and outcomes join on the same key.
"""

from __future__ import annotations

from jobaware.errors import JobawareError
from jobaware.store.base import FINAL_SOURCES, JobKey, JobStore

__all__ = ["FINAL_SOURCES", "JobKey", "JobStore", "is_store", "open_store"]


def is_store(uri: str) -> bool:
    """Whether `uri` names a job store: a redis:// URI, or a folder holding a local store."""
    from pathlib import Path

    from jobaware.store.local import LOG

    return uri.startswith(("redis://", "rediss://")) or (Path(uri) / LOG).is_file()


def open_store(uri: str) -> JobStore:
    """The store at `uri`: `redis://host:port/db`, or a local folder (created when missing)."""
    if not isinstance(uri, str) or not uri.strip():
        raise JobawareError("store: expected a folder path or a redis://host:port/db URI")
    if uri.startswith(("redis://", "rediss://", "unix://")):
        from jobaware.store.redis import RedisStore

        return RedisStore(uri)
    if "://" in uri:
        raise JobawareError(f"store {uri}: unknown scheme; expected a folder path or redis://host:port/db")
    from jobaware.store.local import LocalStore

    return LocalStore(uri)
