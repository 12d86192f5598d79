"""The job store: what a cluster did, kept once per job, shared by every daemon that reads or writes it.

One interface (`JobStore`) with three backends: SQLite (the embedded default: a folder holding `jobs.db`, which
the collector, the adapter and the HTCondor follower of one node share safely), Redis (`redis://host:port/db`, for
many nodes) and the folder log of earlier releases (readable, and writable by one process, so that a site can move
it with `jobaware store copy`). A job is keyed by (cluster, job_id, submit_time): Slurm reuses job ids, never with
the same submit time. Each record holds the job's canonical row, its state changes, its batch script, its final
state and where that came from; predictions and outcomes join on the same key; daemons keep their checkpoints and
audits (event streams) beside them.

Store URIs: `redis://host:port/db` (also `rediss://`, `unix://`); `sqlite:PATH` and `folder:PATH` name a backend;
a plain PATH is the folder log where PATH holds one (`jobs.log`), else SQLite (created when missing). A local store
whose folder another user owns or may write is refused (`jobaware.config.trusted`).
"""

from __future__ import annotations

from pathlib import Path

from jobaware.config import trusted
from jobaware.errors import JobawareError
from jobaware.store.base import FINAL_SOURCES, JobKey, JobStore
from jobaware.text import redacted

__all__ = ["FINAL_SOURCES", "JobKey", "JobStore", "backend", "is_store", "open_store"]

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def backend(uri: str) -> tuple[str, str]:
    """(`redis`, `sqlite` or `folder`, the URI or path) that `uri` names; a one-line error when it names none."""
    from jobaware.store.local import LOG
    from jobaware.store.sqlite import DB

    if not isinstance(uri, str) or not uri.strip():
        raise JobawareError("store: expected a folder path, sqlite:PATH, folder:PATH or a redis://host:port/db URI")
    if uri.startswith(REDIS_SCHEMES):
        return "redis", uri
    for name in ("sqlite", "folder"):
        for prefix in (f"{name}://", f"{name}:"):
            if uri.startswith(prefix):
                return name, uri[len(prefix):]
    if "://" in uri:
        raise JobawareError(f"store {redacted(uri)}: unknown scheme; expected a folder path, sqlite:PATH, "
                            "folder:PATH or redis://host:port/db")
    folder = Path(uri)
    if (folder / LOG).is_file():
        if (folder / DB).is_file():
            raise JobawareError(f"store {uri}: holds both a folder log ({LOG}) and SQLite ({DB}); name one as "
                                f"folder:{uri} or sqlite:{uri}")
        return "folder", uri
    return "sqlite", uri


def is_store(uri: str) -> bool:
    """Whether `uri` names a job store: a Redis URI, or a folder holding a store (SQLite or the folder log)."""
    from jobaware.store.local import LOG
    from jobaware.store.sqlite import DB

    try:
        kind, where = backend(uri)
    except JobawareError:
        return False
    return kind == "redis" or (Path(where) / (DB if kind == "sqlite" else LOG)).is_file()


def open_store(uri: str) -> JobStore:
    """The store at `uri` (see the module's docstring); a folder store or SQLite is created when missing."""
    kind, where = backend(uri)
    if kind == "redis":
        from jobaware.store.redis import RedisStore

        return RedisStore(where)
    trusted(Path(where).resolve(), "the job store")  # it holds every batch script and what the daemons act on
    if kind == "folder":
        from jobaware.store.local import LocalStore

        return LocalStore(where)
    from jobaware.store.sqlite import SqliteStore

    return SqliteStore(where)
