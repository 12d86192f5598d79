import pytest

from jobaware.failure.collector import collect
from jobaware.contracts import validate_frames
from jobaware.errors import InputError
from jobaware.failure.readers import read_jobs
from tests.conftest import SQUEUE


def test_collects_each_finished_job_once_in_nrel_format(tmp_path):
    out = tmp_path / "collected.csv"
    replay = ["cat", str(SQUEUE)]  # a real squeue --json capture, replayed
    assert collect(out, 2, 0.0, command=replay) == 2
    assert collect(out, 1, 0.0, command=replay) == 0
    jobs, report = read_jobs(out)
    assert report.bad_rows == 0 and sorted(jobs["state"]) == ["COMPLETED", "FAILED"]
    assert out.read_text().splitlines()[0].startswith("job_id,user,account,partition,qos,wallclock_req")
    assert validate_frames([jobs], "nrel_jobs")["success"]


def test_a_failing_squeue_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="failed"):
        collect(tmp_path / "x.csv", 1, 0.0, command=["false"])
    with pytest.raises(InputError, match="not squeue --json output"):
        collect(tmp_path / "x.csv", 1, 0.0, command=["echo", "hello"])


def test_fields_with_commas_quotes_and_newlines_round_trip(tmp_path):
    """Real clusters name partitions `short,standard` and accounts with quotes; the CSV must quote them."""
    import json

    capture = json.loads(SQUEUE.read_text())
    odd = ['short,standard', 'proj "alpha"', "line\nbreak, and comma"]
    for job, text in zip(capture["jobs"], odd * len(capture["jobs"]), strict=False):
        job["partition"], job["account"] = text, text
    source = tmp_path / "squeue.json"
    source.write_text(json.dumps(capture))
    out = tmp_path / "collected.csv"
    added = collect(out, 1, 0.0, command=["cat", str(source)])
    jobs, report = read_jobs(out)
    assert report.bad_rows == 0 and len(jobs) == added == 2
    assert sorted(jobs["partition"]) == sorted(jobs["account"]) == sorted(odd[:2])
    assert collect(out, 1, 0.0, command=["cat", str(source)]) == 0  # the quoted rows are recognised as seen


def test_quoted_newlines_keep_line_numbers_of_bad_records(tmp_path):
    header = "job_id,user,account,partition,qos,wallclock_req,nodes_req,processors_req,gpus_req,mem_req,submit_time,start_time,end_time,run_time,state"
    good = '{id},u1,"a,\nb",p,normal,60.0,1,1,0,0.0,2020-01-01 00:00:00,2020-01-01 00:00:01,2020-01-01 00:01:00,59.0,COMPLETED'
    bad = '3,u1,a,p,normal,60.0,-1,1,0,0.0,2020-01-01 00:00:00,2020-01-01 00:00:01,2020-01-01 00:01:00,59.0,COMPLETED'
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join([header, good.format(id=1), good.format(id=2), bad]) + "\n")
    jobs, report = read_jobs(path)
    assert list(jobs["job_id"]) == [1, 2] and set(jobs["account"]) == {"a,\nb"}
    assert [(p.line, p.field) for p in report.problems] == [(6, "nodes_req")]
