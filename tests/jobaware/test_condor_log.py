"""The platform's reader of HTCondor job event logs (`jobaware.condor_log`): the jobs that terminated, from real logs
and from logs written here with the damage real logs carry."""

from __future__ import annotations

import calendar
import os

from jobaware.condor_log import is_event_log, read_ended_jobs
from tests.conftest import REAL

COSMIC = REAL / "condor-more" / "CosmicRay__job.log"
PRETRAINING = REAL / "condor" / "mldag_ospool_pretraining.dag.nodes.log"


def utc(text: str) -> float:
    return float(calendar.timegm(__import__("time").strptime(text, "%Y-%m-%d %H:%M:%S")))


def test_a_real_log_gives_each_terminated_job_its_times_request_and_peak():
    jobs, problems = read_ended_jobs(COSMIC)
    assert problems == [] and len(jobs) == 378 and len({j.job for j in jobs}) == 378
    # 59211698.2 as the log says it (submit 13:52:05, terminated 14:46:45, 209 MB used of 3000 asked, 4 CPUs)
    job = next(j for j in jobs if j.job == "59211698.2")
    assert job.submit == utc("2020-07-14 13:52:05") and job.end == utc("2020-07-14 14:46:45")
    assert job.start is not None and job.submit <= job.start <= job.end
    assert job.usage["memory_mb"] == 209 and job.request["memory_mb"] == 3000 and job.allocated["memory_mb"] == 3072
    assert job.request["cpus"] == 4 and job.return_value == 0 and job.signal is None
    assert [j.end for j in jobs] == sorted(j.end for j in jobs)
    # a DAGMan log: each job's node; a resource row of two numbers (GPU jobs of this log) has no usage
    nodes, problems = read_ended_jobs(PRETRAINING)
    assert problems == [] and nodes and all(j.dag_node for j in nodes)
    assert nodes[0].dag_node.startswith("run") and "memory_mb" in nodes[0].request
    assert is_event_log(COSMIC) and is_event_log(PRETRAINING)
    assert not is_event_log(REAL / "condor" / "workflows.csv") and not is_event_log(REAL / "condor" / "PROVENANCE.md")


def event(code: int, job: str, when: str, text: str, body: str = "") -> str:
    return f"{code:03d} ({job}) {when} {text}\n{body}...\n"


TERMINATED = ("\t(1) Normal termination (return value {rv})\n"
              "\tPartitionable Resources :    Usage  Request Allocated\n"
              "\t   Cpus                 :        1        2         2\n"
              "\t   Memory (MB)          :      {use}     4096      4096\n")
NO_USAGE = ("\t(0) Abnormal termination (signal 9)\n"
            "\tPartitionable Resources :    Usage  Request Allocated\n"
            "\t   Memory (MB)          :             2048      2048\n")


def test_year_less_dates_take_the_year_of_the_files_time_back_over_each_new_year(tmp_path):
    log = tmp_path / "old.log"
    log.write_text(
        event(0, "7.000.000", "12/30 23:00:00", "Job submitted from host: <10.0.0.1:9618>", "    DAG Node: step12\n")
        + event(1, "7.000.000", "12/31 23:30:00", "Job executing on host: <10.0.0.2:9618>")
        + event(5, "7.000.000", "01/01 00:30:00", "Job terminated.", TERMINATED.format(rv=0, use=512))
        + event(0, "8.000.000", "03/01 10:00:00", "Job submitted from host: <10.0.0.1:9618>")
        + event(5, "8.000.000", "03/01 11:00:00", "Job terminated.", NO_USAGE))
    written = utc("2024-06-01 00:00:00")
    os.utime(log, (written, written))
    jobs, problems = read_ended_jobs(log)
    assert problems == []
    first, second = jobs
    assert (first.submit, first.start, first.end) == (utc("2023-12-30 23:00:00"), utc("2023-12-31 23:30:00"),
                                                       utc("2024-01-01 00:30:00"))
    assert first.dag_node == "step12" and first.usage == {"cpus": 1, "memory_mb": 512}
    assert second.end == utc("2024-03-01 11:00:00") and second.start is None
    assert second.signal == 9 and second.return_value is None and second.usage == {}
    assert second.request == {"memory_mb": 2048}
    # a date after the file was written is a year earlier
    written = utc("2024-02-01 00:00:00")
    os.utime(log, (written, written))
    jobs, _ = read_ended_jobs(log)
    assert jobs[1].end == utc("2023-03-01 11:00:00") and jobs[0].end == utc("2023-01-01 00:30:00")


def test_a_damaged_event_is_named_with_its_line_and_the_rest_is_read(tmp_path):
    log = tmp_path / "damaged.log"
    events = [
        event(0, "1.000.000", "2024-05-01 10:00:00", "Job submitted from host: <10.0.0.1:9618>"),   # line 1
        event(5, "2.000.000", "2024-05-01 10:05:00", "Job terminated.", TERMINATED.format(rv=0, use=1)),  # 3: no submit
        event(0, "3.000.000", "2024-13-45 10:00:00", "Job submitted from host: <10.0.0.1:9618>"),   # 9: no date
        "005 (garbage) 2024-05-01 10:00:00 Job terminated.\n...\n",                                   # 11
        event(5, "-1.-1.-1", "2024-05-01 10:00:00", "Job terminated.", "\tnot a job's\n"),            # 13: ignored
        event(5, "1.000.000", "2024-05-01 09:00:00", "Job terminated.", TERMINATED.format(rv=0, use=1)),  # 16: early
        event(0, "4.000.000", "2024-05-01 10:00:00", "Job submitted from host: <10.0.0.1:9618>"),   # 22
        event(5, "4.000.000", "2024-05-01 11:00:00", "Job terminated.", TERMINATED.format(rv=3, use=99)),  # 24
        event(5, "4.000.000", "2024-05-01 11:00:01", "Job terminated.", TERMINATED.format(rv=0, use=1)),  # 30: twice
    ]
    log.write_text("".join(events))
    jobs, problems = read_ended_jobs(log)
    assert [(j.job, j.return_value, j.usage["memory_mb"], j.line) for j in jobs] == [("4.0", 3, 99, 24)]
    said = [(p.line, p.field, p.reason) for p in problems]
    assert said == [(3, "job", "no submit event for this job in this log"), (9, "time", "not an event date and time"),
                    (11, "event", "not an event header with a job id"),
                    (16, "time", "the job terminated before its submit"), (30, "job", "job terminated twice in this log")]
    assert all(p.file == str(log) for p in problems)


def test_an_event_nothing_closes_and_text_outside_events_are_named_and_a_rotated_log_is_read(tmp_path):
    submit = event(0, "5.000.000", "2024-05-01 10:00:00", "Job submitted from host: <10.0.0.1:9618>")  # 2 lines
    cut = "005 (6.000.000) 2024-05-01 10:30:00 Job terminated.\n\t(1) Normal termination (return value 0)\n"
    log = tmp_path / "cut.log"
    log.write_text(
        "\ufeff" + submit                                                                        # 1-2
        + event(0, "6.000.000", "2024-05-01 10:01:00", "Job submitted from host: <10.0.0.1:9618>")  # 3-4
        + cut                                                                                    # 5-6: the next header
        + event(5, "5.000.000", "2024-05-01 11:00:00", "Job terminated.", TERMINATED.format(rv=0, use=7))  # 7-12
        + "stray text\nmore of it\n"                                                             # 13-14
        + event(0, "99999999999.000.000", "2024-05-01 11:00:00", "Job submitted from host: <x>")  # 15-16
        + cut)                                                                                   # 17-18: end of file
    jobs, problems = read_ended_jobs(log)
    assert [(j.job, j.usage["memory_mb"]) for j in jobs] == [("5.0", 7)]  # the byte-order mark hid nothing
    assert [(p.line, p.reason) for p in problems] == [
        (5, "event not closed by '...' before the next one"), (13, "text outside any event"),
        (15, "a job id beyond HTCondor's"), (17, "event cut off at the end of the log (not closed by '...')")]
    # a rotated log starts inside an event: still an event log, its first lines text outside any event
    rotated = tmp_path / "EventLog.old"
    rotated.write_text("\t   Memory (MB)          :      1     2048      2048\n...\n" + submit)
    assert is_event_log(rotated) and read_ended_jobs(rotated)[1][0].line == 1


def test_a_resource_row_that_is_not_two_or_three_numbers_is_named_and_its_job_skipped(tmp_path):
    """Found by a hostile review: `Memory (MB) : -5000 3000 3072` (or `1e30 ...`) matched no row, so every job was
    read with its memory unknown and nothing said (`predict sizing` wrote 378 rows, 0 bad records)."""
    log = tmp_path / "damaged.log"
    log.write_text("".join([
        event(0, "1.000.000", "2024-05-01 10:00:00", "Job submitted from host: <10.0.0.1:9618>"),          # line 1
        event(5, "1.000.000", "2024-05-01 11:00:00", "Job terminated.", TERMINATED.format(rv=0, use=-5000)),  # 3
        event(0, "2.000.000", "2024-05-01 10:00:00", "Job submitted from host: <10.0.0.1:9618>"),          # 9
        event(5, "2.000.000", "2024-05-01 11:00:00", "Job terminated.", TERMINATED.format(rv=0, use="1e30")),  # 11
        event(0, "3.000.000", "2024-05-01 10:00:00", "Job submitted from host: <10.0.0.1:9618>"),          # 17
        event(5, "3.000.000", "2024-05-01 11:00:00", "Job terminated.", TERMINATED.format(rv=0, use=7)),     # 19
    ]))
    jobs, problems = read_ended_jobs(log)
    assert [(j.job, j.usage["memory_mb"]) for j in jobs] == [("3.0", 7)]
    assert [(p.line, p.field, p.value) for p in problems] == [(7, "Memory (MB)", "-5000 4096 4096"),
                                                              (15, "Memory (MB)", "1e30 4096 4096")]
    assert problems[0].reason == "job 1.0: expected 2 or 3 numbers of at least 0 (usage, request, allocated)"
