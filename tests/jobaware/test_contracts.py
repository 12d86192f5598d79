import pandas as pd
import pytest

from jobaware.contracts import format_report, load_suite, require, validate_frames, validate_parquet
from jobaware.errors import ContractError
from jobaware.failure.reader import read_jobs
from tests.conftest import KTH, NREL_CSV


def test_real_samples_meet_their_contracts():
    assert validate_frames([read_jobs(NREL_CSV)[0]], "nrel_jobs")["success"]
    assert validate_frames([read_jobs(KTH)[0]], "swf_jobs")["success"]


def test_broken_table_fails_with_a_readable_report():
    jobs = read_jobs(NREL_CSV)[0]
    jobs.loc[3, "state"] = "RUNNING"
    jobs.loc[5:7, "end_time"] = pd.Timestamp("2000-01-01")
    jobs.loc[9, "nodes_req"] = -3
    report = validate_frames([jobs.iloc[:350], jobs.iloc[350:]], "nrel_jobs")
    assert not report["success"] and report["rows"] == 700
    failed = {(f["expectation"], f["column"]): f for f in report["failed"]}
    assert failed[("expect_column_values_to_be_in_set", "state")]["unexpected_count"] == 1
    assert failed[("expect_column_values_to_be_in_set", "state")]["examples"] == ["RUNNING"]
    assert failed[("expect_column_pair_values_a_to_be_greater_than_b", "end_time, start_time")]["unexpected_count"] == 3
    assert failed[("expect_column_values_to_be_between", "nodes_req")]["examples"] == [-3]
    text = format_report(report)
    assert "3 of 15 expectations failed on 700 rows" in text and "column state: 1 row(s), e.g. ['RUNNING']" in text
    with pytest.raises(ContractError, match="expectations failed"):
        require(report)


def test_a_null_value_failure_names_its_rows_not_the_nulls():
    jobs = read_jobs(KTH)[0]
    jobs.loc[[4, 2000], "state"] = None
    report = validate_frames([jobs.iloc[:1000], jobs.iloc[1000:]], "swf_jobs")
    failed = {(f["expectation"], f["column"]): f for f in report["failed"]}
    nulls = failed[("expect_column_values_to_not_be_null", "state")]
    job_ids = jobs["job_id"].iloc[[4, 2000]].tolist()
    assert nulls["unexpected_count"] == 2
    assert nulls["examples"] == [f"row 5 (job_id {job_ids[0]})", f"row 2001 (job_id {job_ids[1]})"]


def test_swf_contract_accepts_what_the_format_leaves_unknown():
    """SWF allows -1 in every field but the job number and submit time: unknown requests are not violations."""
    jobs = read_jobs(KTH)[0]
    jobs.loc[::3, ["wallclock_req", "processors_req", "user", "account"]] = None
    assert validate_frames([jobs], "swf_jobs")["success"]


def test_two_checks_of_one_column_are_both_kept_and_reported_in_the_contracts_order():
    """The NREL contract bounds wallclock_req twice: never negative, and at least 1 s for 99 % of jobs. Great
    Expectations keeps one expectation per type and column in a suite; both must still be checked and reported."""
    jobs = read_jobs(NREL_CSV)[0]
    jobs.loc[4, "wallclock_req"] = -60.0  # one job in 700: within the 1 % the second check allows
    report = validate_frames([jobs], "nrel_jobs")
    assert [r["expectation"] for r in report["results"]] == [e["type"] for e in load_suite("nrel_jobs")["expectations"]]
    failed = [(f["expectation"], f["column"], f["unexpected_count"]) for f in report["failed"]]
    assert failed == [("expect_column_values_to_be_between", "wallclock_req", 1)]


def test_a_parquet_table_is_checked_on_the_columns_the_contract_reads_and_its_schema(tmp_path):
    jobs = read_jobs(NREL_CSV)[0].drop(columns=["work_dir"])  # a column the contract only names
    jobs.to_parquet(tmp_path / "jobs.parquet")
    report = validate_parquet(tmp_path / "jobs.parquet", "nrel_jobs")
    assert [f["expectation"] for f in report["failed"]] == ["expect_table_columns_to_match_set"]
