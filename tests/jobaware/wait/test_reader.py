import gzip
import json

import pandas as pd
import pytest

from jobaware.bodies import parse_body
from jobaware.errors import InputError
from jobaware.wait.reader import ingest, read_trace, squeue_body, squeue_jobs
from jobaware.wait.service import WaitRequest
from tests.conftest import KTH, REAL, SQUEUE

HEADER = "; UnixStartTime: 1000000000\n; TimeZoneString: Europe/Stockholm\n; MaxProcs: 64\n; Queue: 1 short\n"


def line(job, submit, wait, run=100, procs=4, req=600, user=3, queue=1, status=1):
    return f"{job} {submit} {wait} {run} {procs} -1 -1 {procs} {req} -1 {status} {user} 2 -1 {queue} -1 -1 -1"


def test_the_kth_trace_maps_onto_queue_jobs_in_utc():
    jobs, problems, quarantined = read_trace(KTH)
    assert len(jobs) == 28_476 and not problems and not quarantined
    first = jobs.iloc[0]
    # 843480031 + 599850 s is 1996-09-30 10:38:01 UTC (12:38:01 in Stockholm)
    assert first["submit_time"] == pd.Timestamp("1996-09-30 10:38:01", tz="UTC")
    assert first["cluster"] == "KTH-SP2-1996-2.1-cln" and first["cluster_procs"] == 100
    assert first["timezone"] == "Europe/Stockholm" and first["user"] == "user12" and first["group"] == "group12"
    waits = (jobs["start_time"] - jobs["submit_time"]).dt.total_seconds()
    assert (waits == jobs["wait_s"]).all() and (jobs["wait_s"] >= 0).all()


def test_a_gzip_trace_reads_as_itself_and_names_its_queues():
    jobs = read_trace(REAL / "swf-wait" / "SDSC-SP2-1998-4.2-cln.swf.gz")[0]
    assert len(jobs) == 59_715 and jobs["cluster"].iloc[0] == "SDSC-SP2-1998-4.2-cln"
    assert {"express", "high", "normal", "low", "standby"} <= set(jobs["queue"].dropna())


def test_bad_lines_and_a_job_number_seen_twice_are_quarantined_by_line(tmp_path):
    path = tmp_path / "t.swf.gz"
    text = HEADER + "\n".join([line(1, 0, 10), line(2, 5, -7), line(1, 9, 3), line(3, 20, 0)]) + "\n"
    path.write_bytes(gzip.compress(text.encode()))
    jobs, problems, quarantined = read_trace(path)
    assert list(jobs["job_id"]) == [1, 3]
    said = [str(p) for p in problems]
    assert said[0].endswith("t.swf.gz:6: field 'wait': negative (only -1, unknown, may be) (got '-7')")
    assert "t.swf.gz:7: field 'job': job number seen before in this trace" in said[1]
    assert sorted(q["line"] for q in quarantined) == [6, 7]


def test_ingest_writes_a_table_that_meets_its_contract(tmp_path):
    from jobaware.contracts import validate_parquet

    path = tmp_path / "t.swf"
    path.write_text(HEADER + "\n".join([line(1, 0, 10), line(2, 5, -1), line(3, 7, 0, run=-1)]) + "\n")
    report = ingest([str(path)], tmp_path / "dataset")
    assert report.rows == 3 and report.bad_rows == 0
    table = pd.read_parquet(tmp_path / "dataset" / "queue_jobs.parquet")
    assert table["wait_s"].isna().tolist() == [False, True, False] and pd.isna(table["end_time"].iloc[2])
    assert validate_parquet(tmp_path / "dataset" / "queue_jobs.parquet", "queue_jobs")["success"]


def test_a_file_that_is_not_a_trace_is_one_line(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,user\n1,a\n")
    with pytest.raises(InputError, match=r"jobs.csv: not a Standard Workload Format trace"):
        ingest([str(path)], tmp_path / "out")


def test_a_live_squeue_snapshot_becomes_a_wait_request():
    """The real squeue --json of the test cluster (Slurm 22.05): the pending jobs are asked about, the held one
    (JobHeldUser) is left out of the queue ahead, and the body is one the service takes."""
    payload = json.loads(SQUEUE.read_text())
    jobs = squeue_jobs(payload)
    assert [(j["job_id"], j["state"], j["reason"]) for j in jobs][2:] == [(3, "PENDING", "Resources"),
                                                                         (4, "PENDING", "JobHeldUser")]
    assert jobs[2]["priority"] == payload["jobs"][2]["priority"] and jobs[2]["eligible_time"] == 1795371680
    body = squeue_body(payload, now=1795371700)
    assert [j["job_id"] for j in body["jobs"]] == [3, 4] and [j["job_id"] for j in body["pending"]] == [3]
    assert body["jobs"][0]["wallclock_req"] == 60.0 and body["cluster"] == "jobaware-test"
    parse_body(WaitRequest, body)
    with pytest.raises(InputError, match="job 99: not in the queue squeue shows"):
        squeue_body(payload, [99], now=1795371700)


def test_a_job_kept_out_until_later_enters_the_queue_when_it_became_eligible():
    """As the store export trains it: a job held, waiting for a begin time or a dependency counts from its
    eligible time, for its own wait and as a job ahead; an eligible time still to come changes nothing."""
    payload = json.loads(SQUEUE.read_text())
    submitted = payload["jobs"][2]["submit_time"]
    payload["jobs"][2]["eligible_time"] = submitted + 600  # its begin time passed ten minutes after submission
    body = squeue_body(payload, now=submitted + 900)
    assert body["jobs"][0]["submit_time"] == body["pending"][0]["submit_time"] == submitted + 600
    later = squeue_body(payload, now=submitted + 300)  # not yet eligible: as squeue gives it
    assert later["jobs"][0]["submit_time"] == submitted


def test_a_later_slurm_s_wrapped_numbers_read_alike():
    payload = json.loads(SQUEUE.read_text())
    for record in payload["jobs"]:
        for name in ("time_limit", "cpus", "priority", "submit_time", "start_time"):
            record[name] = {"set": True, "infinite": False, "number": record[name]}
    assert squeue_jobs(payload) == squeue_jobs(json.loads(SQUEUE.read_text()))
    payload["jobs"][2]["job_id"] = "three"
    with pytest.raises(InputError, match=r"jobs\[2\].job_id: expected a job number"):
        squeue_jobs(payload)


@pytest.mark.parametrize("stated", ["0", "-5", "99999999999999999999", "many"])
def test_a_header_stating_no_usable_cluster_size_is_one_line_naming_it(tmp_path, stated):
    """A cluster of 0 processors (or more than any machine has) would size every queue by it: found by a hostile
    review, where `MaxProcs: 0` answered "0 of 0 processors free" and other waits, and a 20-digit one passed."""
    path = tmp_path / "t.swf"
    path.write_text(HEADER.replace("MaxProcs: 64", f"MaxProcs: {stated}") + line(1, 0, 10) + "\n")
    with pytest.raises(InputError, match=rf"t.swf:3: header MaxProcs: expected .*, got '{stated}'"):
        read_trace(path)


def test_a_header_with_no_cluster_size_leaves_it_unknown(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(HEADER.replace("; MaxProcs: 64\n", "") + line(1, 0, 10) + "\n")
    assert read_trace(path)[0]["cluster_procs"].isna().all()
    path.write_text(HEADER.replace("MaxProcs: 64", "MaxProcs: 338 (batch partition; 512 total)") + line(1, 0, 10) + "\n")
    assert read_trace(path)[0]["cluster_procs"].tolist() == [338]
