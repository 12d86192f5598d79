"""A daemon's writes to a job store, as a process of its own: `python -m tests.jobaware.store.writer ROLE URI N`.

Each role writes what its daemon writes, the way it writes it, and resumes from its checkpoint when restarted (going
back a few items, as a restarted daemon repeats its last interval):
  collector  per job: its row, its state changes (those not stored yet), its script, its final state; a
             checkpoint every 10 jobs, each 10 jobs a batch;
  adapter    per job: a verdict (a prediction) and an audit event;
  follower   per hold: an audit event with the held job as subject, then its position (a checkpoint).
Prints the number of each item once it is written (while it goes on writing the next).
"""

from __future__ import annotations

import sys

from jobaware.store import JobKey, open_store

STATES = ("PENDING", "RUNNING", "COMPLETED")
REPEAT = 5  # items a restarted writer writes again


def key(i: int) -> JobKey:
    return JobKey("site", i, 1_700_000_000 + i)


def collector(store, count: int) -> None:
    start = max(0, store.checkpoint("site").get("done", 0) - REPEAT)
    for first in range(start, count, 10):
        with store.batch():
            for i in range(first, min(first + 10, count)):
                stored = store.get(key(i))
                store.put_job(key(i), {"job_id": i, "user": f"u{i % 7}", "state": "COMPLETED"})
                for state in STATES[len(stored["states"]) if stored else 0:]:
                    store.add_state(key(i), state, float(i))
                store.put_script(key(i), f"#!/bin/bash\necho {i}\n")
                store.put_final(key(i), "COMPLETED", "sacct", exit_code=0, signal=None)
                yield i
            store.put_checkpoint("site", {"done": min(first + 10, count)})


def adapter(store, count: int) -> None:
    start = max(0, store.checkpoint("adapter").get("done", 0) - REPEAT)
    for i in range(start, count):
        store.put_prediction(key(i), "adapter:failure=1", {"p_fail": i / count})
        store.put_event("audit", f"comment:{i}", {"job": i, "command": ["scontrol", "update", f"JobId={i}"]})
        store.put_checkpoint("adapter", {"done": i + 1})
        yield i


def follower(store, count: int) -> None:
    start = max(0, store.checkpoint("follower").get("at", 0) - REPEAT)
    for i in range(start, count):
        store.put_event("holds", f"{i}.0.0@t#{i * 100}", {"kind": "hold", "job": f"{i}.0.0"}, subject=f"{i}.0.0")
        store.put_checkpoint("follower", {"at": i + 1})
        yield i


if __name__ == "__main__":
    role, uri, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open_store(uri) as opened:
        for done in {"collector": collector, "adapter": adapter, "follower": follower}[role](opened, count):
            print(done, flush=True)
