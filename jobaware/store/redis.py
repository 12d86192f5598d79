"""The job store in Redis (`redis://host:port/db`), for many nodes: a hash per job, a list of its state changes, an
index sorted by submit time, a set of the jobs without a final state, a hash of predictions per job (and an index
of the jobs that have some), a checkpoint per name, and per event stream a hash of events, their order and their
subjects. Durability is Redis's: run it with `appendonly yes`."""

from __future__ import annotations

import json
from collections.abc import Iterator

from jobaware.errors import JobawareError
from jobaware.store.base import JobKey, JobStore, empty_record, now, order
from jobaware.text import redacted

PREFIX = "jobaware:"
PAGE = 500  # records read per round trip by a listing

# append a state change unless the last one already has this state (atomic: one script)
_ADD_STATE = """
local last = redis.call('LINDEX', KEYS[1], -1)
if last and cjson.decode(last)['state'] == ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[2])
return 1
"""

# append an event unless its id is in the stream already: KEYS events hash, order list, subjects set, streams set
_PUT_EVENT = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('SADD', KEYS[3], ARGV[3]) end
redis.call('SADD', KEYS[4], ARGV[4])
return 1
"""


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _range(since: float | None, until: float | None) -> tuple[str, str]:
    """A sorted-set score range for [since, until)."""
    return ("-inf" if since is None else str(since)), ("+inf" if until is None else f"({until}")


class RedisStore(JobStore):
    def __init__(self, uri: str, prefix: str = PREFIX):
        import redis

        try:
            self.client = redis.Redis.from_url(uri, socket_timeout=30, socket_connect_timeout=10,
                                               retry_on_timeout=True, decode_responses=True)
            self.client.ping()
        except (redis.RedisError, ValueError) as exc:
            raise JobawareError(f"store {redacted(uri)}: cannot reach Redis "
                                f"({redacted(str(exc).splitlines()[0][:200])})") from None
        self.prefix = prefix
        self._add_state = self.client.register_script(_ADD_STATE)
        self._put_event = self.client.register_script(_PUT_EVENT)

    def _job(self, key: JobKey) -> str:
        return f"{self.prefix}job:{key.text()}"

    def _index(self, key: JobKey) -> None:
        """Enter the job into the index and, while it has no final state, into its cluster's open set."""
        pipe = self.client.pipeline()
        pipe.zadd(f"{self.prefix}jobs", {key.text(): key.submit_time}, nx=True)
        pipe.hsetnx(self._job(key), "row", "{}")
        pipe.execute()
        if not self.client.hexists(self._job(key), "final"):
            self.client.sadd(f"{self.prefix}open:{key.cluster}", key.text())

    # ------------------------------------------------------------------ jobs
    def put_job(self, key: JobKey, row: dict) -> None:
        self._index(key)
        self.client.hset(self._job(key), "row", _json(row))

    def add_state(self, key: JobKey, state: str, at: float | None = None) -> bool:
        self._index(key)
        entry = _json({"state": state, "time": now() if at is None else at})
        return bool(self._add_state(keys=[f"{self._job(key)}:states"], args=[state, entry]))

    def put_script(self, key: JobKey, script: str) -> None:
        self._index(key)
        self.client.hsetnx(self._job(key), "script", script)

    def _write_final(self, key: JobKey, final: dict, unless: dict | None) -> bool:
        import redis

        self._index(key)
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(self._job(key))
                current = pipe.hget(self._job(key), "final")
                if (json.loads(current) if current else None) != unless:
                    return False
                pipe.multi()
                pipe.hset(self._job(key), "final", _json(final))
                pipe.srem(f"{self.prefix}open:{key.cluster}", key.text())
                pipe.execute()
            except redis.WatchError:
                return False
        return True

    def put_usage(self, key: JobKey, usage: dict) -> None:
        self._index(key)
        self.client.hset(self._job(key), "usage", _json(usage))

    def put_record(self, record: dict) -> None:
        key = JobKey(record["cluster"], record["job_id"], record["submit_time"])
        fields = {"row": _json(record.get("row") or {})}
        for name in ("script", "final", "usage"):
            if record.get(name) is not None:
                fields[name] = record[name] if name == "script" else _json(record[name])
        pipe = self.client.pipeline()  # MULTI/EXEC: the record changes at once
        pipe.zadd(f"{self.prefix}jobs", {key.text(): key.submit_time})
        pipe.delete(self._job(key), f"{self._job(key)}:states")
        pipe.hset(self._job(key), mapping=fields)
        if record.get("states"):
            pipe.rpush(f"{self._job(key)}:states", *(_json(s) for s in record["states"]))
        if record.get("final") is None:
            pipe.sadd(f"{self.prefix}open:{key.cluster}", key.text())
        else:
            pipe.srem(f"{self.prefix}open:{key.cluster}", key.text())
        pipe.execute()

    def get(self, key: JobKey) -> dict | None:
        return self._read([key])[0]

    def _read(self, keys: list[JobKey], predictions: str | None = None) -> list[dict | None]:
        """The records of `keys` in one round trip (with their predictions named `predictions...`, if given)."""
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(self._job(key))
            pipe.lrange(f"{self._job(key)}:states", 0, -1)
            if predictions is not None:
                pipe.hgetall(f"{self.prefix}pred:{key.text()}")
        answers = iter(pipe.execute())
        records = []
        for key in keys:
            fields, states = next(answers), next(answers)
            stored = next(answers) if predictions is not None else None
            if not fields:
                records.append(None)
                continue
            record = empty_record(key)
            record["row"] = json.loads(fields.get("row", "{}"))
            record["states"] = [json.loads(s) for s in states]
            record["script"] = fields.get("script")
            record["final"] = json.loads(fields["final"]) if "final" in fields else None
            record["usage"] = json.loads(fields["usage"]) if "usage" in fields else None
            if predictions is not None:
                record["predictions"] = {n: json.loads(a) for n, a in sorted(stored.items()) if n.startswith(predictions)}
            records.append(record)
        return records

    def _indexed(self, index: str, cluster: str | None, since: float | None, until: float | None) -> list[JobKey]:
        keys = (JobKey.parse(k) for k in self.client.zrangebyscore(f"{self.prefix}{index}", *_range(since, until)))
        return sorted((k for k in keys if cluster is None or k.cluster == cluster), key=order)

    def keys(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> list[JobKey]:
        return self._indexed("jobs", cluster, since, until)

    def records(self, cluster: str | None = None, since: float | None = None, until: float | None = None, *,
                newest_first: bool = False, predictions: str | None = None) -> Iterator[dict]:
        keys = self.keys(cluster, since, until)
        if newest_first:
            keys.reverse()
        for start in range(0, len(keys), PAGE):
            yield from filter(None, self._read(keys[start:start + PAGE], predictions))

    def count(self, cluster: str | None = None, since: float | None = None, until: float | None = None) -> int:
        if cluster is None:
            return self.client.zcount(f"{self.prefix}jobs", *_range(since, until))
        return len(self.keys(cluster, since, until))

    def open_keys(self, cluster: str) -> list[JobKey]:
        keys = [JobKey.parse(k) for k in self.client.smembers(f"{self.prefix}open:{cluster}")]
        return sorted(keys, key=order)

    # ------------------------------------------------------------------ predictions
    def put_prediction(self, key: JobKey, model_version: str, answer: dict) -> None:
        pipe = self.client.pipeline()
        pipe.hset(f"{self.prefix}pred:{key.text()}", model_version, _json(answer))
        pipe.zadd(f"{self.prefix}predicted", {key.text(): key.submit_time})
        pipe.execute()

    def predictions(self, key: JobKey) -> dict[str, dict]:
        stored = self.client.hgetall(f"{self.prefix}pred:{key.text()}")
        return {version: json.loads(answer) for version, answer in sorted(stored.items())}

    def predictions_by_name(self, prefix: str = "", cluster: str | None = None, since: float | None = None,
                            until: float | None = None) -> Iterator[tuple[JobKey, str, dict]]:
        # the jobs index too: a store written before the `predicted` index kept predictions of indexed jobs only
        keys = sorted({*self._indexed("predicted", cluster, since, until), *self.keys(cluster, since, until)}, key=order)
        for start in range(0, len(keys), PAGE):
            page = keys[start:start + PAGE]
            pipe = self.client.pipeline(transaction=False)
            for key in page:
                pipe.hgetall(f"{self.prefix}pred:{key.text()}")
            for key, stored in zip(page, pipe.execute(), strict=True):
                for name, answer in sorted(stored.items()):
                    if name.startswith(prefix):
                        yield key, name, json.loads(answer)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, cluster: str) -> dict:
        stored = self.client.get(f"{self.prefix}checkpoint:{cluster}")
        return json.loads(stored) if stored else {}

    def put_checkpoint(self, cluster: str, checkpoint: dict) -> None:
        self.client.set(f"{self.prefix}checkpoint:{cluster}", _json(checkpoint))

    def checkpoints(self) -> dict[str, dict]:
        start = len(f"{self.prefix}checkpoint:")
        names = sorted(k[start:] for k in self.client.scan_iter(match=f"{self.prefix}checkpoint:*", count=1000))
        return {name: self.checkpoint(name) for name in names}

    # ------------------------------------------------------------------ event streams
    def put_event(self, stream: str, event_id: str, record: dict, subject: str | None = None) -> bool:
        keys = [f"{self.prefix}event:{stream}", f"{self.prefix}events:{stream}", f"{self.prefix}subjects:{stream}",
                f"{self.prefix}streams"]
        stored = _json({"subject": subject, "record": record})
        return bool(self._put_event(keys=keys, args=[event_id, stored, subject or "", stream]))

    def has_event(self, stream: str, event_id: str) -> bool:
        return bool(self.client.hexists(f"{self.prefix}event:{stream}", event_id))

    def has_subject(self, stream: str, subject: str) -> bool:
        return bool(self.client.sismember(f"{self.prefix}subjects:{stream}", subject))

    def events(self, stream: str) -> Iterator[dict]:
        at = 0
        while True:
            ids = self.client.lrange(f"{self.prefix}events:{stream}", at, at + PAGE - 1)
            if not ids:
                return
            for event_id, stored in zip(ids, self.client.hmget(f"{self.prefix}event:{stream}", ids), strict=True):
                held = json.loads(stored)
                yield {"id": event_id, "subject": held["subject"], "record": held["record"]}
            at += len(ids)

    def streams(self) -> list[str]:
        return sorted(self.client.smembers(f"{self.prefix}streams"))

    def close(self) -> None:
        self.client.close()
