"""The platform's rule for a job that never started (`jobaware.store.export.never_started`), which failure's history,
the store exports of wait and sizing, and wait's live accuracy all use: the cases each of their earlier rules held."""

from __future__ import annotations

import numpy as np
import pytest

from jobaware.store.export import never_started, row_run_time, seen_running

NAN = np.nan
T = 1_000_000.0  # a moment, epoch seconds


@pytest.mark.parametrize(("final", "start", "end", "run_time", "seen", "never"), [
    # cancelled while pending: accounting gives no start (and no run time, or one of 0)
    ("CANCELLED", NAN, T, NAN, False, True),
    ("CANCELLED", NAN, T, 0.0, False, True),
    ("CANCELLED", NAN, NAN, NAN, False, True),
    # cancelled while pending or held: squeue gives the cancel as start and end (Slurm's start == end), run time 0
    ("CANCELLED", T, T, 0.0, False, True),
    ("CANCELLED", T, T, NAN, False, True),       # a trace that gives no run time
    ("CANCELLED", T + 5, T, NAN, False, True),   # a start after its end says no more than start == end
    ("CANCELLED", T, T + 60, 0.0, False, True),  # a run time of 0 where the row's times disagree
    ("DEADLINE", NAN, T, NAN, False, True),      # ended by Slurm while pending: its --deadline could not be met
    # cancelled after it started
    ("CANCELLED", T, T, 0.0, True, False),       # seen RUNNING: cancelled within the second it started
    ("CANCELLED", T, T + 60, 60.0, False, False),
    ("CANCELLED", T, T + 60, NAN, False, False),  # a start before its end, no run time told
    ("CANCELLED", NAN, T, 60.0, False, False),   # no start told, but it ran a minute
    ("CANCELLED", T, NAN, NAN, False, False),    # a start and no end: nothing says it did not start
    # any other end came after a start, known or not
    ("FAILED", T, T, 0.0, False, False),         # a failure at once
    ("COMPLETED", NAN, T, 3600.0, False, False),  # a trace's unknown wait (SWF's -1): the job ran
    ("FAILED", NAN, T, NAN, False, False),
    ("TIMEOUT", T, T + 60, 60.0, False, False),
    ("DEADLINE", T, T + 60, 60.0, True, False),  # ran until its deadline
    # open: it may start yet
    (None, NAN, NAN, NAN, False, False),
    (None, T, NAN, NAN, True, False),
])
def test_a_job_never_started_only_when_cancelled_with_no_sign_that_it_ran(final, start, end, run_time, seen, never):
    assert never_started([final], [start], [end], [run_time], [seen]).tolist() == [never]
    if not seen:  # without state changes (a trace's table) the answer is the same
        assert never_started([final], [start], [end], [run_time]).tolist() == [never]


def test_many_jobs_at_once_from_a_table_s_columns():
    import pandas as pd

    final = pd.Series(["CANCELLED", pd.NA, "CANCELLED", "COMPLETED"], dtype="string")
    got = never_started(final, np.array([T, NAN, T, NAN]), [T, NAN, T + 9, T], [0.0, NAN, 9.0, 5.0], [False] * 4)
    assert got.tolist() == [True, False, False, False]


def test_what_a_store_record_shows():
    record = {"row": {"run_time": 0.0}, "states": [{"state": "PENDING", "time": 1}, {"state": "CANCELLED", "time": 2}]}
    assert (row_run_time(record["row"]), seen_running(record)) == (0.0, False)
    ran = {"row": {"run_time": 60}, "states": [{"state": "PENDING"}, {"state": "RUNNING"}]}
    assert (row_run_time(ran["row"]), seen_running(ran)) == (60.0, True)
    for odd in ("60", True, float("inf"), None):  # read as no run time told, never as a bad record
        assert row_run_time({"run_time": odd}) is None
    assert seen_running({"row": {}}) is False
