"""The events a hold decision is asked with: the held job's own history and its neighbours' recent events.

The hold model (jobaware.hold.features) looks at the held job's whole history, at up to j - 1 co-existing jobs
over the m x timeframe_len seconds before the hold (each job's state carried forward from its last event), and
at the pool's last hour. The window keeps, bounded: each live job's last `per_job` events (a job is dropped at
its termination or removal, the least recently active first beyond `max_jobs` jobs or `history_bytes`; its first
event, the submit that dates it, is always kept), and the
events of the last `seconds_kept` (at most `recent_bytes`, the oldest dropped first), and how the last
`ended_holds` held jobs ended: the holds (012), releases (013) and the end (005, 009) of each job that was held,
kept when it ends (the adaptive decision-makers of jobaware.hold.adaptive read how the pool's earlier holds
ended). A request log is the held job's events, the ended holds' events, the window's events of other jobs, and
the last event of the `neighbours` most recently active jobs quiet since before the window, in log order, up to
the hold, cut to `max_bytes` by leaving out first the oldest neighbour events and then the oldest ended holds.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict, deque

from jobaware.adapters.htcondor.follower import Event

TERMINAL = (5, 9)
OUTCOME = (b"012", b"013", b"005", b"009")  # what is kept of a held job when it ends
EPOCH = dt.datetime(1970, 1, 1)


def seconds(time: dt.datetime) -> float:
    """The log's wall clock as seconds since 1970 (as written; no zone)."""
    return (time.replace(tzinfo=None) - EPOCH).total_seconds()


Job = tuple[int, int, int]


class Window:
    def __init__(self, seconds_kept: float = 7200.0, neighbours: int = 99, per_job: int = 200,
                 max_jobs: int = 50_000, max_bytes: int = 4 << 20, recent_bytes: int = 8 << 20,
                 history_bytes: int = 32 << 20, ended_holds: int = 200):
        self.seconds_kept = seconds_kept
        self.neighbours = neighbours
        self.per_job = per_job
        self.max_jobs = max_jobs
        self.max_bytes = max_bytes
        self.recent_bytes = recent_bytes
        self.history_bytes = history_bytes
        self.seq = 0
        self.jobs: OrderedDict[Job, deque] = OrderedDict()  # least recently active first
        self.recent: deque = deque()  # (seq, seconds, job, raw)
        self.tally: dict[Job, list[int]] = {}  # per live job: its starts (001) and holds (012) so far
        self.first: dict[Job, tuple] = {}  # per live job: its first event (its submit: the job's age)
        self.ended: deque[list] = deque(maxlen=ended_holds)  # per held job that ended: its OUTCOME events
        self._recent_size = self._history_size = 0

    def add(self, event: Event) -> int:
        """Keep the event; its sequence number in the window."""
        self.seq += 1
        at = seconds(event.time)
        item = (self.seq, at, event.job, event.raw)
        self.recent.append(item)
        self._recent_size += len(item[3])
        while self.recent and (self.recent[0][1] < at - self.seconds_kept or self._recent_size > self.recent_bytes):
            self._recent_size -= len(self.recent.popleft()[3])
        history = self.jobs.pop(event.job, None)
        if history is None:
            history = deque(maxlen=self.per_job)
        if len(history) == self.per_job:
            self._history_size -= len(history[0][3])
        history.append(item)
        self._history_size += len(item[3])
        self.first.setdefault(event.job, item)
        tally = self.tally.setdefault(event.job, [0, 0])
        tally[0] += event.code == 1
        tally[1] += event.code == 12
        if event.code in TERMINAL:
            if tally[1]:
                self.ended.append([i for i in history if i[3][:3] in OUTCOME])
            self._history_size -= sum(len(i[3]) for i in history)
            del self.tally[event.job], self.first[event.job]
        else:
            self.jobs[event.job] = history
        while self.jobs and (len(self.jobs) > self.max_jobs or self._history_size > self.history_bytes):
            job, gone = self.jobs.popitem(last=False)
            self._history_size -= sum(len(i[3]) for i in gone)
            self.tally.pop(job, None)
            self.first.pop(job, None)
        return self.seq

    @property
    def held_bytes(self) -> int:
        """The bytes of the events it holds (the recent ones and the jobs' histories)."""
        return self._recent_size + self._history_size

    def history(self, job: Job) -> list[tuple]:
        return list(self.jobs.get(job, ()))

    def run_times(self, job: Job) -> tuple[float | None, float | None, float | None]:
        """(its last execute, its submit, its first execute) as the window keeps the job's events, in seconds;
        None where the window holds no such event (the first execute also where older events were let go)."""
        history = self.history(job)
        executes = [item[1] for item in history if item[3][:4] == b"001 "]
        first = self.first.get(job)
        submitted = first[1] if first is not None and first[3][:4] == b"000 " else None
        whole = bool(history) and first is not None and history[0][0] == first[0]
        return (executes[-1] if executes else None), submitted, (executes[0] if executes and whole else None)

    def starts_and_holds(self, job: Job) -> tuple[int, int]:
        """The job's NumJobStarts and NumHolds as far as the followed logs show them (this hold included)."""
        starts, holds = self.tally.get(job, (0, 0))
        return starts, holds

    def request_log(self, job: Job, upto: int, max_bytes: int | None = None) -> bytes:
        """The log to ask about `job`'s hold at window sequence `upto` (see the module docstring), at most
        `max_bytes` (default: the window's)."""
        own = [item for item in self.history(job) if item[0] <= upto]
        if not own:
            return b""
        first = self.first.get(job)
        if first is not None and first[0] < own[0][0]:  # beyond the events kept: the first stays
            own.insert(0, first)
        start = own[-1][1] - self.seconds_kept
        others = {item[0]: item for item in self.recent if item[0] <= upto and item[2] != job and item[1] >= start}
        quiet = 0
        for other in reversed(self.jobs):
            if quiet >= self.neighbours:
                break
            if other == job:
                continue
            last = [item for item in self.jobs[other] if item[0] <= upto]
            if last and last[-1][1] < start:
                others.setdefault(last[-1][0], last[-1])
                quiet += 1
        budget = (max_bytes or self.max_bytes) - sum(len(item[3]) for item in own)
        while len(own) > 2 and budget < 0:  # a job whose own history is over the limit: the oldest after the first go
            budget += len(own.pop(1)[3])
        kept = []
        for held in reversed(self.ended):  # the most recent ended holds first, each whole
            items = [item for item in held if item[0] <= upto and item[2] != job]
            size = sum(len(item[3]) for item in items)
            if size > budget:
                break
            budget -= size
            kept.extend(items)
            for item in items:
                others.pop(item[0], None)
        for key in sorted(others, reverse=True):
            size = len(others[key][3])
            if size > budget:
                break
            budget -= size
            kept.append(others[key])
        return b"".join(item[3] for item in sorted(own + kept))

    def state(self) -> dict:
        """The window as JSON-ready data (raw text as Latin-1, which keeps every byte)."""
        def item(i):
            return [i[0], i[1], list(i[2]), i[3].decode("latin-1")]
        return {"seq": self.seq, "recent": [item(i) for i in self.recent],
                "tally": [[list(job), counts] for job, counts in self.tally.items()],
                "first": [[list(job), item(i)] for job, i in self.first.items()],
                "jobs": [[list(job), [item(i) for i in history]] for job, history in self.jobs.items()],
                "ended": [[item(i) for i in held] for held in self.ended]}

    def restore(self, state: dict) -> None:
        def item(i):
            return (i[0], i[1], tuple(i[2]), i[3].encode("latin-1"))
        self.seq = state.get("seq", 0)
        self.recent = deque(item(i) for i in state.get("recent", []))
        self.tally = {tuple(job): counts for job, counts in state.get("tally", [])}
        self.first = {tuple(job): item(i) for job, i in state.get("first", [])}
        self.jobs = OrderedDict((tuple(job), deque((item(i) for i in history), maxlen=self.per_job))
                                for job, history in state.get("jobs", []))
        self.ended = deque(([item(i) for i in held] for held in state.get("ended", [])), maxlen=self.ended.maxlen)
        self._recent_size = sum(len(i[3]) for i in self.recent)
        self._history_size = sum(len(i[3]) for history in self.jobs.values() for i in history)
