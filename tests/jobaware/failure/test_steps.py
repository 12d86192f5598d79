import json

import pandas as pd
import pytest

from jobaware import steps
from jobaware.errors import ContractError
from jobaware.failure.schema import jobs_table
from jobaware.failure.train import featurize_file
from jobaware.reading import QUARANTINE
from tests.conftest import KTH, NREL_CSV


def test_an_swf_trace_goes_through_the_pipeline_steps_under_its_own_contract(tmp_path):
    dataset = tmp_path / "dataset"
    report = steps.ingest("failure", str(KTH), dataset)
    assert report.rows == 28_476 and jobs_table(dataset).name == "swf_jobs.parquet"
    checked = steps.validate_step(str(dataset), str(tmp_path / "report.json"))
    assert checked["success"] and json.loads((tmp_path / "report.json").read_text())["contracts"][0]["contract"] == "swf_jobs"
    # 70 % of the jobs by submit time, less those that had not ended by the cut
    assert 19_000 < featurize_file(jobs_table(dataset), tmp_path / "features.parquet") < 0.7 * 28_476


def test_validate_step_stops_at_a_failed_contract_and_at_bad_records_beyond_the_budget(tmp_path):
    lines = NREL_CSV.read_text().splitlines()
    lines[2] = lines[2].replace(",10,10,0,0.0,", ",10,10,0,-5.0,")
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    dataset = tmp_path / "bad-dataset"
    assert steps.ingest("failure", str(bad), dataset).bad_rows == 1  # the reader quarantines the negative request
    quarantined = [json.loads(line) for line in (dataset / QUARANTINE).read_text().splitlines()]
    assert [q["line"] for q in quarantined] == [3]
    assert steps.validate(dataset, budget=0.01)["success"]  # 1 of 700 is within a 1 % budget ...
    with pytest.raises(ContractError, match=r"1 bad record\(s\) of 700 read \(0.14%, over the budget of 0.00%\)"):
        steps.validate_step(str(dataset), str(tmp_path / "r0.json"), budget=0.0)  # ... not within none
    # the contract catches what a reader lets through, e.g. a non-final state
    good = tmp_path / "good-dataset"
    steps.ingest("failure", str(NREL_CSV), good)
    table = pd.read_parquet(good / "nrel_jobs.parquet")
    table.loc[0, "state"] = "PENDING"
    table.to_parquet(good / "nrel_jobs.parquet")
    with pytest.raises(ContractError, match="expect_column_values_to_be_in_set on column state"):
        steps.validate_step(str(good), str(tmp_path / "r.json"))
    assert not json.loads((tmp_path / "r.json").read_text())["success"]


def test_object_store_uris_are_read_through_pyarrow_filesystems(tmp_path):
    dataset = tmp_path / "dataset"
    report = steps.ingest("failure", NREL_CSV.as_uri(), dataset)  # file:// goes the way s3:// and gs:// go
    assert report.rows == 700 and len(pd.read_parquet(dataset / "nrel_jobs.parquet")) == 700
    with pytest.raises(Exception, match="file:///no/such/jobs.csv: no such object"):
        steps.ingest("failure", "file:///no/such/jobs.csv", tmp_path / "none")
