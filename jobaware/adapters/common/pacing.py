"""How often the scheduler side may act and ask: a rate limit over acts, a back-off per service."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class RateLimit:
    """At most `per_minute` acts in any 60 seconds."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute, self.clock = per_minute, clock
        self.times: deque[float] = deque()

    def take(self, count: int = 1) -> bool:
        """Take `count` acts at once, or none (False) when they would go over the limit."""
        now = self.clock()
        while self.times and now - self.times[0] >= 60:
            self.times.popleft()
        if len(self.times) + count > self.per_minute:
            return False
        self.times.extend([now] * count)
        return True


class Backoff:
    """Per name (a service): after a failure, skip it for `first` seconds, doubling up to `most`; `ok` ends it."""

    def __init__(self, first: float, most: float, clock: Callable[[], float] = time.monotonic):
        self.first, self.most, self.clock = first, most, clock
        self.until: dict[str, float] = {}
        self.delay: dict[str, float] = {}
        self.since: dict[str, float] = {}  # when each outage began

    def open(self, name: str) -> bool:
        """Whether `name` may be asked now."""
        return self.clock() >= self.until.get(name, 0.0)

    def failed(self, name: str) -> float:
        """One more failure: the seconds `name` is skipped from now."""
        self.since.setdefault(name, self.clock())
        self.delay[name] = min(self.delay.get(name, self.first / 2) * 2, self.most)
        self.until[name] = self.clock() + self.delay[name]
        return self.delay[name]

    def ok(self, name: str) -> float | None:
        """`name` answered: its back-off ends. The seconds its outage lasted, or None when there was none."""
        self.delay.pop(name, None)
        self.until.pop(name, None)
        since = self.since.pop(name, None)
        return None if since is None else self.clock() - since

    def left(self, name: str) -> float:
        """Seconds until `name` may be asked again."""
        return max(0.0, self.until.get(name, 0.0) - self.clock())
