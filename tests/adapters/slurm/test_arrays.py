"""Array-task ids (`4_92`, `4_[1-3]`) as `jobaware card` reads them, and the squeue record of each task."""

import json

import pytest
from typer.testing import CliRunner

from jobaware.adapters.slurm.arrays import expand, find, parse_id
from jobaware.errors import JobawareError
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import SQUEUE


def test_ids_as_people_write_them():
    assert parse_id("492") == (492, None)
    assert parse_id("4_92") == (4, [92])  # not job 492, as int("4_92") would have it
    assert parse_id("4_[1-3,7]") == (4, [1, 2, 3, 7])
    assert parse_id("4_[1-9:4]") == (4, [1, 5, 9])
    assert expand("1-100%5", 100) == list(range(1, 101))


@pytest.mark.parametrize("text, message", [
    ("4_", "expected N, N_TASK or N_"), ("4-92", "expected N"), ("4_[3-1]", "'3-1' is an empty range"),
    ("4_[1-1000]", "more than 100 tasks"), ("4_[x]", "expected N"), ("4_[1--2]", "is not N, N-M or N-M:STEP"),
])
def test_bad_ids_are_one_line_errors(text, message):
    with pytest.raises(JobawareError, match=message.replace("[", r"\[")):
        parse_id(text)


def records() -> list[dict]:
    """squeue's records as Slurm 22.05 gives them for array 4 (task 2 running, tasks 1 and 3 pending) and job 492."""
    base = json.loads(SQUEUE.read_text())["jobs"]
    pending = {**base[0], "job_id": 4, "array_job_id": 4, "array_task_id": None, "array_task_string": "1,3"}
    running = {**base[1], "job_id": 5, "array_job_id": 4, "array_task_id": 2, "array_task_string": ""}
    plain = {**base[2], "job_id": 492, "array_job_id": 0, "array_task_id": None, "array_task_string": ""}
    return [pending, running, plain]


def test_each_task_finds_its_record():
    listed = records()
    assert find(listed, 4, 2)["job_id"] == 5  # started: a record of its own
    assert find(listed, 4, 1)["job_id"] == find(listed, 4, 3)["job_id"] == 4  # pending: the array's record
    assert find(listed, 4, 9) is None and find(listed, 492, None)["job_id"] == 492


def test_card_of_array_tasks_through_the_cli(monkeypatch, tmp_path):
    from jobaware.adapters.slurm import collector
    from jobaware.cli import app

    monkeypatch.setenv("JOBAWARE_HOME", str(tmp_path))
    squeue = json.dumps({**json.loads(SQUEUE.read_text()), "jobs": records()})
    monkeypatch.setattr(collector, "Slurm", lambda timeout=30: Replay(squeue=squeue, **NO_ACCOUNTING))
    down = [item for key in ("failure", "resource", "similarity") for item in ("--service", f"{key}=http://127.0.0.1:9")]
    shown = CliRunner().invoke(app, ["card", "4_[1-2]", *down, "--json"])
    assert shown.exit_code == 0, shown.output
    cards = json.loads(shown.stdout)
    assert [c["job_id"] for c in cards] == [4, 5]  # task 1 pending (the array's record), task 2 its own
    one = CliRunner().invoke(app, ["card", "4_92", *down])
    assert one.exit_code != 0 and str(one.exception) == "job 4_92: not known to squeue (pending or running jobs have cards)"
    table = CliRunner().invoke(app, ["card", "4_3", *down])
    assert table.exit_code == 0 and "job 4_3: " in table.stdout
