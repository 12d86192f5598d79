"""bench/wait_replay.py asks jobaware only about jobs still pending in the snapshot it asks from."""

import copy
import importlib.util
import json
import sys
from types import SimpleNamespace

import pytest

from jobaware.bodies import parse_body
from jobaware.errors import InputError
from jobaware.wait.reader import squeue_body
from jobaware.wait.service import WaitRequest, parse_request
from tests.conftest import ROOT, SQUEUE

spec = importlib.util.spec_from_file_location("wait_replay", ROOT / "bench" / "wait_replay.py")
wait_replay = sys.modules["wait_replay"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wait_replay)


def test_a_job_that_started_before_it_was_asked_about_is_skipped_not_asked():
    """Found by the issue 47 replay: `--jobs 100 --cores 8` crashed with `InputError: job 67 is running: it has
    started, no wait is left`, asking about a job that had started between its submission and the snapshot."""
    payload = json.loads(SQUEUE.read_text())
    records = copy.deepcopy(payload["jobs"])
    records[1].update(job_state="RUNNING", start_time=records[1]["submit_time"] + 5, end_time=0)  # job 2
    payload = {**payload, "jobs": records}
    now = records[1]["start_time"] + 10
    with pytest.raises(InputError, match="job 2 is running"):  # what the bench asked before: the service refuses it
        parse_request(parse_body(WaitRequest, squeue_body(payload, [2, 3], now=now)), SimpleNamespace(clusters={}))
    assert wait_replay.still_pending(payload, [2, 3, 1, 99]) == ([3], [2, 1, 99])
    assert wait_replay.still_pending(payload, [3, 4]) == ([3, 4], [])
