"""New-job notices from a topic: a Redis stream or a Kafka topic. A notice names a job id (the text `123`, or JSON
`{"job_id": 123}`); the collector fetches that job at once and acknowledges the notice only after storing it, so a
crash between the two reads it again.

URIs: `redis://host:port/db?stream=NAME&group=NAME` and `kafka://host:port[,host:port]/TOPIC?group=NAME`.
"""

from __future__ import annotations

import json
import logging
import socket
from urllib.parse import parse_qs, urlsplit, urlunsplit

from jobaware.errors import JobawareError
from jobaware.text import ascii_digits, redacted

log = logging.getLogger(__name__)
BATCH = 100  # notices read at most at once


def job_id_of(value: bytes | str | None) -> int | None:
    """The job id a notice names, or None (logged) when it names none."""
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = text.strip()
    if isinstance(parsed, dict):
        parsed = parsed.get("job_id")
    if isinstance(parsed, str) and ascii_digits(parsed.strip()):
        parsed = int(parsed)
    if isinstance(parsed, int) and not isinstance(parsed, bool) and 0 < parsed < 2**53:
        return parsed
    log.warning("notice %r names no job id; skipped", text[:100])
    return None


def _consumer_name() -> str:
    return f"{socket.gethostname()}-collector"


class RedisNotices:
    """A consumer in a consumer group of a Redis stream: its own pending notices first (after a crash), then new ones."""

    def __init__(self, uri: str):
        import redis

        parts = urlsplit(uri)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.stream, self.group = query.get("stream", "jobaware:notices"), query.get("group", "jobaware-collector")
        self.consumer = _consumer_name()
        self.client = redis.Redis.from_url(urlunsplit(parts._replace(query="")), socket_timeout=30,
                                           socket_connect_timeout=10)
        try:
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise JobawareError(f"notices {redacted(uri)}: {redacted(str(exc))}") from None
        except redis.RedisError as exc:
            raise JobawareError(f"notices {redacted(uri)}: cannot reach Redis ({redacted(str(exc)[:200])})") from None
        self.backlog = True  # read this consumer's unacknowledged notices first

    def read(self, timeout: float) -> list[tuple[bytes, int | None]]:
        start = "0" if self.backlog else ">"
        answer = self.client.xreadgroup(self.group, self.consumer, {self.stream: start}, count=BATCH,
                                        block=None if self.backlog else max(1, int(timeout * 1000)))
        entries = answer[0][1] if answer else []
        if self.backlog and not entries:
            self.backlog = False
        return [(entry_id, job_id_of((fields or {}).get(b"job_id"))) for entry_id, fields in entries]

    def ack(self, tokens: list) -> None:
        if tokens:
            self.client.xack(self.stream, self.group, *tokens)

    def close(self) -> None:
        self.client.close()


class KafkaNotices:
    """A Kafka consumer (confluent-kafka) in a group, committing offsets only after the jobs are stored."""

    def __init__(self, uri: str, config: dict | None = None):
        from confluent_kafka import Consumer

        parts = urlsplit(uri)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        topic = parts.path.strip("/")
        if not parts.netloc or not topic:
            raise JobawareError(f"notices {redacted(uri)}: expected kafka://host:port/TOPIC")
        self.consumer = Consumer({"bootstrap.servers": parts.netloc, "group.id": query.get("group", "jobaware-collector"),
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "client.id": _consumer_name(), **(config or {})})
        self.consumer.subscribe([topic])

    def read(self, timeout: float) -> list:
        messages = self.consumer.consume(num_messages=BATCH, timeout=timeout)
        batch = []
        for message in messages:
            if message.error():
                log.warning("kafka: %s", message.error())
                continue
            batch.append((message, job_id_of(message.value())))
        return batch

    def ack(self, tokens: list) -> None:
        from confluent_kafka import TopicPartition

        last = {}
        for message in tokens:  # the next offset of each partition read
            last[(message.topic(), message.partition())] = max(message.offset() + 1, last.get((message.topic(), message.partition()), 0))
        if last:
            self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in last.items()], asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


def open_notices(uri: str):
    """The notice source at `uri` (redis:// or kafka://)."""
    if uri.startswith(("redis://", "rediss://")):
        return RedisNotices(uri)
    if uri.startswith("kafka://"):
        return KafkaNotices(uri)
    raise JobawareError(f"notices {redacted(uri)}: expected redis://host:port/db?stream=NAME or "
                        "kafka://host:port/TOPIC")
