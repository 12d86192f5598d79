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
