import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.failure.reader.slurm import from_squeue, parse_request, read_squeue_json
from jobaware.jobtable.schema import COLUMNS, LIMITS
from tests.conftest import SQUEUE


def test_captured_squeue_output_maps_onto_the_canonical_table():
    jobs = read_squeue_json(SQUEUE)[0].set_index("name")
    assert jobs.loc["ok", "state"] == "COMPLETED" and jobs.loc["bad", "state"] == "FAILED"
    assert jobs.loc["slow", "state"] == "PENDING" and jobs.loc["held", "state"] == "PENDING"
    assert jobs.loc["held", "wallclock_req"] == 300.0 and jobs.loc["ok", "wallclock_req"] == 60.0
    assert jobs.loc["ok", "user"] == "root" and jobs.loc["ok", "partition"] == "debug"
    assert jobs.loc["ok", "nodes_req"] == 1 and jobs.loc["ok", "processors_req"] == 1
    assert jobs.loc["ok", "mem_req"] == 0.0  # no --mem: not specified, as in the NREL table
    assert str(jobs.loc["held", "end_time"]) == "NaT" and str(jobs.loc["slow", "end_time"]) == "NaT"


def test_later_slurm_versions_wrapped_numbers_and_gpus():
    record = {"job_id": 9, "user_name": "u", "job_state": ["PENDING"], "time_limit": {"set": True, "infinite": False, "number": 30},
              "cpus": {"set": True, "number": 8}, "node_count": {"set": True, "number": 2}, "memory_per_cpu": {"set": True, "number": 1000},
              "tres_per_node": "gres:gpu:2", "submit_time": {"set": True, "number": 1700000000}}
    row = from_squeue(record)
    assert row["wallclock_req"] == 1800.0 and row["processors_req"] == 8 and row["nodes_req"] == 2
    assert row["mem_req"] == 8000.0 and row["gpus_req"] == 2 and row["state"] == "PENDING"


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        ([], "jobs: expected a non-empty list"),
        ([3], r"jobs\[0\]: expected an object"),
        ([{"user": "u"}], r"jobs\[0\].job_id: missing"),
        ([{"job_id": 1}, {"job_id": 2, "nodes_req": "many"}], r'jobs\[1\].nodes_req: expected a number, got "many"'),
        ([{"job_id": 1, "nodes_req": -1}], r"jobs\[0\].nodes_req: expected a non-negative number"),
        ([{"job_id": 1, "nodes_req": 1.5}], r"jobs\[0\].nodes_req: expected a whole number"),
        ([{"job_id": 1, "submit_time": "soon"}], r"jobs\[0\].submit_time: expected a time"),
        ([{"job_id": 1, "state": "DONE"}], r"jobs\[0\].state: expected one of"),
        ([{"job_id": 1, "wallclock": 5}], r"jobs\[0\].wallclock: unknown field"),
    ],
)
def test_request_records_are_refused_naming_the_bad_field(jobs, message):
    with pytest.raises(InputError, match=message):
        parse_request(jobs).frame()


def test_request_records_become_the_same_frame_as_the_canonical_cast():
    from jobaware.jobtable.common import to_canonical_dtypes
    from jobaware.jobtable.schema import COLUMNS

    records = [
        {"job_id": 1, "user": "u1", "partition": "p", "wallclock_req": 3600, "nodes_req": 2, "processors_req": 72,
         "submit_time": "2019-03-01 10:00:00.7", "mem_req": 1.5, "state": "COMPLETED", "end_time": 1551434400123},
        {"job_id": 2, "user": 7, "gpus_req": 1.0, "submit_time": 1551434400000, "name": "x" * 200},
    ]
    parsed = parse_request(records).frame()
    rows = [{c: r.get(c) for c in COLUMNS} for r in records]
    rows[0]["submit_time"] = pd.Timestamp(rows[0]["submit_time"])
    rows[0]["end_time"] = pd.Timestamp(rows[0]["end_time"], unit="ms")
    rows[1]["submit_time"] = pd.Timestamp(rows[1]["submit_time"], unit="ms")
    rows[1]["user"] = "7"
    pd.testing.assert_frame_equal(parsed, to_canonical_dtypes(pd.DataFrame(rows, columns=list(COLUMNS))))


_EDGES = [
    None, "", True, False, 0, -1, 7, 0.5, 2.0, float("nan"), float("inf"), float("-inf"), 2**53 - 1, 2**53, 10**19,
    10**400, "abc", " ", "x" * 4096, "x" * 4097, "x" * 65_536, "x" * 65_537, [1], {"a": 1},
    "2019-03-01 10:00:00", "2019-03-01T10:00:00", "2019-03-01 10:00:00.7", "2019-03-01T10:00+01", "soon",
    "1970-01-01 00:00:00", "2100-01-01 00:00:00", "2100-01-01 00:00:01", 4_102_444_800_000, 4_102_444_800_001,
    1_551_434_400_123, 1_551_434_400_123.5, "COMPLETED", "completed", "CANCELLED by 5", "TIMEOUT+", "DONE",
    *{bound + step for low, high in LIMITS.values() for bound in (low, high) for step in (-1, 0, 1)},
]


@pytest.mark.parametrize("field", COLUMNS)
def test_a_batch_checked_column_by_column_is_what_checking_each_record_gives(field):
    """The column-at-a-time path accepts only what the record-by-record path accepts, with the same values:
    every field, at every edge value, beside a plain valid record."""
    from jobaware.failure.reader.slurm import _record_by_record, _valid_columns

    valid = {"job_id": 5, "user": "u", "account": "a", "partition": "p", "qos": "q", "wallclock_req": 60.0,
             "nodes_req": 1, "processors_req": 2, "gpus_req": 0, "mem_req": 100.0,
             "submit_time": "2019-03-01 10:00:00", "start_time": None, "end_time": 1_551_434_400_000, "run_time": 3.0,
             "state": "COMPLETED", "name": "n", "work_dir": "/w", "submit_line": "sbatch x"}
    accepted = 0
    for value in _EDGES:
        jobs = [valid, {**valid, field: value}, {"job_id": 6}]
        fast = _valid_columns(jobs, 1_700_000_000)
        if fast is None:
            continue
        accepted += 1
        slow = _record_by_record(jobs, 1_700_000_000)  # raises if the fast path let a bad value through
        for column in COLUMNS:
            assert fast[column].dtype == slow[column].dtype, (column, value)
            assert [str(v) for v in fast[column]] == [str(v) for v in slow[column]], (column, value)
    assert accepted >= 3  # the fast path is taken, not skipped


def _record_schemas() -> tuple[dict, dict]:
    """The canonical and the squeue record as the service's OpenAPI document shows them (the body's own schema)."""
    from jobaware.bodies import openapi_schema
    from jobaware.failure.service import PredictRequest

    canonical, squeue = openapi_schema(PredictRequest)["properties"]["jobs"]["items"]["oneOf"]
    return canonical, squeue


def _bounds(described: dict) -> list[tuple[list, list]]:
    """(values at the bounds, values past them) of each alternative of a field the document describes."""
    out = []
    for kind in described.get("oneOf", [described]):
        if kind.get("type") in ("integer", "number"):
            out.append(([kind["minimum"], kind["maximum"]], [kind["minimum"] - 1, kind["maximum"] + 1]))
        elif kind.get("enum"):
            out.append((kind["enum"], ["NOT_A_STATE"]))
        elif "maxLength" in kind:
            out.append((["", "x" * kind["maxLength"]], ["x" * (kind["maxLength"] + 1)]))
        elif kind.get("type") == "object" and "number" in kind.get("properties", {}):  # Slurm 23's wrapper
            inner = kind["properties"]["number"]
            out.append(([{"set": True, "infinite": False, "number": inner["maximum"]}],
                        [{"set": True, "infinite": False, "number": inner["maximum"] + 1}]))
    return out


def test_the_document_and_the_parser_behind_it_agree_at_every_bound():
    """The parser of `/predict` stays hand-written (the hot path) behind the body's pydantic models: what the
    OpenAPI document calls a valid record at each bound it states, `parse_request` accepts; one step past it,
    `parse_request` refuses naming the field. For canonical records and `squeue --json` ones."""
    import re

    from jobaware.failure.reader.slurm import parse_request

    canonical, squeue = _record_schemas()
    assert set(canonical["properties"]) == set(COLUMNS) and canonical["required"] == ["job_id"]
    assert squeue["required"] == ["job_id", "job_state"] and squeue.get("additionalProperties", True) is not False
    cases = 0
    for schema, base in ((canonical, {"job_id": 1}), (squeue, {"job_id": 1, "job_state": "PENDING"})):
        for column, described in schema["properties"].items():
            for edges, beyond in _bounds(described):
                for value in edges:
                    parse_request([{**base, column: value}])
                    cases += 1
                for value in beyond:
                    with pytest.raises(InputError, match=re.escape(f"jobs[0].{column}:")):
                        parse_request([{**base, column: value}])
                    cases += 1
    assert cases >= 80
    with pytest.raises(InputError, match=r"jobs\[0\]\.no_such_field: unknown field"):  # additionalProperties: false
        parse_request([{"job_id": 1, "no_such_field": 1}])


def test_the_time_pattern_and_the_request_check_agree_on_every_day():
    """The OpenAPI document's pattern for a time and parse_request agree on every calendar day from before 1970
    to after 2099 (February 29th in leap years only); found by Schemathesis, whose valid times once included
    2019-02-31."""
    import datetime
    import re

    from jobaware.failure.reader.slurm import parse_request
    from jobaware.jobtable.schema import TIME_TEXT_PATTERN

    canonical, _ = _record_schemas()
    assert canonical["properties"]["submit_time"]["oneOf"][0]["pattern"] == TIME_TEXT_PATTERN  # what the document shows

    day, disagree = datetime.date(1969, 12, 25), []
    while day < datetime.date(2100, 1, 5):
        text = f"{day.isoformat()}T23:59:59"
        try:
            parse_request([{"job_id": 1, "submit_time": text}])
            accepted = True
        except InputError:
            accepted = False
        if accepted != bool(re.match(TIME_TEXT_PATTERN, text)):
            disagree.append(text)
        day += datetime.timedelta(days=1)
    assert not disagree, disagree[:5]


def test_a_request_over_its_job_limit_is_refused_with_the_limit():
    from jobaware.failure.reader.slurm import parse_request

    assert len(parse_request([{"job_id": 1}, {"job_id": 2}], max_jobs=2)["job_id"]) == 2
    with pytest.raises(InputError, match=r"^jobs: at most 2 jobs per request, got 3$"):
        parse_request([{"job_id": i} for i in range(3)], max_jobs=2)
