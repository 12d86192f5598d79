"""The job store in Redis (`redis://host:port/db`): a hash per job, a list of its state changes, an index sorted by
submit time, a set of the jobs without a final state, a hash of predictions per job, a checkpoint per cluster.
Durability is Redis's: run it with `appendonly yes`."""

from __future__ import annotations

import json

from jobaware.errors import JobawareError
from jobaware.store.base import JobKey, JobStore, empty_record, now

PREFIX = "jobaware:"

# append a state change unless the last one already has this state (atomic: one script)
_ADD_STATE = """
local last = redis.call('LINDEX', KEYS[1], -1)
if last and cjson.decode(last)['state'] == ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[2])
return 1
"""


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"))


class RedisStore(JobStore):
    def __init__(self, uri: str, prefix: str = PREFIX):
        import redis

        try:
            self.client = redis.Redis.from_url(uri, socket_timeout=30, socket_connect_timeout=10,
                                               retry_on_timeout=True, decode_responses=True)
            self.client.ping()
        except (redis.RedisError, ValueError) as exc:
            raise JobawareError(f"store {uri}: cannot reach Redis ({str(exc).splitlines()[0][:200]})") from None
        self.prefix = prefix
        self._add_state = self.client.register_script(_ADD_STATE)

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

    def _write_final(self, key: JobKey, final: dict) -> None:
        self._index(key)
        pipe = self.client.pipeline()
        pipe.hset(self._job(key), "final", _json(final))
        pipe.srem(f"{self.prefix}open:{key.cluster}", key.text())
        pipe.execute()

    def get(self, key: JobKey) -> dict | None:
        pipe = self.client.pipeline()
        pipe.hgetall(self._job(key))
        pipe.lrange(f"{self._job(key)}:states", 0, -1)
        fields, states = pipe.execute()
        if not fields:
            return None
        record = empty_record(key)
        record["row"] = json.loads(fields.get("row", "{}"))
        record["states"] = [json.loads(s) for s in states]
        record["script"] = fields.get("script")
        record["final"] = json.loads(fields["final"]) if "final" in fields else None
        return record

    def keys(self) -> list[JobKey]:
        keys = [JobKey.parse(k) for k in self.client.zrange(f"{self.prefix}jobs", 0, -1)]
        return sorted(keys, key=lambda k: (k.submit_time, k.cluster, k.job_id))

    def open_keys(self, cluster: str) -> list[JobKey]:
        keys = [JobKey.parse(k) for k in self.client.smembers(f"{self.prefix}open:{cluster}")]
        return sorted(keys, key=lambda k: (k.submit_time, k.cluster, k.job_id))

    def put_prediction(self, key: JobKey, model_version: str, answer: dict) -> None:
        self.client.hset(f"{self.prefix}pred:{key.text()}", model_version, _json(answer))

    def predictions(self, key: JobKey) -> dict[str, dict]:
        stored = self.client.hgetall(f"{self.prefix}pred:{key.text()}")
        return {version: json.loads(answer) for version, answer in sorted(stored.items())}

    def checkpoint(self, cluster: str) -> dict:
        stored = self.client.get(f"{self.prefix}checkpoint:{cluster}")
        return json.loads(stored) if stored else {}

    def put_checkpoint(self, cluster: str, checkpoint: dict) -> None:
        self.client.set(f"{self.prefix}checkpoint:{cluster}", _json(checkpoint))

    def close(self) -> None:
        self.client.close()
