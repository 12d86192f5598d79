"""The follower: whole events once each, through appends, partial events, rotation, truncation and restarts."""

from __future__ import annotations

import os
import time

import pytest

from jobaware.adapters.htcondor.follower import Follower, rotation_chain
from jobaware.errors import InputError
from tests.adapters.htcondor.conftest import real_events

EVENTS = real_events()


def _codes(events) -> list[bytes]:
    return [e.raw for e in events]


def test_appended_events_are_read_once_and_a_partial_event_is_waited_for(tmp_path):
    log = tmp_path / "EventLog"
    log.write_bytes(b"".join(EVENTS[:5]))
    follower = Follower([log], tmp_path / "state.json")
    assert _codes(follower.poll()) == EVENTS[:5]
    assert follower.poll() == []
    half = len(EVENTS[5]) // 2
    with open(log, "ab") as handle:
        handle.write(EVENTS[5][:half])
    assert follower.poll() == []  # not misread: waited for
    with open(log, "ab") as handle:
        handle.write(EVENTS[5][half:] + EVENTS[6])
    read = follower.poll()
    assert _codes(read) == EVENTS[5:7]
    assert read[0].offset == sum(map(len, EVENTS[:5])) and read[0].line == b"".join(EVENTS[:5]).count(b"\n") + 1
    assert (read[0].code, read[0].cluster, read[0].proc) == (int(EVENTS[5][:3]), 12634462, 0)
    assert follower.bad_records == 0


def test_rotation_to_old_in_the_middle_of_an_event_loses_and_repeats_nothing(tmp_path):
    log = tmp_path / "EventLog"
    writer = open(log, "ab")
    writer.write(b"".join(EVENTS[:3]) + EVENTS[3][:40])
    writer.flush()
    follower = Follower([log], tmp_path / "state.json")
    assert _codes(follower.poll()) == EVENTS[:3]
    os.rename(log, tmp_path / "EventLog.old")  # the schedd rotates; its open handle finishes the event there
    writer.write(EVENTS[3][40:])
    writer.close()
    log.write_bytes(b"".join(EVENTS[4:8]))
    assert _codes(follower.poll()) == EVENTS[3:8]
    assert follower.poll() == []


def test_several_numbered_rotations_between_two_polls_are_read_in_order(tmp_path):
    log = tmp_path / "EventLog"
    log.write_bytes(b"".join(EVENTS[:2]))
    follower = Follower([log], tmp_path / "state.json")
    assert _codes(follower.poll()) == EVENTS[:2]
    with open(log, "ab") as handle:
        handle.write(EVENTS[2])
    os.rename(log, tmp_path / "EventLog.2")  # EVENT_LOG_MAX_ROTATIONS > 1: .1 is the newest rotation
    (tmp_path / "EventLog.1").write_bytes(b"".join(EVENTS[3:6]))
    log.write_bytes(EVENTS[6])
    assert [p.name for p in rotation_chain(log)] == ["EventLog.2", "EventLog.1", "EventLog"]
    assert _codes(follower.poll()) == EVENTS[2:7]


def test_a_log_truncated_in_place_is_read_again_from_its_start(tmp_path):
    log = tmp_path / "EventLog"
    log.write_bytes(b"".join(EVENTS[:6]))
    follower = Follower([log], tmp_path / "state.json")
    follower.poll()
    log.write_bytes(b"".join(EVENTS[10:12]))  # same inode, new content (copytruncate)
    assert _codes(follower.poll()) == EVENTS[10:12]
    with open(log, "r+b") as handle:  # truncated below the position, the first bytes unchanged
        handle.truncate(len(EVENTS[10]))
    with open(log, "ab") as handle:
        handle.write(EVENTS[20])
    assert _codes(follower.poll()) == [EVENTS[10], EVENTS[20]]


def test_a_restart_goes_on_from_the_committed_position(tmp_path):
    log, state = tmp_path / "EventLog", tmp_path / "state.json"
    log.write_bytes(b"".join(EVENTS[:4]))
    first = Follower([log], state)
    assert len(first.poll()) == 4
    first.commit({"note": 1})
    with open(log, "ab") as handle:
        handle.write(b"".join(EVENTS[4:6]))
    assert len(first.poll()) == 2  # read, never committed: a restart reads them again
    again = Follower([log], state)
    assert again.extra == {"note": 1}
    assert _codes(again.poll()) == EVENTS[4:6]
    assert not list(tmp_path.glob("*.tmp"))


def test_an_unfinished_event_left_in_a_rotated_file_is_skipped_once_it_settles(tmp_path):
    log = tmp_path / "EventLog"
    log.write_bytes(b"".join(EVENTS[:2]) + EVENTS[2][:30])
    follower = Follower([log], tmp_path / "state.json", settle_seconds=0.2)
    follower.poll()
    os.rename(log, tmp_path / "EventLog.old")
    log.write_bytes(EVENTS[3])
    assert follower.poll() == []  # the rotated file may still be written: wait
    time.sleep(0.3)
    assert _codes(follower.poll()) == [EVENTS[3]]
    assert follower.bad_records == 1


def test_bad_records_are_counted_and_skipped(tmp_path):
    log = tmp_path / "EventLog"
    log.write_bytes(EVENTS[0] + b"012 (1.0.0) 2026-02-31 10:00:00 Job was held.\n...\n" + EVENTS[1])
    follower = Follower([log], tmp_path / "state.json")
    assert _codes(follower.poll()) == EVENTS[:2]
    assert follower.bad_records == 1


def test_a_state_file_that_is_not_one_is_refused(tmp_path):
    (tmp_path / "state.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="state.json: not a follower state file"):
        Follower([tmp_path / "EventLog"], tmp_path / "state.json")
    with pytest.raises(InputError, match="no such folder"):
        Follower([tmp_path / "nowhere" / "EventLog"], tmp_path / "s.json")
