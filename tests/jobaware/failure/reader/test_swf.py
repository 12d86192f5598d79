import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.failure.reader import read_jobs
from jobaware.swf import parse_header
from tests.conftest import KTH, THUNDER

HEADER = "; Version: 2.2\n; UnixStartTime: 843480031\n; TimeZoneString: Europe/Stockholm\n; Queue: 1 batch\n; Partition: 2 big\n"


def line(job, submit, wait, run, status, procs=4, req=600, user=3, queue=1, partition=2):
    return f"{job} {submit} {wait} {run} {procs} -1 -1 {procs} {req} 1024 {status} {user} 7 5 {queue} {partition} -1 -1"


def test_kth_trace_maps_onto_the_canonical_table():
    jobs, report = read_jobs(KTH)
    assert len(jobs) == 28_476 and report.bad_rows == 0
    assert jobs["state"].value_counts().to_dict() == {"COMPLETED": 20_530, "FAILED": 7_946}
    first = jobs.iloc[0]
    # 843480031 + 599850 s is 1996-09-30 10:38:01 UTC, 12:38:01 in Stockholm (CEST)
    assert str(first["submit_time"]) == "1996-09-30 12:38:01"
    assert first["job_id"] == 15 and first["user"] == "user12" and first["account"] == "group12"
    assert first["processors_req"] == 4 and first["wallclock_req"] == 53940
    assert first["end_time"] - first["start_time"] == pd.Timedelta(seconds=3477)
    assert parse_header(KTH).fields["MaxProcs"] == "100"


def test_header_names_queues_and_partitions_and_memory_is_per_processor(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(HEADER + line(1, 0, 10, 100, 1) + "\n")
    job = read_jobs(path)[0].iloc[0]
    assert job["qos"] == "batch" and job["partition"] == "big" and job["name"] == "exe5"
    assert job["mem_req"] == 4.0  # 1024 KB per processor x 4 processors = 4 MB


def test_malformed_lines_are_reported_with_their_line_numbers(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(HEADER + line(1, 0, 10, 100, 1) + "\n1 2 3\n" + line(3, 5, 1, 1, 0).replace(" 600 ", " x ") + "\n")
    jobs, report = read_jobs(path)
    assert list(jobs["job_id"]) == [1]
    problems = [str(p) for p in report.problems]
    assert problems[0].endswith("t.swf:7: field '*': expected 18 whitespace-separated fields, got 3 (got '1 2 3')")
    assert "t.swf:8: field 'time_req': not a number (got 'x')" in problems[1]
    with pytest.raises(InputError, match="t.swf:7"):
        read_jobs(path, strict=True)


def test_partial_executions_fold_into_their_job(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(HEADER + "\n".join([
        line(1, 0, 10, 100, 2), line(1, 0, 200, 50, 4),   # two partial runs, the last failed
        line(2, 0, 10, 100, 2), line(2, 0, 300, 70, 3),   # two partial runs, the last completed
        line(3, 0, 10, 100, 2),                           # still going: no final state
        line(4, 5, 1, 1, 5),                              # cancelled
    ]) + "\n")
    jobs = read_jobs(path)[0].set_index("job_id")
    assert jobs.loc[1, "state"] == "FAILED" and jobs.loc[1, "run_time"] == 150
    assert jobs.loc[2, "state"] == "COMPLETED" and jobs.loc[2, "run_time"] == 170
    assert pd.isna(jobs.loc[3, "state"]) and jobs.loc[4, "state"] == "CANCELLED"
    assert jobs.loc[2, "end_time"] - jobs.loc[2, "submit_time"] == pd.Timedelta(seconds=370)
    training, report = read_jobs(path, require_state=True)
    assert 3 not in set(training["job_id"]) and "no final state" in str(report.problems[0])


def test_unknown_wait_and_request_leave_the_job_readable(tmp_path):
    """LLNL-Thunder records no wait and mostly no requested time: the end is the earliest possible one."""
    path = tmp_path / "t.swf"
    path.write_text("; UnixStartTime: 0\n; TimeZoneString: UTC\n" + "\n".join([line(1, 100, -1, 50, 1, req=-1), line(2, 200, -1, -1, 0), line(3, 300, 20, 10, 5)]) + "\n")
    jobs = read_jobs(path)[0].set_index("job_id")
    assert pd.isna(jobs.loc[1, "start_time"]) and jobs.loc[1, "end_time"] == pd.Timestamp(150, unit="s")
    assert pd.isna(jobs.loc[1, "wallclock_req"]) and pd.isna(jobs.loc[2, "end_time"])
    assert jobs.loc[3, "end_time"] == pd.Timestamp(330, unit="s") and jobs.loc[3, "state"] == "CANCELLED"


def test_thunder_trace_reads_and_meets_its_contract():
    from jobaware.contracts import validate_frames

    jobs, report = read_jobs(THUNDER)
    assert len(jobs) == 121_039 - 1_190 and report.bad_rows == 1_190  # the 1,190 lines with submit time -1
    assert jobs["wallclock_req"].isna().mean() > 0.6 and jobs["end_time"].notna().mean() > 0.99
    assert validate_frames([jobs], "swf_jobs")["success"]
