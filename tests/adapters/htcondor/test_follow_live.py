"""The follower as a process beside a log being written: holds audited within a second, through a rotation in the
middle of an event and an unfinished last event; a SIGKILL and restart neither lose nor repeat a hold."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from harness.ports import stop
from jobaware.audit import read_records
from tests.adapters.htcondor.conftest import ADAPTER, CONDOR, ROOT, real_events
from tests.adapters.htcondor.test_adapter import renumber

TEMPLATE = real_events(CONDOR / "mldag_standalone" / "metl_12634462.log")  # 217 events, 3 holds


def _start(log: Path, audit: Path, seconds: float = 90) -> subprocess.Popen:
    return subprocess.Popen([*ADAPTER, "follow", "--input", str(log), "--audit", str(audit), "--seconds", str(seconds)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(audit.with_suffix(".err"), "wb"),
                            start_new_session=True)


def _hold_keys(audit: Path) -> list[tuple[str, str]]:
    if not audit.exists():
        return []
    return [(r["job"], r["hold_time"]) for r in read_records(audit) if r["kind"] == "hold"]


def _wait(condition, seconds: float) -> float:
    """Seconds until `condition()` held (bounded); fails past `seconds`."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "timed out"
        time.sleep(0.02)
    return time.monotonic() - start


def test_holds_appended_while_it_runs_are_audited_within_a_second(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    jobs = [renumber(TEMPLATE, 500 + n) for n in range(4)]
    writer = open(log, "ab")
    writer.write(jobs[0][0])
    writer.flush()
    process = _start(log, audit)
    try:
        _wait(lambda: Path(str(audit) + ".state.json").exists(), 120)  # started and read the first event
        latencies = []
        for n, events in enumerate(jobs):
            for i, event in enumerate(events[1:] if n == 0 else events):
                if n == 2 and i == 50:  # rotation to .old in the middle of an event (the handle finishes it)
                    writer.write(event[:25])
                    writer.flush()
                    os.rename(log, tmp_path / "EventLog.old")
                    writer.write(event[25:])
                    writer.close()
                    writer = open(log, "ab")
                    continue
                writer.write(event)
                writer.flush()
                if event.startswith(b"012 "):
                    expected = len(_hold_keys(audit)) + 1
                    latencies.append(_wait(lambda: len(_hold_keys(audit)) >= expected, 10))  # noqa: B023
        held = renumber([TEMPLATE[[e[:3] for e in TEMPLATE].index(b"012")]], 999)[0]
        writer.write(held[:-5])  # an unfinished last event: a hold not yet whole
        writer.flush()
        time.sleep(1.0)
    finally:
        writer.close()
        stop(process)
    keys = _hold_keys(audit)
    assert len(keys) == 12 and len(set(keys)) == 12 and not any(job.startswith("999.") for job, _ in keys)
    assert max(latencies) < 1.0, latencies
    print(f"hold -> audit record: median {sorted(latencies)[len(latencies) // 2]:.3f} s, max {max(latencies):.3f} s")


def test_a_sigkill_and_a_restart_neither_lose_nor_repeat_a_hold(tmp_path):
    log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
    jobs = [renumber(TEMPLATE, 700 + n) for n in range(6)]
    log.write_bytes(jobs[0][0])
    process = _start(log, audit)
    written = sum(e.startswith(b"012 ") for events in jobs for e in events)
    try:
        _wait(lambda: Path(str(audit) + ".state.json").exists(), 120)
        with open(log, "ab") as writer:
            writer.write(b"".join(e for events in jobs[:3] for e in events)[len(jobs[0][0]):])
        _wait(lambda: len(_hold_keys(audit)) >= 1, 30)
        os.killpg(process.pid, signal.SIGKILL)  # killed in the middle of its work on nine holds
        process.wait(30)
        with open(log, "ab") as writer:
            writer.write(b"".join(e for events in jobs[3:] for e in events))
        before = len(_hold_keys(audit))
        assert 0 < before < written
        process = _start(log, audit)
        _wait(lambda: len(_hold_keys(audit)) >= written, 120)
        time.sleep(0.5)  # nothing more comes
    finally:
        stop(process)
    keys = _hold_keys(audit)
    assert len(keys) == written == 18 and len(set(keys)) == 18
    outcomes = [r["id"] for r in read_records(audit) if r["kind"] == "outcome"]
    first_hold = [e[:3] for e in TEMPLATE].index(b"012")
    per_job = sum(e[:3] in (b"013", b"005", b"009") for e in TEMPLATE[first_hold:])
    assert len(outcomes) == len(set(outcomes)) == 6 * per_job == 6 * 4  # three releases, a termination: once each


def test_a_follower_started_before_its_log_is_written_waits_then_decides_each_hold(tmp_path):
    """A follower unit starts beside a new schedd: the event log is not there yet, or there and empty. It waits,
    saying so once, then follows the log as usual: each hold written is decided (by the site rule, no service here)
    and audited. Issue 51 found it refused both at once ('no such file or folder', 'empty file'), so the unit died."""
    holds = sum(event.startswith(b"012 ") for event in TEMPLATE)
    for start in ("missing", "empty"):
        log, audit = tmp_path / start / "EventLog", tmp_path / start / "audit.jsonl"
        log.parent.mkdir()
        if start == "empty":
            log.write_bytes(b"")
        process = _start(log, audit)
        said = audit.with_suffix(".err")
        try:
            _wait(lambda: "waiting for" in said.read_text() or process.poll() is not None, 120)  # noqa: B023
            time.sleep(1.0)
            assert process.poll() is None, said.read_text()  # waiting, not refused
            assert f"waiting for {log} to be written\n" in said.read_text()
            with open(log, "ab") as writer:
                for event in renumber(TEMPLATE, 4242):
                    writer.write(event)
                    writer.flush()
            _wait(lambda: len(_hold_keys(audit)) >= holds, 30)  # noqa: B023
        finally:
            stop(process)
        decided = [record for record in read_records(audit) if record["kind"] == "hold"]
        assert len(decided) == holds == 3 and all(record["job"].startswith("4242.") for record in decided)
        assert all(record["fired"] and record["recommended"] for record in decided), decided
        assert said.read_text().count("waiting for") == 1, said.read_text()
