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
    jobs, problems, _ = read_trace(ROOT / "jobaware" / "data" / "real" / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    assert len(jobs) == 28_476 and not problems
    assert jobs["time_req_s"].notna().all() and jobs["mem_used_mb"].isna().all()


COSMIC = ROOT / "jobaware" / "data" / "real" / "condor-more" / "CosmicRay__job.log"


def test_an_htcondor_event_log_maps_its_terminated_jobs_onto_the_table_memory_per_cpu():
    from jobaware.sizing.reader import read_event_log

    jobs, problems, quarantined = read_event_log(COSMIC)
    assert len(jobs) == 378 and not problems and not quarantined
    assert set(jobs["cluster"]) == set(jobs["user"]) == {"CosmicRay__job.log"}
    job = jobs.set_index("job_id").loc[59211698 * 1_000_000 + 2]  # 209 MB peak of 3000 asked, 4 CPUs
    assert (job["procs"], job["mem_req_mb"], job["mem_used_mb"], job["status"]) == (4, 750.0, 52.25, "COMPLETED")
    assert job["time_req_s"] != job["time_req_s"] and 0 < job["run_s"] <= 54 * 60 + 40
    assert job["end_time"] == __import__("pandas").Timestamp("2020-07-14 14:46:45", tz="UTC")
    # a DAGMan log: the node's name without its trailing number is the job's name
    nodes = read_event_log(ROOT / "jobaware" / "data" / "real" / "condor" / "mldag_ospool_pretraining.dag.nodes.log")[0]
    assert "run0-train_epoch" in set(nodes["name"]) and not nodes["name"].str.contains(r"\d$").any()


def test_ingest_takes_a_folder_of_event_logs_and_traces_and_refuses_what_is_neither(tmp_path):
    folder = tmp_path / "logs"
    (folder / "deeper").mkdir(parents=True)
    (folder / "deeper" / "cosmic.log").write_bytes(COSMIC.read_bytes())
    (folder / "site.swf").write_text(HEADER + _line())
    (folder / "notes.txt").write_text("not a log\n")
    report = ingest([str(folder)], tmp_path / "out")
    table = pq.read_table(tmp_path / "out" / f"{CONTRACT}.parquet").to_pandas()
    assert report.rows == 379 and sorted(table["cluster"].unique()) == ["cosmic.log", "site"]
    with pytest.raises(InputError, match=r"notes.txt: not a Standard Workload Format trace .*, an HTCondor event log"):
        ingest([str(folder / "notes.txt")], tmp_path / "out")


def test_an_nrel_eagle_table_maps_onto_the_table_in_either_encoding():
    import pandas as pd

    from jobaware.sizing.reader import read_source
    from tests.conftest import NREL_CSV, NREL_JSON

    jobs, problems, quarantined = read_source(str(NREL_CSV))
    assert len(jobs) == 700 and not problems and not quarantined
    first = jobs.iloc[0]  # 532209,user0014,account0003,partition001,normal,172800.0,10,10,0,0.0,2019-01-01 08:55:55,...
    assert (first["cluster"], first["job_id"], first["user"], first["group"], first["queue"], first["name"]) == (
        "eagle_sample_jobs", 532209, "user0014", "account0003", "partition001", "name00005115")
    assert (first["procs"], first["time_req_s"], first["run_s"], first["status"], first["line"]) == (
        10, 172800, 99825, "COMPLETED", 2)
    assert first["submit_time"] == pd.Timestamp("2019-01-01 08:55:55", tz="UTC")
    assert first["end_time"] == pd.Timestamp("2019-01-02 12:39:41", tz="UTC")
    assert jobs["status"].value_counts().to_dict() == {"COMPLETED": 689, "FAILED": 11}  # TIMEOUT is a failed end
    assert jobs["mem_req_mb"].isna().all() and jobs["mem_used_mb"].isna().all()
    assert jobs["job_id"].duplicated().sum() == 345  # an array's tasks share its id: each is a job of its own
    same = read_source(str(NREL_JSON))[0]
    pd.testing.assert_frame_equal(jobs.drop(columns=["line"]), same.drop(columns=["line"]))
    assert same["line"].tolist() == list(range(1, 701))  # the JSON records' numbers


def test_an_eagle_table_s_bad_records_are_quarantined_and_unfinished_jobs_have_no_use(tmp_path):
    from jobaware.sizing.reader import read_source
    from tests.conftest import NREL_CSV

    lines = NREL_CSV.read_text().splitlines()
    running = lines[2].replace(",COMPLETED,", ",RUNNING,")
    negative = lines[3].replace(",172800.0,", ",-5,")
    table = tmp_path / "site.csv"
    table.write_text("\n".join([lines[0], lines[1], running, negative, lines[4]]) + "\n")
    jobs, problems, quarantined = read_source(str(table))
    assert jobs["line"].tolist() == [2, 3, 5] and [(p.line, p.field) for p in problems] == [(4, "wallclock_req")]
    assert [q["line"] for q in quarantined] == [4]
    assert jobs[["status", "run_s", "end_time"]].iloc[1].isna().all()  # still running: nothing used yet
    assert jobs[["status", "run_s", "end_time"]].drop(index=1).notna().all().all()


def test_a_folder_s_csv_that_is_no_job_table_is_left_out_and_refused_when_named(tmp_path):
    from jobaware.sizing.reader import source_paths
    from tests.conftest import NREL_CSV

    (tmp_path / "eagle.csv").write_bytes(NREL_CSV.read_bytes())
    (tmp_path / "workflows.csv").write_text("file,workflow\nx.log,y\n")
    assert source_paths(str(tmp_path)) == [str(tmp_path / "eagle.csv")]
    with pytest.raises(InputError, match=r"workflows.csv: not a Standard Workload Format trace .*, an NREL Eagle job table"):
        source_paths(str(tmp_path / "workflows.csv"))


def test_an_eagle_table_with_a_header_alone_has_no_jobs_and_no_error(tmp_path):
    from jobaware.sizing.reader import read_source
    from tests.conftest import NREL_CSV

    table = tmp_path / "empty.csv"
    table.write_text(NREL_CSV.read_text().splitlines()[0] + "\n")
    jobs, problems, quarantined = read_source(str(table))
    assert list(jobs.columns) == list(SIZING_JOBS.names) and not len(jobs) and not problems and not quarantined
