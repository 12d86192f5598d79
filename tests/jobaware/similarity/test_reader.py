"""Readers of the Mistral tables: the real file, every bad-record path, strict mode, ingest and the contracts."""

from __future__ import annotations

import gzip
import json

import pyarrow.parquet as pq
import pytest

from jobaware import contracts
from jobaware.errors import InputError
from jobaware.similarity.reader import ingest, read_tables
from jobaware.similarity.schema import CODINGS, FAMILIES, FLOATS, JOBS, LEVELS, METRICS, NODE_VALUES

from .conftest import REAL


def test_the_real_binary_file_reads_whole(real_dataset):
    table, rows, report = read_tables(REAL)
    assert table == CODINGS
    assert rows.num_rows == 69_937 and report.bad_rows == 0
    assert rows.column_names == ["jobid", "coding"]
    assert rows["coding"][0].as_py() == "256:0:0:0:0:0:0:6:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0"  # CRLF stripped
    assert contracts.validate_parquet(real_dataset / f"{CODINGS}.parquet", CODINGS)["success"]
    assert sorted(p.name for p in real_dataset.iterdir()) == [f"{CODINGS}.parquet", "quarantine.jsonl"]


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def test_bad_binary_records_are_quarantined_with_file_line_and_field(tmp_path):
    path = _write(tmp_path, "codings.csv", "coding,jobid\r\n1:2,10\r\n\r\n3,11,99\r\nabc,12\r\n5:600,13\r\n"
                                           "7,10\r\n0:0:5,x\r\n:4,15\r\n0:0:5,14\r\n")
    out = tmp_path / "out"
    report = ingest([str(path)], out)
    assert (report.rows, report.bad_rows) == (2, 6)
    where = [(p.line, p.field) for p in report.problems]
    assert where == [(4, "(record)"), (5, "coding"), (6, "coding"), (7, "jobid"), (8, "jobid"), (9, "coding")]
    reasons = [p.reason for p in report.problems]
    assert "expected 2 comma-separated fields" in reasons[0]
    assert "a value outside 0..511" in reasons[2]
    assert "duplicate jobid" in reasons[3]
    quarantined = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    assert [q["line"] for q in quarantined] == [4, 5, 6, 7, 8, 9]
    assert quarantined[1]["record"] == "abc,12" and quarantined[1]["file"] == str(path)
    assert pq.read_table(out / f"{CODINGS}.parquet").to_pydict() == {"jobid": [10, 14], "coding": ["1:2", "0:0:5"]}


def test_strict_mode_stops_at_the_first_bad_record(tmp_path):
    path = _write(tmp_path, "codings.csv", "coding,jobid\n1,1\n2,2\n512,3\n")
    with pytest.raises(InputError, match=r"codings.csv:4: field 'coding': a value outside 0..511.*strict mode"):
        ingest([str(path)], tmp_path / "out", strict=True)


def test_unknown_header_and_missing_files_are_one_line_errors(tmp_path):
    path = _write(tmp_path, "other.csv", "a,b\n1,2\n")
    with pytest.raises(InputError, match=r"other.csv:1: header 'a,b' is none of the Mistral tables"):
        ingest([str(path)], tmp_path / "out")
    with pytest.raises(InputError, match="nothing.csv: no such file"):
        ingest([str(tmp_path / "nothing.csv")], tmp_path / "out")
    with pytest.raises(InputError, match="the pattern matches no file"):
        ingest([str(tmp_path / "*.none")], tmp_path / "out")
    meta = _write(tmp_path, "meta.csv", "jobid,user,group,nodes,elapsed,job_name\n1,u,g,1,60,x\n")
    with pytest.raises(InputError, match="no coding file among the sources"):
        ingest([str(meta)], tmp_path / "out")


def _levels_row(jobid, coding, aggz, levels=None, floats=None):
    length = len(coding.split(":"))
    levels = levels or ":".join(["0"] * length)
    floats = floats or ":".join(["0"] * length)
    return ",".join([str(jobid), *[floats] * 9, *[levels] * 9, coding, aggz])


def test_quantised_table_checks_lengths_ranges_and_zero_aggregation(tmp_path):
    header = ",".join(["jobid", *FLOATS, *METRICS, "coding_abs", "coding_abs_aggzeros"])
    rows = [
        _levels_row(1, "0:0:3", "0:3", "0:0:16", "0:0:3.9"),     # good
        _levels_row(2, "0:0:3", "0:0:3"),                         # aggzeros not collapsed
        _levels_row(3, "0:0:3", "0:3", "0:17:0"),                 # level out of range
        _levels_row(4, "0:0:3", "0:3", "0:1"),                    # too short
        _levels_row(5, "0:0:3", "0:3", None, "0:4.5:0"),          # float out of range
        _levels_row(6, "1", "1"),                                 # good
    ]
    path = _write(tmp_path, "job_codings.csv", header + "\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    report = ingest([str(path)], out)
    assert (report.rows, report.bad_rows) == (2, 4)  # the derived codings table adds no records
    assert [(p.line, p.field) for p in report.problems] == [
        (3, "coding_abs_aggzeros"), (4, METRICS[0]), (5, METRICS[0]), (6, FLOATS[0])]
    assert "2 segments, coding_abs has 3" in report.problems[2].reason
    assert pq.read_table(out / f"{CODINGS}.parquet").to_pydict() == {"jobid": [1, 6], "coding": ["0:0:3", "1"]}
    for table in (LEVELS, CODINGS):
        assert contracts.validate_parquet(out / f"{table}.parquet", table)["success"]


def test_metadata_node_values_and_families(tmp_path):
    codings = _write(tmp_path, "codings.csv.gz", "")
    codings.write_bytes(gzip.compress(b"coding,jobid\n1:0,1\n0,2\n"))
    meta = _write(tmp_path, "meta.csv", "jobid,user,group,nodes,elapsed,job_name\n1,u1,g1,2,1-01:00:00,run\n"
                                       "2,u2,g1,0,60,\n3,,g1,1,60,x\n4,u4,g4,1,25:61:00,x\n5,u5,g5,1,300,\n")
    values = ",".join(["0:1"] * 9)
    nodes = _write(tmp_path, "nodes.csv", "jobid,node," + ",".join(METRICS) + "\n"
                   f"1,m1,{values}\n1,m2,{values}\n1,m1,{values}\n2,m1,{','.join(['5'] * 9)}\n"
                   f"2,m2,{','.join(['0:1:2'] + ['0:1'] * 8)}\n")
    fam = _write(tmp_path, "families.csv", "jobid,family,variant\n1,0,template\n2,-2,x\n")
    out = tmp_path / "out"
    report = ingest([str(p) for p in (nodes, meta, codings, fam)], out)
    problems = {(p.file.rsplit("/", 1)[1], p.line, p.field): p.reason for p in report.problems}
    assert problems == {
        ("meta.csv", 3, "nodes"): "expected 1..1000000",
        ("meta.csv", 4, "user"): "empty",
        ("meta.csv", 5, "elapsed"): "expected seconds or [D-]HH:MM:SS",
        ("nodes.csv", 4, "node"): "duplicate (jobid, node) row",
        ("nodes.csv", 5, METRICS[0]): "a value outside 0..4",
        ("nodes.csv", 6, METRICS[1]): "2 segments, md_file_create has 3",
        ("families.csv", 3, "family"): "expected -1..4611686018427387904",
    }
    jobs = pq.read_table(out / f"{JOBS}.parquet").to_pylist()
    assert jobs[0] == {"jobid": 1, "user": "u1", "group": "g1", "nodes": 2, "elapsed": 90000, "job_name": "run"}
    assert jobs[1]["job_name"] is None
    assert pq.read_table(out / f"{NODE_VALUES}.parquet").num_rows == 2
    for table in (CODINGS, JOBS, NODE_VALUES, FAMILIES):
        assert contracts.validate_parquet(out / f"{table}.parquet", table)["success"], table


def test_a_folder_of_generated_tables_ingests_cleanly_and_meets_every_contract(generated, generated_dataset):
    assert not (generated_dataset / "quarantine.jsonl").read_text()
    for table in (CODINGS, LEVELS, JOBS, NODE_VALUES, FAMILIES):
        report = contracts.validate_parquet(generated_dataset / f"{table}.parquet", table)
        assert report["success"], contracts.format_report(report)


def test_a_contract_catches_what_the_reader_would_not_write(tmp_path):
    import pyarrow as pa

    from jobaware.similarity.schema import SCHEMAS

    bad = pa.table({"jobid": [1, 1], "coding": ["1:512", "0"]}, schema=SCHEMAS[CODINGS])
    pq.write_table(bad, tmp_path / "codings.parquet")
    report = contracts.validate_parquet(tmp_path / "codings.parquet", CODINGS)
    failed = {(f["expectation"], f["column"]) for f in report["failed"]}
    assert failed == {("expect_column_values_to_be_unique", "jobid"),
                      ("expect_column_values_to_match_regex", "coding")}


def test_bytes_that_are_not_utf8_and_files_without_records(tmp_path):
    broken = tmp_path / "broken.csv"
    broken.write_bytes(b"coding,jobid\n1:2,10\n\xff\xfe,11\n3,12")  # no newline at the end either
    _, rows, report = read_tables(broken)
    assert rows["jobid"].to_pylist() == [10, 12]
    assert [(p.line, p.field) for p in report.problems] == [(3, "coding")]
    empty = _write(tmp_path, "empty.csv", "coding,jobid\r\n\r\n")
    out = tmp_path / "out"
    report = ingest([str(empty)], out)
    assert (report.rows, report.bad_rows) == (0, 0)
    assert pq.read_table(out / f"{CODINGS}.parquet").num_rows == 0
