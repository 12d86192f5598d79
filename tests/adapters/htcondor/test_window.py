"""The window a hold is asked with: the held job's history, its neighbours' recent events, bounded."""

from __future__ import annotations

import datetime as dt

from jobaware.adapters.htcondor.follower import Event
from jobaware.adapters.htcondor.window import Window


def _event(cluster: int, code: int, minute: int, seq: int = 0) -> Event:
    time = dt.datetime(2026, 1, 5, 10, 0) + dt.timedelta(minutes=minute)
    raw = f"{code:03d} ({cluster}.000.000) {time:%Y-%m-%d %H:%M:%S} event\n...\n".encode()
    return Event(file="f", offset=seq, path="EventLog", line=1, raw=raw, code=code, cluster=cluster, proc=0,
                 subproc=0, time=time, hold_code=13 if code == 12 else None, hold_subcode=None, reason=None,
                 normal=None)


def test_the_held_job_and_its_neighbours_up_to_the_hold_in_log_order():
    window = Window(seconds_kept=3600)
    old_quiet = _event(7, 1, 0)  # a live job quiet since before the window: its last event carries its state
    gone = _event(8, 5, 1)  # terminated before the window: left out
    events = [old_quiet, _event(8, 1, 0), gone, _event(1, 0, 100), _event(2, 0, 101), _event(1, 1, 110),
              _event(2, 6, 115), _event(1, 12, 120), _event(2, 6, 121)]
    seqs = [window.add(e) for e in events]
    log = window.request_log((1, 0, 0), seqs[7])
    assert log == b"".join(e.raw for e in [old_quiet, *events[3:8]])
    assert window.starts_and_holds((1, 0, 0)) == (1, 1)
    assert (8, 0, 0) not in window.jobs


def test_the_oldest_neighbour_events_go_first_past_the_byte_limit_and_the_state_round_trips():
    window = Window(max_bytes=400)
    events = [_event(2, 6, m) for m in range(10)] + [_event(1, 0, 10), _event(1, 12, 11)]
    seqs = [window.add(e) for e in events]
    log = window.request_log((1, 0, 0), seqs[-1])
    assert len(log) <= 400 and log.endswith(events[-2].raw + events[-1].raw) and events[9].raw in log
    assert events[0].raw not in log
    again = Window(max_bytes=400)
    again.restore(window.state())
    assert again.request_log((1, 0, 0), seqs[-1]) == log and again.seq == window.seq
    assert again.starts_and_holds((1, 0, 0)) == (0, 1)


def test_memory_stays_within_its_bounds():
    window = Window(recent_bytes=2000, history_bytes=3000, per_job=3)
    for n in range(200):
        window.add(_event(n, 1, n % 50))
    for _ in range(10):
        window.add(_event(199, 12, 60))
    assert window.starts_and_holds((199, 0, 0)) == (1, 10)  # counted beyond the events kept
    assert sum(len(i[3]) for i in window.recent) <= 2000
    assert sum(len(i[3]) for h in window.jobs.values() for i in h) <= 3000
    assert max(len(h) for h in window.jobs.values()) <= 3


def test_how_earlier_held_jobs_ended_travels_with_a_hold_long_after_and_round_trips():
    window = Window(seconds_kept=3600, ended_holds=2)
    earlier = [_event(3, 0, 0), _event(3, 12, 1), _event(3, 13, 2), _event(3, 1, 3), _event(3, 5, 4),  # released
               _event(4, 12, 5), _event(4, 9, 6),  # removed
               _event(5, 1, 7), _event(5, 5, 8),  # never held: nothing kept
               _event(6, 12, 9), _event(6, 9, 10)]  # removed, the newest of the two kept
    for e in earlier:
        window.add(e)
    seqs = [window.add(e) for e in (_event(1, 0, 600), _event(1, 12, 601))]
    log = window.request_log((1, 0, 0), seqs[-1])
    kept = [earlier[i].raw for i in (5, 6, 9, 10)]  # cluster 3 fell out: two ended holds kept
    assert log == b"".join(kept) + b"".join(e.raw for e in (_event(1, 0, 600), _event(1, 12, 601)))
    again = Window(seconds_kept=3600, ended_holds=2)
    again.restore(window.state())
    assert again.request_log((1, 0, 0), seqs[-1]) == log
    assert len(window.request_log((1, 0, 0), seqs[-1], max_bytes=len(log) - 1)) < len(log) - 40  # the oldest goes
