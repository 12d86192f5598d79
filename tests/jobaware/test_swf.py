"""The platform's SWF reader: plain and gzip traces read alike, a block at a time, bad lines named and kept out."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from jobaware.errors import InputError
from jobaware.swf import FIELDS, iter_blocks, parse_header, read_swf
from tests.conftest import KTH

HEADER = "; UnixStartTime: 843480031\n; TimeZoneString: Europe/Stockholm\n; Queue: 1 batch\n"


def line(job, submit=0, wait=10, run=100, status=1, procs=4):
    return f"{job} {submit} {wait} {run} {procs} -1 -1 {procs} 600 -1 {status} 3 7 -1 1 -1 -1 -1"


def test_a_gzip_trace_reads_as_the_plain_one_a_block_at_a_time(tmp_path):
    packed = tmp_path / "kth.swf.gz"
    packed.write_bytes(gzip.compress(KTH.read_bytes()))
    plain, zipped = read_swf(KTH), read_swf(packed, block_lines=1_000)
    assert len(plain.jobs) == 28_476 and not plain.problems
    assert np.array_equal(plain.jobs.to_numpy(), zipped.jobs.to_numpy(), equal_nan=True)
    assert parse_header(packed).fields["MaxProcs"] == "100" and str(parse_header(packed).tz) == "Europe/Stockholm"
    assert sum(len(b.values) for b in iter_blocks(packed, block_lines=5_000)) == 28_476
    assert max(len(b.values) for b in iter_blocks(packed, block_lines=5_000)) == 5_000


@pytest.mark.parametrize("bad, field, reason", [
    (line(2, wait=-5), "wait", "negative (only -1, unknown, may be)"),
    (line(2, procs=2.5), "procs_alloc", "not a whole number"),
    (line(2, run="nan"), "run", "not a finite number"),
    (line(2, submit=-1), "submit", "submit time must be known"),
    (line(2) + " 9", "*", "expected 18 whitespace-separated fields, got 19"),
    (line(2).replace(" 600 ", " ten "), "time_req", "not a number"),
])
def test_a_bad_line_is_quarantined_with_file_line_and_field(tmp_path, bad, field, reason):
    path = tmp_path / "t.swf"
    path.write_text(HEADER + "\n".join([line(1), bad, line(3)]) + "\n")
    trace = read_swf(path)
    assert list(trace.jobs["job"]) == [1, 3] and list(trace.jobs["line"]) == [4, 6]
    assert len(trace.quarantined) == 1 and trace.quarantined[0]["line"] == 5
    problem = str(trace.problems[0])
    assert problem.startswith(f"{path}:5: field '{field}': {reason}"), problem


def test_unknown_fields_stay_minus_one_and_known_reads_them_as_nan(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(HEADER + line(1, wait=-1) + "\n")
    trace = read_swf(path)
    assert trace.jobs["wait"].iloc[0] == -1 and np.isnan(trace.known("wait").iloc[0])
    assert trace.jobs["end"].iloc[0] == 100 and list(trace.jobs.columns) == [*FIELDS, "line", "end"]


def test_a_truncated_gzip_trace_is_one_line_naming_it(tmp_path):
    path = tmp_path / "cut.swf.gz"
    path.write_bytes(gzip.compress(KTH.read_bytes())[:100_000])
    with pytest.raises(InputError, match=r"cut.swf.gz: not a readable trace after line \d+"):
        read_swf(path)
