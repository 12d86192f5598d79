"""The embedded job store: one SQLite database in WAL mode (`<folder>/jobs.db`), shared by every daemon of a node.

Any number of processes read and write it at once: SQLite's write-ahead log lets readers go on while one writer
commits, and each write here is one short transaction (`BEGIN IMMEDIATE`: a writer waits for another, up to the
busy timeout, and never upgrades a read lock it cannot get). A process killed at any moment, SIGKILL included,
loses nothing it committed and leaves no half change: SQLite rolls an unfinished transaction back when the
database is next opened. Each commit is synced (`synchronous=FULL`); inside `batch()` commits go unsynced
(`NORMAL`: still safe against a killed process, not yet against a power cut) and one synced commit ends the batch.
A listing reads a page of rows per transaction, so a long listing never holds the log back from a checkpoint.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jobaware.errors import JobawareError
from jobaware.store.base import JobKey, JobStore, empty_record, now

DB = "jobs.db"
FORMAT = 2  # the schema's version, in `PRAGMA user_version` (2: jobs.usage)
PAGE = 500  # records read per transaction by a listing
BUSY_SECONDS = 60.0  # how long a write waits for another process's write to end (and an open for another's)
OPEN_RETRY_SECONDS = 0.05

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY, cluster TEXT NOT NULL, job_id INTEGER NOT NULL, submit_time INTEGER NOT NULL,
    fields TEXT NOT NULL DEFAULT '{}', script TEXT, final TEXT, usage TEXT, UNIQUE (cluster, submit_time, job_id));
CREATE INDEX IF NOT EXISTS jobs_by_submit ON jobs (submit_time, cluster, job_id);
CREATE INDEX IF NOT EXISTS open_jobs ON jobs (cluster, submit_time, job_id) WHERE final IS NULL;
CREATE TABLE IF NOT EXISTS states (
    job INTEGER NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL, time REAL NOT NULL,
    PRIMARY KEY (job, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS predictions (
    submit_time INTEGER NOT NULL, cluster TEXT NOT NULL, job_id INTEGER NOT NULL, name TEXT NOT NULL,
    answer TEXT NOT NULL, PRIMARY KEY (submit_time, cluster, job_id, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, id TEXT NOT NULL, subject TEXT,
    record TEXT NOT NULL, UNIQUE (stream, id));
CREATE INDEX IF NOT EXISTS events_by_subject ON events (stream, subject);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
"""
MIGRATIONS = {1: "ALTER TABLE jobs ADD COLUMN usage TEXT"}  # from format N to N + 1
JOB_COLUMNS = "fields, script, final, usage"  # a record's parts, in the order `_record` reads them


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _window(cluster: str | None, since: float | None, until: float | None) -> tuple[str, list]:
    """The SQL condition (and its parameters) of a cluster and a submit-time window."""
    terms, params = ["1"], []
    for term, value in (("cluster = ?", cluster), ("submit_time >= ?", since), ("submit_time < ?", until)):
        if value is not None:
            terms.append(term)
            params.append(value)
    return " AND ".join(terms), params


class SqliteStore(JobStore):
    def __init__(self, folder: str | Path, busy_seconds: float = BUSY_SECONDS):
        self.folder = Path(folder)
        self.path = self.folder / DB
        self.batching = False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=busy_seconds, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise JobawareError(f"store {self.path}: cannot open ({exc})") from None
        deadline = time.monotonic() + busy_seconds
        while True:
            try:
                self._prepare()
                return
            except sqlite3.OperationalError as exc:  # locked, read-only, a disk that is full or gone
                if "locked" in str(exc) and time.monotonic() < deadline:
                    time.sleep(OPEN_RETRY_SECONDS)  # a journal-mode change or schema creation of another process
                    continue  # can refuse at once, without the busy timeout: wait for it within the same bound
                self.db.close()
                raise JobawareError(f"store {self.path}: cannot open ({exc})") from None
            except sqlite3.Error as exc:
                self.db.close()
                raise JobawareError(f"store {self.path}: not a jobaware SQLite store ({exc})") from None

    def _prepare(self) -> None:
        """WAL mode, synced commits, and the schema where the database has none (or an older format)."""
        mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise sqlite3.DatabaseError(f"journal mode {mode}, not WAL (a network file system?)")
        self.db.execute("PRAGMA synchronous=FULL")
        if self.db.execute("PRAGMA user_version").fetchone()[0] != FORMAT:
            self._create()

    def _create(self) -> None:
        """The schema, in a new database, or an older format brought up to this one (one process does it when
        several open it at once)."""
        with self._writing():
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version > FORMAT:
                raise sqlite3.DatabaseError(f"format {version} is newer than this jobaware's {FORMAT}")
            if version == 0:
                for statement in filter(str.strip, SCHEMA.split(";")):
                    self.db.execute(statement)
            else:
                for step in range(version, FORMAT):
                    self.db.execute(MIGRATIONS[step])
            self.db.execute(f"PRAGMA user_version={FORMAT}")

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction: this process's changes inside are committed together or not at all."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """One read transaction: the reads inside see one state of the database."""
        self.db.execute("BEGIN")
        try:
            yield
        finally:
            self.db.execute("COMMIT")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Commits inside are not synced one by one; one synced commit at the end makes them all durable."""
        if self.batching:
            yield
            return
        self.batching = True
        self.db.execute("PRAGMA synchronous=NORMAL")
        try:
            yield
        finally:
            self.batching = False
            self.db.execute("PRAGMA synchronous=FULL")
            # a synced commit syncs the whole log, with every commit before it
            self.db.execute("INSERT INTO meta (name, value) VALUES ('synced', ?) "
                            "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (str(now()),))

    def _job(self, key: JobKey) -> int:
        """The job's row id, the job created when new (inside a write transaction)."""
        self.db.execute("INSERT INTO jobs (cluster, job_id, submit_time) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", key)
        return self.db.execute("SELECT id FROM jobs WHERE cluster = ? AND job_id = ? AND submit_time = ?",
                               key).fetchone()[0]

    # ------------------------------------------------------------------ jobs
    def put_job(self, key: JobKey, row: dict) -> None:
        self.db.execute("INSERT INTO jobs (cluster, job_id, submit_time, fields) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (cluster, submit_time, job_id) DO UPDATE SET fields = excluded.fields "
                        "WHERE fields IS NOT excluded.fields", (*key, _json(row)))

    def add_state(self, key: JobKey, state: str, at: float | None = None) -> bool:
        with self._writing():
            job = self._job(key)
            last = self.db.execute("SELECT state FROM states WHERE job = ? ORDER BY seq DESC LIMIT 1", (job,)).fetchone()
            if last is not None and last[0] == state:
                return False
            self.db.execute("INSERT INTO states (job, seq, state, time) VALUES "
                            "(?, (SELECT COALESCE(MAX(seq) + 1, 0) FROM states WHERE job = ?), ?, ?)",
                            (job, job, state, now() if at is None else at))
        return True

    def put_script(self, key: JobKey, script: str) -> None:
        self.db.execute("INSERT INTO jobs (cluster, job_id, submit_time, script) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (cluster, submit_time, job_id) DO UPDATE SET script = excluded.script "
                        "WHERE script IS NULL", (*key, script))

    def _write_final(self, key: JobKey, final: dict, unless: dict | None) -> bool:
        with self._writing():
            job = self._job(key)
            current = self.db.execute("SELECT final FROM jobs WHERE id = ?", (job,)).fetchone()[0]
            if (json.loads(current) if current else None) != unless:
                return False
            self.db.execute("UPDATE jobs SET final = ? WHERE id = ?", (_json(final), job))
        return True

    def put_usage(self, key: JobKey, usage: dict) -> None:
        self.db.execute("INSERT INTO jobs (cluster, job_id, submit_time, usage) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (cluster, submit_time, job_id) DO UPDATE SET usage = excluded.usage "
                        "WHERE usage IS NOT excluded.usage", (*key, _json(usage)))

    def put_record(self, record: dict) -> None:
        key = JobKey(record["cluster"], record["job_id"], record["submit_time"])
        final, usage = record.get("final"), record.get("usage")
        with self._writing():
            job = self._job(key)
            self.db.execute("UPDATE jobs SET fields = ?, script = ?, final = ?, usage = ? WHERE id = ?",
                            (_json(record.get("row") or {}), record.get("script"),
                             None if final is None else _json(final), None if usage is None else _json(usage), job))
            self.db.execute("DELETE FROM states WHERE job = ?", (job,))
            self.db.executemany("INSERT INTO states (job, seq, state, time) VALUES (?, ?, ?, ?)",
                                [(job, seq, s["state"], s["time"]) for seq, s in enumerate(record.get("states") or [])])

    def get(self, key: JobKey) -> dict | None:
        with self._reading():
            found = self.db.execute(f"SELECT id, {JOB_COLUMNS} FROM jobs WHERE cluster = ? AND job_id = ? AND "
                                    "submit_time = ?", key).fetchone()
            if found is None:
                return None
            states = self.db.execute("SELECT state, time FROM states WHERE job = ? ORDER BY seq", (found[0],)).fetchall()
        return self._record(key, found[1:], states)

    @staticmethod
    def _record(key: JobKey, fields: tuple, states: list) -> dict:
        row, script, final, usage = fields
        record = empty_record(key)
        record.update(row=json.loads(row), script=script, final=json.loads(final) if final else None,
                      usage=json.loads(usage) if usage else None,
                      states=[{"state": state, "time": time} for state, time in states])
        return record

    def keys(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> list[JobKey]:
        where, params = _window(cluster, since, until)
        return [JobKey(*k) for k in self.db.execute(
            f"SELECT cluster, job_id, submit_time FROM jobs WHERE {where} ORDER BY submit_time, cluster, job_id", params)]

    def records(self, cluster: str | None = None, since: float | None = None, until: float | None = None, *,
                newest_first: bool = False, predictions: str | None = None) -> Iterator[dict]:
        where, params = _window(cluster, since, until)
        direction, after = ("DESC", "<") if newest_first else ("ASC", ">")
        # the page after the last one read, in the order of the index that serves the query (a cluster's, or all)
        columns = ("submit_time", "job_id") if cluster is not None else ("submit_time", "cluster", "job_id")
        last: dict | None = None
        while True:
            page_where = where + (f" AND ({', '.join(columns)}) {after} ({', '.join('?' * len(columns))})" if last else "")
            with self._reading():
                rows = self.db.execute(
                    f"SELECT id, cluster, job_id, submit_time, {JOB_COLUMNS} FROM jobs WHERE {page_where} "
                    f"ORDER BY submit_time {direction}, cluster {direction}, job_id {direction} LIMIT {PAGE}",
                    params + ([last[c] for c in columns] if last else [])).fetchall()
                if not rows:
                    return
                ids = ",".join(str(r[0]) for r in rows)
                states: dict[int, list] = {}
                for job, state, time in self.db.execute(
                        f"SELECT job, state, time FROM states WHERE job IN ({ids}) ORDER BY job, seq"):
                    states.setdefault(job, []).append((state, time))
                answers = self._page_predictions(rows, predictions) if predictions is not None else None
            for job, cluster_, job_id, submit, *parts in rows:
                key = JobKey(cluster_, job_id, submit)
                record = self._record(key, tuple(parts), states.get(job, []))
                if answers is not None:
                    record["predictions"] = answers.get(key, {})
                yield record
            last = {"submit_time": rows[-1][3], "cluster": rows[-1][1], "job_id": rows[-1][2]}

    def _page_predictions(self, rows: list, prefix: str) -> dict[JobKey, dict[str, dict]]:
        """The predictions named `prefix...` of a page of job rows (one range read over the page's submit times)."""
        keys = {JobKey(r[1], r[2], r[3]) for r in rows}
        low, high = min(k.submit_time for k in keys), max(k.submit_time for k in keys)
        found: dict[JobKey, dict[str, dict]] = {}
        for *key, name, answer in self.db.execute(
                "SELECT cluster, job_id, submit_time, name, answer FROM predictions WHERE submit_time BETWEEN ? AND ? "
                "AND substr(name, 1, ?) = ? ORDER BY submit_time, cluster, job_id, name",
                (low, high, len(prefix), prefix)):
            key = JobKey(*key)
            if key in keys:
                found.setdefault(key, {})[name] = json.loads(answer)
        return found

    def count(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> int:
        where, params = _window(cluster, since, until)
        return self.db.execute(f"SELECT COUNT(*) FROM jobs WHERE {where}", params).fetchone()[0]

    def open_keys(self, cluster: str) -> list[JobKey]:
        return [JobKey(*k) for k in self.db.execute(
            "SELECT cluster, job_id, submit_time FROM jobs WHERE cluster = ? AND final IS NULL "
            "ORDER BY submit_time, job_id", (cluster,))]

    # ------------------------------------------------------------------ predictions
    def put_prediction(self, key: JobKey, model_version: str, answer: dict) -> None:
        self.db.execute("INSERT INTO predictions (submit_time, cluster, job_id, name, answer) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT DO UPDATE SET answer = excluded.answer WHERE answer IS NOT excluded.answer",
                        (key.submit_time, key.cluster, key.job_id, model_version, _json(answer)))

    def predictions(self, key: JobKey) -> dict[str, dict]:
        return {name: json.loads(answer) for name, answer in self.db.execute(
            "SELECT name, answer FROM predictions WHERE submit_time = ? AND cluster = ? AND job_id = ? ORDER BY name",
            (key.submit_time, key.cluster, key.job_id))}

    def predictions_by_name(self, prefix: str = "", cluster: str | None = None, since: float | None = None,
                            until: float | None = None) -> Iterator[tuple[JobKey, str, dict]]:
        where, params = _window(cluster, since, until)
        last: tuple | None = None
        while True:
            page_where = where + (" AND (submit_time, cluster, job_id, name) > (?, ?, ?, ?)" if last else "")
            rows = self.db.execute(
                f"SELECT submit_time, cluster, job_id, name, answer FROM predictions WHERE {page_where} "
                f"AND substr(name, 1, ?) = ? ORDER BY submit_time, cluster, job_id, name LIMIT {PAGE}",
                params + (list(last) if last else []) + [len(prefix), prefix]).fetchall()
            if not rows:
                return
            for submit, cluster_, job_id, name, answer in rows:
                yield JobKey(cluster_, job_id, submit), name, json.loads(answer)
            last = rows[-1][:4]

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, cluster: str) -> dict:
        found = self.db.execute("SELECT value FROM checkpoints WHERE name = ?", (cluster,)).fetchone()
        return json.loads(found[0]) if found else {}

    def put_checkpoint(self, cluster: str, checkpoint: dict) -> None:
        # commits are ordered in the log: a checkpoint is never durable without the changes committed before it
        self.db.execute("INSERT INTO checkpoints (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET "
                        "value = excluded.value WHERE value IS NOT excluded.value", (cluster, _json(checkpoint)))

    def checkpoints(self) -> dict[str, dict]:
        return {name: json.loads(value) for name, value in
                self.db.execute("SELECT name, value FROM checkpoints ORDER BY name")}

    # ------------------------------------------------------------------ event streams
    def put_event(self, stream: str, event_id: str, record: dict, subject: str | None = None) -> bool:
        done = self.db.execute("INSERT INTO events (stream, id, subject, record) VALUES (?, ?, ?, ?) "
                               "ON CONFLICT DO NOTHING", (stream, event_id, subject, _json(record)))
        return done.rowcount == 1

    def has_event(self, stream: str, event_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM events WHERE stream = ? AND id = ?", (stream, event_id)).fetchone() is not None

    def has_subject(self, stream: str, subject: str) -> bool:
        return self.db.execute("SELECT 1 FROM events WHERE stream = ? AND subject = ? LIMIT 1",
                               (stream, subject)).fetchone() is not None

    def events(self, stream: str) -> Iterator[dict]:
        last = 0
        while True:
            rows = self.db.execute(f"SELECT seq, id, subject, record FROM events WHERE stream = ? AND seq > ? "
                                   f"ORDER BY seq LIMIT {PAGE}", (stream, last)).fetchall()
            if not rows:
                return
            for _, event_id, subject, record in rows:
                yield {"id": event_id, "subject": subject, "record": json.loads(record)}
            last = rows[-1][0]

    def streams(self) -> list[str]:
        return [name for (name,) in self.db.execute("SELECT DISTINCT stream FROM events ORDER BY stream")]

    def close(self) -> None:
        self.db.close()
