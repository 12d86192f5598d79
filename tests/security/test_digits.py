"""Digits are ASCII digits: `str.isdigit()` takes `²` (which `int()` then refuses with a ValueError) and `١٢` (which
`int()` reads as 12). A notice, an sacct field or a setting holding such a digit is text that names no number: it
is skipped or unknown, never a crash that blocks what comes after it, never a number it does not show."""

from __future__ import annotations

import redis

from jobaware.adapters.slurm.notices import RedisNotices, job_id_of
from jobaware.adapters.slurm.usage import sacct_usage
from jobaware.failure.reader.slurm import sacct_ends
from jobaware.text import ascii_digits
from tests.conftest import ROOT

USAGE = (ROOT / "tests" / "data" / "sacct_usage_22.05.txt").read_text()  # real `sacct -P` output, Slurm 22.05


def test_a_notice_naming_a_superscript_digit_is_skipped_and_the_next_notice_is_taken(fresh_redis):
    stream, uri = "jobaware:notices-digits", f"{fresh_redis}?stream=jobaware:notices-digits&group=g"
    notices = RedisNotices(uri)
    try:
        assert notices.read(0.1) == []  # this consumer's backlog: empty
        with redis.Redis.from_url(fresh_redis) as client:
            client.xadd(stream, {"job_id": "²"})
            client.xadd(stream, {"job_id": '{"job_id": "³"}'})
            client.xadd(stream, {"job_id": "١٢"})  # Arabic-Indic 12: a job id nobody wrote
            client.xadd(stream, {"job_id": "5"})
        # raised ValueError before, with the notices handed over and never acknowledged: a collector started
        # again reads its backlog first, and failed on the same notice for ever
        batch = notices.read(1.0)
        assert [job for _, job in batch] == [None, None, None, 5]
        notices.ack([token for token, _ in batch])
    finally:
        notices.close()
    again = RedisNotices(uri)  # a collector started again: no backlog left, nothing new
    try:
        assert again.read(0.1) == [] and again.read(0.1) == []
    finally:
        again.close()
    assert job_id_of("١٢") is None and job_id_of(b"7") == 7 and job_id_of('{"job_id": "8"}') == 8


def test_an_sacct_field_with_a_unicode_digit_is_unknown_and_the_other_jobs_are_read():
    lines = USAGE.splitlines()
    job_line = lines[1].split("|")
    header = lines[0].split("|")
    elapsed, nodes = header.index("ElapsedRaw"), header.index("NNodes")
    damaged = list(job_line)
    damaged[elapsed], damaged[nodes] = "²", "²"
    arabic = list(job_line)
    arabic[elapsed] = "٢٦"  # 26 in Arabic-Indic digits
    for fields, expected in ((damaged, None), (arabic, None)):
        output = "\n".join([lines[0], "|".join(fields), *lines[2:]]) + "\n"
        usage = sacct_usage(output)  # raised ValueError before: the whole window of accounting lost
        assert usage[1]["elapsed_s"] is expected and usage[2]["elapsed_s"] == 4
        ends = sacct_ends("\n".join("|".join(line.split("|")[:5]) for line in output.splitlines()[1:]))
        assert set(ends) == set(usage)
    parsable = "2|0:0||cpu=1,mem=400M,node=1|²\n2.batch|0:0|170120K|cpu=1,mem=400M,node=1|²\n"
    assert sacct_ends(parsable)[2].rss_share is not None  # NNodes unknown: one node, not a ValueError


def test_the_ascii_digit_test():
    assert ascii_digits("0123456789") and not ascii_digits("") and not ascii_digits("²")
    assert not ascii_digits("١٢") and not ascii_digits("12 ") and not ascii_digits("-1") and not ascii_digits(None)


def test_a_trace_header_a_setting_and_a_request_with_a_superscript_digit_are_one_line_errors_or_ignored(tmp_path):
    import pytest

    from jobaware.errors import InputError
    from jobaware.similarity.service import _integer
    from jobaware.swf import parse_header
    from jobaware.usage.spool import Settings

    trace = tmp_path / "trace.swf"
    trace.write_text("; Queue: ² batch\n; Queue: 1\tdebug\n; Partition: -1 none\n1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n")
    header = parse_header(trace)  # raised ValueError before
    assert header.queues == {1: "debug"} and header.partitions == {-1: "none"}
    with pytest.raises(InputError, match="JOBAWARE_SMTP 'mail:²': expected host"):
        Settings.from_env({"JOBAWARE_SMTP": "mail:²"})
    with pytest.raises(InputError, match="top: expected an integer 1..10"):
        _integer("²", "top", 1, 10)
    assert _integer("-0", "x", -1, 1) == 0 and _integer("7", "top", 1, 10) == 7
