import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.failure.reader import ingest, read_jobs
from tests.conftest import NREL_CSV, NREL_JSON

HEADER = NREL_CSV.read_text().splitlines()[0]
ROW = "532209,user0014,account0003,partition001,normal,172800.0,10,10,0,0.0,2019-01-01 08:55:55,2019-01-01 08:55:56,2019-01-02 12:39:41,99825.0,COMPLETED,n,w,s"


def test_real_csv_and_json_encodings_give_the_same_table():
    csv, csv_report = read_jobs(NREL_CSV)
    js, js_report = read_jobs(NREL_JSON)
    assert len(csv) == 700 and csv_report.bad_rows == 0 and js_report.bad_rows == 0
    pd.testing.assert_frame_equal(csv, js)
    assert csv["state"].value_counts().to_dict() == {"COMPLETED": 689, "TIMEOUT": 11}
    assert str(csv["submit_time"].iloc[0]) == "2019-01-01 08:55:55"


def test_parquet_round_trip_through_ingest(tmp_path):
    ingest([str(NREL_CSV)], tmp_path)
    again, _ = read_jobs(tmp_path / "nrel_jobs.parquet")
    original, _ = read_jobs(NREL_CSV)
    pd.testing.assert_frame_equal(original, again)


def test_bad_rows_are_skipped_counted_and_located(tmp_path):
    lines = [HEADER, ROW, ROW.replace(",10,10,", ",ten,10,"), "1,2,3", ROW.replace("COMPLETED", "EXPLODED"),
             ROW.replace("2019-01-01 08:55:55", "yesterday"), ROW.replace("532209", "532210")]
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join(lines) + "\n")
    jobs, report = read_jobs(path)
    assert list(jobs["job_id"]) == [532209, 532210]
    assert report.bad_rows == 4
    text = "\n".join(map(str, report.problems))
    assert f"{path}:3: field 'nodes_req': not a number (got 'ten')" in text
    assert f"{path}:4: field '*': expected 18 fields" in text
    assert f"{path}:5: field 'state': unknown state" in text
    assert f"{path}:6: field 'submit_time'" in text


def test_bad_rows_are_quarantined_not_lost(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join([HEADER, ROW, ROW.replace(",10,10,", ",-4,10,")]) + "\n")
    report = ingest([str(path)], tmp_path / "out")
    quarantine = (tmp_path / "out" / "quarantine.jsonl").read_text()
    assert report.rows == 1 and report.bad_rows == 1
    assert '"line": 3' in quarantine and '"nodes_req": "-4"' in quarantine


def test_strict_mode_turns_a_bad_row_into_an_error(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join([HEADER, ROW, ROW.replace("99825.0", "long")]) + "\n")
    with pytest.raises(InputError, match=r"jobs.csv:3: field 'run_time': not a number"):
        read_jobs(path, strict=True)


def test_missing_column_and_unknown_format_are_clear_errors(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("user,state\nu,COMPLETED\n")
    with pytest.raises(InputError, match="header has no 'job_id' column"):
        read_jobs(path)
    with pytest.raises(InputError, match="unknown format '.xlsx'"):
        read_jobs(tmp_path / "x.xlsx") if (tmp_path / "x.xlsx").write_text("") is not None else None


def test_json_lines_and_bad_json_records(tmp_path):
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"job_id": 1, "submit_time": 1546332955000, "state": "FAILED"}\n{oops\n[1]\n')
    jobs, report = read_jobs(path)
    assert list(jobs["job_id"]) == [1] and str(jobs["submit_time"].iloc[0]) == "2019-01-01 08:55:55"
    assert report.bad_rows == 2 and "jobs.jsonl:2" in str(report.problems[0])
    broken = tmp_path / "broken.json"
    broken.write_text('[{"job_id": 1},\n{"job_id": }]')
    with pytest.raises(InputError, match=r"broken.json:2: invalid JSON"):
        read_jobs(broken)


_FIELDS = HEADER.split(",")
_ANY = ["", " ", "NA", "nan", "null", "x" * 4097]
_EDGES = {
    "number": ["inf", "-inf", "1e300", "-1", "0", "1.5", "9007199254740991", "9007199254740992",
               "99999999999999999999", " 10", "10 "],
    "time": ["2019-01-01 08:55:55", "2019-01-01T08:55:55", "2019-01-01 08:55", "2019-13-01 08:55:55",
             "1969-12-31 23:59:59", "2100-01-01 00:00:00", "2100-01-01 00:00:01", " 2019-01-01 08:55:55"],
    "text": ["COMPLETED", "completed", "CANCELLED by 5", "TIMEOUT+", "EXPLODED", " TIMEOUT ", "  name  ",
             "\u00a0name", "name\u3000", "\x1cname", "name\x1f", "caf\u00e9", "x" * 4096, "y" * 65_537, "\u2028",
             "\x85"],
}


def _kind(field: str) -> str:
    from jobaware.jobtable.schema import INTEGER, NUMERIC, TIME_COLUMNS

    return "number" if field in NUMERIC or field in INTEGER else "time" if field in TIME_COLUMNS else "text"


@pytest.mark.parametrize("field", _FIELDS)
def test_the_arrow_path_reads_what_the_record_path_reads(field, tmp_path, monkeypatch):
    """Every field at every edge value, beside plain records: the column-at-a-time Arrow path gives exactly the
    table, the report and the quarantine that the record-accountable path gives (which it hands over to when a
    block holds anything it does not accept)."""
    from jobaware.jobtable import nrel

    rows = []
    for value in _ANY + _EDGES[_kind(field)]:
        fields = ROW.split(",")
        fields[_FIELDS.index(field)] = value
        rows.append(",".join(fields))
    samples = [[ROW, edge, ROW] for edge in rows] + [[ROW, "", ROW], [ROW, ROW.replace(",n,", ",n\r,"), ROW]]
    accepted = 0
    for number, lines in enumerate(samples):
        path = tmp_path / f"jobs{number}.csv"
        path.write_text("\n".join([HEADER, *lines]) + "\n")
        fast = list(nrel.iter_csv(path))
        if fast[0].problems or fast[0].quarantined:
            continue  # the Arrow path did not accept the block: the record path read it, the same code both ways
        accepted += 1
        with monkeypatch.context() as patched:
            patched.setattr(nrel, "_valid_block", lambda *args: None)
            slow = list(nrel.iter_csv(path))
        assert len(fast) == len(slow) == 1 and not slow[0].problems and not slow[0].quarantined, lines
        pd.testing.assert_frame_equal(fast[0].frame, slow[0].frame)
    assert accepted >= 3


def test_quoted_newlines_keep_line_numbers_of_bad_records(tmp_path):
    header = "job_id,user,account,partition,qos,wallclock_req,nodes_req,processors_req,gpus_req,mem_req,submit_time,start_time,end_time,run_time,state"
    good = '{id},u1,"a,\nb",p,normal,60.0,1,1,0,0.0,2020-01-01 00:00:00,2020-01-01 00:00:01,2020-01-01 00:01:00,59.0,COMPLETED'
    bad = '3,u1,a,p,normal,60.0,-1,1,0,0.0,2020-01-01 00:00:00,2020-01-01 00:00:01,2020-01-01 00:01:00,59.0,COMPLETED'
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join([header, good.format(id=1), good.format(id=2), bad]) + "\n")
    jobs, report = read_jobs(path)
    assert list(jobs["job_id"]) == [1, 2] and set(jobs["account"]) == {"a,\nb"}
    assert [(p.line, p.field) for p in report.problems] == [(6, "nodes_req")]
