"""How bench/failure_day_one_live.py replays a trace job's end on the test Slurm (the bench itself needs root and a
live cluster and is not part of `make test`)."""

import importlib.util
import math
import subprocess
import sys

import pytest

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("day_one_live", ROOT / "bench" / "failure_day_one_live.py")
live = sys.modules["day_one_live"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live)

SCALE = 1 / 600


def test_completed_and_failed_jobs_exit_after_their_scaled_run_time():
    completed = live.ending(1, 3600, 7200, SCALE, 5)
    assert (completed.kind, completed.limit_min, completed.sleep_s, completed.exit_code) == ("completed", 1, 6, 0)
    failed = live.ending(0, 3600, 7200, SCALE, 5)
    assert (failed.kind, failed.limit_min, failed.sleep_s, failed.exit_code) == ("failed", 1, 6, 1)
    assert failed.cancel_after_s is None


def test_a_failed_job_that_ran_to_its_limit_outlives_its_time_limit_so_slurm_ends_it():
    timeout = live.ending(0, 36_000, 36_000, SCALE, 5)  # a 10 h limit: 60 replay seconds, one minute
    assert (timeout.kind, timeout.limit_min, timeout.exit_code) == ("timeout", 1, 0)
    assert timeout.sleep_s > timeout.limit_min * 60


def test_a_completed_job_at_its_limit_still_completes_before_it():
    completed = live.ending(1, 36_000, 36_000, SCALE, 5)  # 60 scaled seconds = its whole one-minute limit
    assert completed.kind == "completed"
    assert completed.sleep_s < completed.limit_min * 60


def test_limits_are_whole_minutes_between_one_and_the_cap():
    assert live.ending(1, 10, 60, SCALE, 5).limit_min == 1
    assert live.ending(1, 10, 36_001, SCALE, 5).limit_min == 2  # 60.002 scaled seconds round up
    long = live.ending(0, 400_000, 360_000, SCALE, 5)  # 10 scaled minutes, capped at 5
    assert (long.kind, long.limit_min) == ("timeout", 5)
    unknown = live.ending(0, 600, math.nan, SCALE, 5)  # no requested time: the cap, and never TIMEOUT
    assert (unknown.kind, unknown.limit_min, unknown.sleep_s) == ("failed", 5, 1)


def test_cancelled_jobs_are_cancelled_by_the_bench_after_their_run_time_and_unknown_ends_are_not_replayed():
    cancelled = live.ending(5, 1200, 7200, SCALE, 5)
    assert (cancelled.kind, cancelled.cancel_after_s) == ("cancelled", 2)
    assert cancelled.sleep_s > cancelled.limit_min * 60  # only scancel ends it
    assert live.ending(-1, 100, 200, SCALE, 5) is None


@pytest.mark.parametrize("code", [0, 1])
def test_the_script_sleeps_then_exits_with_the_code(tmp_path, code):
    script = tmp_path / "job.sh"
    script.write_text(live.Ending("failed", 1, 0, code).script())
    assert subprocess.run(["sh", str(script)], timeout=10).returncode == code
