"""The hostile files of the reliability review (issue 11), kept as regression tests: each ends in jobaware's own
message (a bad record quarantined with file:line, field and reason, or one line naming the whole-file problem),
never a bare exception, and never silently changed data."""

from __future__ import annotations

import json
import re
import sys

import pandas as pd
import pytest

from jobaware import cli
from jobaware.failure.reader import read_jobs
from tests.conftest import KTH, NREL_CSV, SQUEUE

BARE = re.compile(r"Traceback|unexpected \w+|\b(KeyError|IndexError|ValueError|TypeError|OverflowError|ArrowInvalid|"
                  r"RecursionError|OutOfBoundsDatetime|UnicodeDecodeError)\b")
LINES = NREL_CSV.read_text().splitlines()[:50]
HEADER = LINES[0].split(",")
SWF = KTH.read_text(errors="replace").splitlines()
SWF_HEAD = [line for line in SWF[:200] if line.startswith(";")]
SWF_JOBS = [line for line in SWF if line.strip() and not line.startswith(";")][:50]


def nrel_with(field: str, value: str, row: int = 5) -> str:
    lines = list(LINES)
    fields = lines[row].split(",")
    fields[HEADER.index(field)] = value
    lines[row] = ",".join(fields)
    return "\n".join(lines) + "\n"


def swf_with(header: str | None = None, job: int | None = None, column: int = 0, value: str = "") -> str:
    jobs = list(SWF_JOBS)
    if job is not None:
        parts = jobs[job].split()
        parts[column] = value
        jobs[job] = " ".join(parts)
    return "\n".join(SWF_HEAD[:1] + ([header] if header else []) + SWF_HEAD[1:] + jobs) + "\n"


def parquet_with_a_column_twice() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = ["job_id", "user", "state", "submit_time", "user"]
    table = pa.Table.from_arrays([pa.array([1]), pa.array(["a"]), pa.array(["COMPLETED"]),
                                  pa.array([1_546_300_800_000], pa.timestamp("ms")), pa.array(["b"])], names=names)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


# an exception inside a library's callback is printed to stderr, not raised: here it fails the test
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

# name: (file name, content, expected message); a bad record names its file line (the header is line 1)
QUARANTINED = {
    "a 3 MB field": ("big.csv", nrel_with("name", "x" * 3_000_000), ":6: field 'name': longer than 4,096 characters"),
    "non-UTF-8 bytes": ("latin.csv", nrel_with("name", "PLACE").encode().replace(b"PLACE", b"caf\xe9"),
                        ":6: field 'name': not UTF-8 text (got 'caf\\\\xe9')"),
    "a record of too many fields with non-UTF-8 bytes": (
        "extra.csv", nrel_with("name", "PLACE").encode().replace(b"PLACE", b"caf\xe9,extra"),
        f":6: field '*': expected {len(HEADER)} fields"),
    "a record of empty fields beside a quoted field": (  # found by the reader fuzzer: the line mapping lost count
        "empty.csv", "\n".join(line if i != 6 else "," * (len(HEADER) - 1)
                                for i, line in enumerate(nrel_with("name", '"quoted, name"').split("\n"))),
        ":7: field 'job_id': missing"),
    "nodes_req 10^19": ("n19.csv", nrel_with("nodes_req", "1" + "0" * 19), ":6: field 'nodes_req': above the limit"),
    "nodes_req 2^63": ("n63.csv", nrel_with("nodes_req", str(2**63)), ":6: field 'nodes_req': above the limit"),
    "job_id 10^30": ("j30.csv", nrel_with("job_id", "1" + "0" * 30), ":6: field 'job_id': above the limit"),
    "processors_req inf": ("inf.csv", nrel_with("processors_req", "inf"), ":6: field 'processors_req': not a finite"),
    "submit time in 2500": ("t2500.csv", nrel_with("submit_time", "2500-01-01 00:00:00"),
                            ":6: field 'submit_time': outside 1970-01-01 to 2100-01-01"),
    "SWF job number 1e30": ("j.swf", swf_with(job=10, column=0, value="1e30"), "field 'job': not a finite number of at most"),
    "SWF processors 0.5": ("p.swf", swf_with(job=10, column=7, value="0.5"), "field 'procs_req': not a whole number"),
    "SWF submit time 1e300": ("s.swf", swf_with(job=10, column=1, value="1e300"), "field 'submit': not a finite"),
}
WHOLE_FILE = {
    "a missing state column": ("nostate.csv", "\n".join(",".join(f for j, f in enumerate(line.split(","))
                                                                 if j != HEADER.index("state")) for line in LINES),
                               "no 'state' column; a training table needs each job's final state"),
    "a column named twice": ("twice.csv", "\n".join([LINES[0].replace("account", "user"), *LINES[1:]]),
                             "1: header names a column more than once: 'user'"),
    "a Parquet column named twice": ("twice.parquet", parquet_with_a_column_twice(),
                                     ": schema names a column more than once: 'user'"),
    "deeply nested JSON": ("deep.json", "[" * 100_000 + "]" * 100_000, "JSON nested too deeply to read"),
    "SWF UnixStartTime: yesterday": ("y.swf", swf_with(header="; UnixStartTime: yesterday"),
                                     ":2: header UnixStartTime: expected epoch seconds between 1970 and 2100"),
    "SWF TimeZone: 99999999": ("tz.swf", swf_with(header="; TimeZone: 99999999"),
                               ":2: header TimeZone: expected seconds from UTC, under a day"),
}


def write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    return str(path)


def jobaware(monkeypatch, capfd, *args) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["jobaware", *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    captured = capfd.readouterr()
    return stop.value.code, captured.out + captured.err


@pytest.mark.parametrize("case", list(QUARANTINED))
def test_a_bad_record_is_quarantined_with_its_line_and_the_rest_is_read(case, tmp_path, monkeypatch, capfd):
    name, content, message = QUARANTINED[case]
    path = write(tmp_path, name, content)
    jobs, report = read_jobs(path)
    assert report.bad_rows == 1 and len(jobs) == (48 if name.endswith(".csv") else 49), report.as_dict()
    assert jobs["job_id"].between(0, 2**53).all()  # nothing wrapped around
    code, said = jobaware(monkeypatch, capfd, "data", "validate", "failure", "--input", path)
    assert code == 1 and message in said and not BARE.search(said), said[-600:]


@pytest.mark.parametrize("case", list(WHOLE_FILE))
def test_an_unreadable_file_is_one_line_naming_it(case, tmp_path, monkeypatch, capfd):
    name, content, message = WHOLE_FILE[case]
    path = write(tmp_path, name, content)
    code, said = jobaware(monkeypatch, capfd, "data", "validate", "failure", "--input", path)
    assert code == 1 and said.strip().startswith("error: ") and message in said and path in said, said[-600:]
    assert not BARE.search(said) and len(said.strip().splitlines()) == 1


def test_a_byte_order_mark_is_no_part_of_the_header(tmp_path):
    path = write(tmp_path, "bom.csv", b"\xef\xbb\xbf" + ("\n".join(LINES) + "\n").encode())
    jobs, report = read_jobs(path)
    assert len(jobs) == 49 and report.bad_rows == 0


def test_an_squeue_file_quarantines_the_record_it_cannot_read(tmp_path):
    from jobaware.failure.service import read_for_prediction

    data = json.loads(SQUEUE.read_text())
    data["jobs"][1]["time_limit"] = "abc"
    data["jobs"][2]["cpus"] = -4
    path = write(tmp_path, "squeue.json", json.dumps(data))
    jobs, quarantined, problems = read_for_prediction(path)
    assert len(jobs) == len(data["jobs"]) - 2 and [q["record"] for q in quarantined] == [2, 3]
    assert "job 2: time_limit: expected a number, got \"abc\"" in problems[0]
    assert "job 3: cpus: expected a non-negative number, got -4" in problems[1]
    assert isinstance(jobs, pd.DataFrame)
