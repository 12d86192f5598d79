import json

import pyarrow.parquet as pq
import pytest

from jobaware.errors import InputError
from jobaware.sizing.reader import ingest, read_trace
from jobaware.sizing.schema import CONTRACT, SIZING_JOBS
from tests.conftest import ROOT

HEADER = "; UnixStartTime: 1000000000\n; TimeZoneString: UTC\n"


def _line(job=1, submit=0, run=100, procs=4, time_req=600, mem_used=1024, mem_req=2048, status=1, user=7):
    return (f"{job} {submit} 5 {run} {procs} -1 {mem_used} {procs} {time_req} {mem_req} {status} {user} 2 3 1 -1 -1 "
            "-1\n")


def test_a_trace_maps_onto_the_table_with_unknowns_and_zero_requests_as_null(tmp_path):
    trace = tmp_path / "site.swf"
    trace.write_text(HEADER + _line() + _line(job=2, submit=10, time_req=0, mem_req=-1, mem_used=-1, run=-1))
    jobs, problems, quarantined = read_trace(trace)
    assert not problems and not quarantined
    first, second = jobs.iloc[0], jobs.iloc[1]
    assert (first["cluster"], first["user"], first["group"], first["name"]) == ("site", "user7", "group2", "exe3")
    assert first["time_req_s"] == 600 and first["mem_req_mb"] == 2.0 and first["mem_used_mb"] == 1.0
    assert first["run_s"] == 100 and first["end_time"] - first["submit_time"] == __import__("pandas").Timedelta(seconds=105)
    assert [second[c] != second[c] for c in ("time_req_s", "mem_req_mb", "mem_used_mb", "run_s")] == [True] * 4


def test_negative_run_times_and_absurd_memory_are_quarantined_with_file_line_and_field(tmp_path):
    trace = tmp_path / "bad.swf"
    trace.write_text(HEADER + _line() + _line(job=2, run=-5) + _line(job=3, mem_req=2 * 10**12) + _line(job=4))
    jobs, problems, quarantined = read_trace(trace)
    assert jobs["job_id"].tolist() == [1, 4]
    assert [(p.line, p.field) for p in problems] == [(4, "run"), (5, "mem_req")]
    assert "negative" in problems[0].reason and "MB per processor" in problems[1].reason
    assert [q["line"] for q in quarantined] == [4, 5]


def test_ingest_writes_the_table_and_the_quarantine(tmp_path):
    trace = tmp_path / "bad.swf"
    trace.write_text(HEADER + _line() + _line(job=2, run=-5))
    report = ingest([str(trace)], tmp_path / "out")
    table = pq.read_table(tmp_path / "out" / f"{CONTRACT}.parquet")
    assert table.schema.names == SIZING_JOBS.names and table.num_rows == 1 and report.bad_rows == 1
    assert json.loads((tmp_path / "out" / "quarantine.jsonl").read_text())["line"] == 4


def test_what_is_not_a_trace_is_refused_in_one_line(tmp_path):
    wrong = tmp_path / "jobs.csv"
    wrong.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"jobs.csv: not a Standard Workload Format trace"):
        ingest([str(wrong)], tmp_path / "out")


def test_the_real_traces_read_whole():
    jobs, problems, _ = read_trace(ROOT / "data" / "real" / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    assert len(jobs) == 28_476 and not problems
    assert jobs["time_req_s"].notna().all() and jobs["mem_used_mb"].isna().all()
