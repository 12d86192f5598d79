"""The event-log reader: agreement with HTCondor's own reader, dates, bodies, overlaps, bad records, ingest."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import htcondor2
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from jobaware.errors import InputError
from jobaware.hold.events import EVENT_NAMES
from jobaware.hold.reader import ReadOptions, ingest, read_events, read_stats, resolve_sources
from tests.jobaware.hold.conftest import CONDOR, MORE_LOGS, REAL_LOGS, STANDALONE


def official(path: Path) -> list[tuple]:
    """What htcondor2.JobEventLog reads: type, job id, epoch seconds, EventTime, and 012's hold code and subcode.

    HTCondor dates a year-less header in the CURRENT local year (condor_event.cpp: "use the year of the current
    timestamp", no roll-over) and turns the local wall clock into epoch seconds with mktime; a `Z` date with timegm."""
    rows = []
    for event in htcondor2.JobEventLog(str(path)).events(stop_after=0):
        ad = dict(event)
        held = int(event.type) == 12
        rows.append((int(event.type), event.cluster, event.proc, ad.get("Subproc", -1), event.timestamp,
                     ad["EventTime"], ad.get("HoldReasonCode") if held else None,
                     ad.get("HoldReasonSubCode") if held else None))
    return rows


def ours(path: Path, year: int) -> list[tuple]:
    """The same fields from jobaware's table; a hold without a Code line is 0/0 in HTCondor's reader, null here."""
    events, report = read_events([str(path)], ReadOptions(year=year))
    assert report.bad_rows == 0
    rows = []
    for r in events.itertuples():
        held = r.event_code == 12
        epoch = int(time.mktime(r.time.to_pydatetime().timetuple())) if not r.utc else int(r.time.timestamp())
        rows.append((int(r.event_code), int(r.cluster), int(r.proc), int(r.subproc), epoch,
                     r.time.isoformat() + ("Z" if r.utc else ""),
                     (0 if pd.isna(r.code) else int(r.code)) if held else None,
                     (0 if pd.isna(r.subcode) else int(r.subcode)) if held else None))
    return rows


BLANK_LINE_BETWEEN_EVENTS = {"stat405project__job.log": 533}  # index of the "..." line a blank line follows


@pytest.mark.parametrize("path", REAL_LOGS + MORE_LOGS, ids=lambda p: p.name)
def test_every_real_sample_reads_as_htcondor_reads_it(path):
    expected = official(path)
    assert expected, "the official reader found no event"
    read = ours(path, time.localtime().tm_year)
    if path.name in BLANK_LINE_BETWEEN_EVENTS:  # HTCondor's reader stops at an empty line between two events;
        lines = path.read_text().splitlines()  # jobaware's goes on (the events after it are whole and valid)
        assert lines[BLANK_LINE_BETWEEN_EVENTS[path.name] + 1] == "" and lines[BLANK_LINE_BETWEEN_EVENTS[path.name]] == "..."
        assert read[:len(expected)] == expected and len(read) > len(expected)
        return
    assert read == expected


def test_a_generated_global_log_reads_as_htcondor_reads_it(synthetic):
    expected = official(synthetic[0])
    assert len(expected) > 50_000
    assert ours(synthetic[0], time.localtime().tm_year) == expected


def test_iso_t_fraction_and_utc_dates_read_as_htcondor_reads_them(tmp_path):
    log = tmp_path / "iso.log"
    log.write_text("000 (7.000.000) 2025-06-01T10:00:00.250Z Job submitted from host: <1.2.3.4:9618>\n...\n"
                   "001 (7.000.000) 2025-06-01 10:00:05.5 Job executing on host: <1.2.3.5:9618>\n...\n")
    events, _ = read_events([str(log)])
    assert events["utc"].tolist() == [True, False]
    assert events["time"].tolist() == [pd.Timestamp("2025-06-01 10:00:00.250"), pd.Timestamp("2025-06-01 10:00:05.500")]
    assert [row[:5] for row in ours(log, 2025)] == [row[:5] for row in official(log)]


def test_every_event_code_has_its_name(tmp_path):
    log = tmp_path / "codes.log"
    log.write_text("".join(f"{code:03d} (1.000.000) 2025-01-01 00:00:{code % 60:02d} text\n...\n" for code in range(48))
                   + "060 (1.000.000) 2025-01-01 00:01:00 newer\n...\n")
    events, report = read_events([str(log)])
    assert report.bad_rows == 0
    assert events["event_name"].tolist() == list(EVENT_NAMES) + ["FUTURE_EVENT"]
    assert EVENT_NAMES[12] == "JOB_HELD" and EVENT_NAMES[40] == "FILE_TRANSFER" and EVENT_NAMES[47] == "COMMON_FILES"


# ---------------------------------------------------------------- the year of year-less dates
ROLLOVER = ("000 (5.000.000) 12/31 23:59:50 Job submitted from host: <1.2.3.4:9618>\n...\n"
            "001 (5.000.000) 12/31 23:59:58 Job executing on host: <1.2.3.5:9618>\n...\n"
            "005 (5.000.000) 01/01 00:00:07 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n")


def test_year_less_dates_roll_over_into_the_next_year(tmp_path):
    log = tmp_path / "old.log"
    log.write_text(ROLLOVER)
    events, _ = read_events([str(log)], ReadOptions(year=2025))
    assert events["time"].dt.year.tolist() == [2025, 2025, 2026]
    assert events["time"].is_monotonic_increasing


def test_without_a_year_the_last_date_lies_in_the_year_of_the_file_time(tmp_path):
    log = tmp_path / "old.log"
    log.write_text(ROLLOVER)
    written = time.mktime((2031, 1, 1, 12, 0, 0, 0, 0, -1))
    os.utime(log, (written, written))
    events, _ = read_events([str(log)])
    assert events["time"].dt.year.tolist() == [2030, 2030, 2031]
    written = time.mktime((2031, 1, 1, 0, 0, 1, 0, 0, -1))  # written before 01/01 00:00:07: that was a year earlier
    os.utime(log, (written, written))
    events, _ = read_events([str(log)])
    assert events["time"].dt.year.tolist() == [2029, 2029, 2030]


def test_an_iso_date_sets_the_year_of_the_year_less_dates_after_it(tmp_path):
    log = tmp_path / "mixed.log"
    log.write_text("000 (5.000.000) 2019-12-30 08:00:00 Job submitted from host: <1.2.3.4:9618>\n...\n"
                   "001 (5.000.000) 12/31 09:00:00 Job executing on host: <1.2.3.5:9618>\n...\n"
                   "004 (5.000.000) 01/02 10:00:00 Job was evicted.\n...\n")
    events, _ = read_events([str(log)], ReadOptions(year=2000))
    assert events["time"].tolist() == [pd.Timestamp("2019-12-30 08:00:00"), pd.Timestamp("2019-12-31 09:00:00"),
                                       pd.Timestamp("2020-01-02 10:00:00")]


def test_a_generated_year_less_log_reads_as_its_iso_twin(tmp_path):
    from jobaware.hold import synth

    synth.write(tmp_path / "iso.log", 300, seed=3)
    synth.write(tmp_path / "old.log", 300, seed=3, year_less=True)
    iso, _ = read_events([str(tmp_path / "iso.log")])
    old, _ = read_events([str(tmp_path / "old.log")], ReadOptions(year=int(synth.START.year)))
    assert len(iso) > 1000
    pd.testing.assert_series_equal(iso["time"], old["time"])
    pd.testing.assert_series_equal(iso["event_code"], old["event_code"])


# ---------------------------------------------------------------- bodies
def test_hold_release_abort_and_termination_bodies_are_parsed():
    events, _ = read_events([str(STANDALONE / "metl_12636334.log")])
    holds = events[events["event_code"] == 12]
    assert holds[["code", "subcode"]].astype(int).values.tolist() == [[1, 0], [26, 103], [26, 103], [26, 103], [26, 103]]
    assert holds["via"].iloc[0] == "condor_hold" and holds["by_user"].iloc[0] == "ian.ross"
    assert holds["reason"].iloc[1] == "Memory usage exceeded request_memory"
    released = events[events["event_code"] == 13]
    assert set(released["via"]) == {"condor_release"} and set(released["by_user"]) == {"ian.ross"}
    aborted = events[events["event_code"] == 9].iloc[0]
    assert (aborted["via"], aborted["by_user"], aborted["reason"]) == ("condor_rm", "ian.ross", "via condor_rm (by user ian.ross)")
    evicted = events[(events["event_code"] == 4) & events["code"].notna()]
    assert evicted[["code", "subcode"]].astype(int).values.tolist() == [[1007, 0], [1008, 0]]


def test_termination_return_value_signal_and_transfer_direction():
    events, _ = read_events([str(CONDOR / "mldag_metl_aws.log")])
    ended = events[events["event_code"] == 5]
    assert ended["terminated_normally"].all()
    assert set(ended["return_value"].dropna().astype(int)) >= {0, 1}
    transfers = events[events["event_code"] == 40]
    assert transfers["direction"].notna().all() and transfers["stage"].notna().all()
    assert (transfers["text"].str.startswith("Started") == (transfers["stage"] == "started")).all()
    assert (transfers["text"].str.contains("input") == (transfers["direction"] == "input")).all()
    evicted = events[(events["event_code"] == 4) & (events["code"] == 1023)]
    assert evicted["reason"].iloc[0].startswith("DAG Removed")
    test_log, _ = read_events([str(CONDOR / "htcondor_test_condor.log")])
    abnormal = test_log[(test_log["event_code"] == 5) & (test_log["terminated_normally"] == False)]  # noqa: E712
    assert len(abnormal) and (abnormal["signal"] == -1).all() and abnormal["return_value"].isna().all()


def test_numbers_too_long_for_their_columns_leave_those_fields_empty(tmp_path):
    """A return value, signal, hold code or subcode out of an int32's range leaves that field empty, the rest of
    its line read (the event is kept), not an ArrowInvalid from the whole file; found by the reader fuzzer. A
    10-digit subcode that fits is kept, with its code (found by the generated hold requests)."""
    log = tmp_path / "EventLog"
    log.write_text(
        "005 (1.000.000) 2025-02-01 10:00:00 Job terminated.\n\t(0) Abnormal termination (signal 99999999999999999999)\n...\n"
        "005 (2.000.000) 2025-02-01 10:00:01 Job terminated.\n\t(1) Normal termination (return value -9223372036854775808)\n...\n"
        "012 (3.000.000) 2025-02-01 10:00:02 Job was held.\n\tToo long\n\tCode 12345678901 Subcode 0\n...\n"
        "005 (4.000.000) 2025-02-01 10:00:03 Job terminated.\n\t(1) Normal termination (return value 999999999)\n...\n"
        "012 (5.000.000) 2025-02-01 10:00:04 Job was held.\n\tBig subcode\n\tCode 1 Subcode 1000000000\n...\n"
        "012 (6.000.000) 2025-02-01 10:00:05 Job was held.\n\tToo big\n\tCode 7 Subcode 2147483648\n...\n")
    events, report = read_events([str(log)])
    assert len(events) == 6 and report.bad_rows == 0
    assert events["signal"].isna().all() and events["return_value"].iloc[:2].isna().all()
    assert events["terminated_normally"].iloc[:2].tolist() == [False, True]
    assert events["return_value"].iloc[3] == 999_999_999
    held = events[events["event_code"] == 12]
    assert held["code"].tolist()[0] is pd.NA and held["code"].iloc[1:].tolist() == [1, 7]
    assert held["subcode"].iloc[:2].tolist() == [0, 1_000_000_000] and held["subcode"].iloc[2] is pd.NA


def test_job_ad_events_become_json_objects_of_their_key_value_lines():
    events, _ = read_events([str(CONDOR / "htcondor_python_bindings_test_log.txt")])
    ads = [json.loads(a) for a in events.loc[events["event_code"] == 28, "job_ad"]]
    assert len(ads) == 2
    assert ads[0]["TriggerEventTypeName"] == '"ULOG_SUBMIT"' and ads[0]["CurrentTime"] == "time()"
    assert ads[1]["LogNotes"] == '"DAG Node: Job2"' and ads[1]["Cluster"] == "236468"


# ---------------------------------------------------------------- blocks, files, overlaps
def test_small_blocks_give_the_same_table(synthetic, tmp_path):
    text = synthetic[0].read_bytes()[:3 << 20]
    part = tmp_path / "part.log"
    part.write_bytes(text[:text.rfind(b"\n...\n") + 5])
    whole, _ = read_events([str(part)])
    pieces, _ = read_events([str(part)], ReadOptions(block_bytes=8192))
    assert len(whole) > 10_000
    pd.testing.assert_frame_equal(whole, pieces)


def test_overlapping_rotated_files_and_exact_duplicates_are_read_once_in_time_order(synthetic, tmp_path):
    text = synthetic[0].read_bytes()
    events = [e + b"...\n" for e in text.split(b"...\n")[:-1]]
    third = len(events) // 3
    older, newer = tmp_path / "EventLog.old", tmp_path / "EventLog"
    older.write_bytes(b"".join(events[:2 * third]))
    newer.write_bytes(b"".join(events[third:]))  # the middle third is in both files
    whole, _ = read_events([str(synthetic[0])])
    # named newest first: the reader orders them by their first event
    both, report = read_events([str(newer), str(older)])
    columns = ["event_code", "cluster", "proc", "subproc", "time", "text", "code", "subcode"]
    pd.testing.assert_frame_equal(both[columns], whole[columns])
    assert report.rows == len(whole) and report.bad_rows == 0
    assert both["seq"].tolist() == list(range(len(whole)))
    concatenated = tmp_path / "cat.log"
    concatenated.write_bytes(older.read_bytes() + newer.read_bytes())
    once, _ = read_events([str(concatenated)])
    pd.testing.assert_frame_equal(once[columns], whole[columns])
    twice, _ = read_events([str(synthetic[0]), str(synthetic[0])])  # the same file named twice is read once
    assert len(twice) == len(whole)


def test_repeated_identical_events_within_one_log_are_kept():
    events, _ = read_events([str(CONDOR / "htcondor_test_condor.log")])
    header = events[["event_code", "cluster", "time", "text"]]
    assert header.duplicated().any(), "the sample has identical events in one segment"
    assert len(events) == len(official(CONDOR / "htcondor_test_condor.log"))


def test_globs_folders_and_missing_files(tmp_path):
    assert resolve_sources([str(STANDALONE / "metl_1263*.log")]) == sorted(STANDALONE.glob("metl_1263*.log"))
    assert len(resolve_sources([str(STANDALONE)])) == 6
    assert resolve_sources([str(CONDOR)]) == sorted(p for p in CONDOR.iterdir() if p.suffix in (".log", ".txt"))
    with pytest.raises(InputError, match="no such file"):
        resolve_sources([str(tmp_path / "missing.log")])
    with pytest.raises(InputError, match="the pattern matches no file"):
        resolve_sources([str(tmp_path / "*.log")])


# ---------------------------------------------------------------- bad records
GOOD = "000 (9.000.000) 2025-02-01 10:00:00 Job submitted from host: <1.2.3.4:9618>\n...\n"
BROKEN = (GOOD                                                           # line 1
          + "012 (9.000.000) 2025-02-01 10:00:05 Job was held.\n\tno terminator\n"  # line 3: runs into the next
          + "013 (9.000.000) 2025-02-30 10:00:06 Job was released.\n...\n"  # line 5: no such date
          + "001 (9.x.0) 2025-02-01 10:00:07 Job executing\n...\n"          # line 7: bad job id
          + "garbage line\n...\n"                                         # line 9: no header
          + "...\n"                                                       # line 11: lone terminator
          + GOOD.replace("000", "006").replace("10:00:00", "10:00:09")     # line 12: fine
          + "005 (9.000.000) 2025-02-01 10:00:10 Job terminated.\n\t(1) Normal termination (return value 0)\n")  # 14


def test_bad_records_are_skipped_counted_and_located(tmp_path):
    log = tmp_path / "broken.log"
    log.write_text(BROKEN)
    events, report = read_events([str(log)])
    assert events["event_code"].tolist() == [0, 6]
    assert report.rows == 2 and report.bad_rows == 6
    lines = [p.line for p in report.problems]
    assert lines == [3, 5, 7, 9, 11, 14]
    reasons = " | ".join(p.reason for p in report.problems)
    for words in ("no '...' terminator", "no such date", "job id", "no event header", "without an event", "truncated"):
        assert words in reasons
    assert all(p.file == str(log) for p in report.problems)


def test_strict_mode_stops_at_the_first_bad_record(tmp_path):
    log = tmp_path / "broken.log"
    log.write_text(BROKEN)
    with pytest.raises(InputError, match=r"broken\.log:3: .*strict"):
        read_events([str(log)], strict=True)


def test_ingest_writes_the_table_its_quarantine_and_read_statistics(tmp_path):
    from jobaware import contracts

    log = tmp_path / "broken.log"
    log.write_text(BROKEN)
    out = tmp_path / "dataset"
    report = ingest([str(STANDALONE / "metl_12634379.log"), str(log)], out)
    table = pq.read_table(out / "condor_events.parquet")
    assert table.num_rows == report.rows == 2 + 106
    quarantine = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    assert [q["line"] for q in quarantine] == [3, 5, 7, 9, 11, 14] and quarantine[0]["file"] == str(log)
    assert read_stats(out / "condor_events.parquet")["files"] == [str(log), str(STANDALONE / "metl_12634379.log")]
    result = contracts.validate_parquet(out / "condor_events.parquet", "condor_events")
    assert result["success"], contracts.format_report(result)


def test_the_contract_refuses_a_broken_table(tmp_path):
    from jobaware import contracts

    ingest([str(STANDALONE / "metl_12634379.log")], tmp_path)
    table = pq.read_table(tmp_path / "condor_events.parquet").to_pandas()
    table.loc[0, "event_name"] = "NOT_AN_EVENT"
    table.loc[1, "seq"] = table.loc[2, "seq"]
    result = contracts.validate_frames([table], "condor_events")
    failed = {(f["expectation"], f["column"]) for f in result["failed"]}
    assert ("expect_column_values_to_be_in_set", "event_name") in failed
    assert ("expect_column_values_to_be_unique", "seq") in failed


def test_real_logs_ingest_within_their_contract(tmp_path):
    from jobaware import contracts

    ingest([str(p) for p in REAL_LOGS], tmp_path)
    result = contracts.validate_parquet(tmp_path / "condor_events.parquet", "condor_events")
    assert result["success"], contracts.format_report(result)
    assert np.array_equal(pq.read_table(tmp_path / "condor_events.parquet", columns=["seq"])["seq"].to_numpy(),
                          np.arange(result["rows"]))
