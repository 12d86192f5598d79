import json

import pytest

from jobaware.errors import ContractError
from jobaware.failure.steps import featurize_step, ingest_step, validate_step
from tests.conftest import KTH, NREL_CSV


def test_an_swf_trace_goes_through_the_pipeline_steps_under_its_own_contract(tmp_path):
    report = ingest_step(str(KTH), str(tmp_path / "jobs.parquet"))
    assert report["contract"] == "swf_jobs" and report["rows"] == 28_476
    checked = validate_step(str(tmp_path / "jobs.parquet"), report["contract"], str(tmp_path / "report.json"))
    assert checked["success"] and json.loads((tmp_path / "report.json").read_text())["contract"] == "swf_jobs"
    assert featurize_step(str(tmp_path / "jobs.parquet"), str(tmp_path / "features.parquet"), "{}") > 15_000


def test_validate_step_stops_at_a_failed_contract(tmp_path):
    lines = NREL_CSV.read_text().splitlines()
    lines[2] = lines[2].replace(",10,10,0,0.0,", ",10,10,0,-5.0,")
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    report = ingest_step(str(bad), str(tmp_path / "jobs.parquet"))
    assert report["bad_rows"] == 1  # the reader quarantines the negative request ...
    ingest_step(str(NREL_CSV), str(tmp_path / "jobs.parquet"))
    # ... and the contract catches what a reader lets through, e.g. a non-final state
    import pandas as pd

    table = pd.read_parquet(tmp_path / "jobs.parquet")
    table.loc[0, "state"] = "PENDING"
    table.to_parquet(tmp_path / "pending.parquet")
    with pytest.raises(ContractError, match="expect_column_values_to_be_in_set on column state"):
        validate_step(str(tmp_path / "pending.parquet"), "nrel_jobs", str(tmp_path / "r.json"))
    assert not json.loads((tmp_path / "r.json").read_text())["success"]
