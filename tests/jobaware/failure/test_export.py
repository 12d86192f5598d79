"""Training from a job store: both backends give the pipeline's ingest step the same records."""

import pandas as pd
import pytest

from jobaware import steps
from jobaware.adapters.slurm.collector import Collector
from jobaware.errors import JobawareError
from jobaware.store import open_store
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import SQUEUE


def test_ingest_and_validate_read_the_same_records_from_both_backends(tmp_path, fresh_redis):
    tables = []
    for uri in (str(tmp_path / "store"), fresh_redis):
        with open_store(uri) as store:
            Collector(store, "c", Replay(squeue=SQUEUE.read_text(), **NO_ACCOUNTING)).poll()
        dataset = tmp_path / f"dataset{len(tables)}"
        report = steps.ingest("failure", uri, dataset)  # what the pipeline's ingest component calls
        assert report.bad_rows == 0
        assert steps.validate(dataset)["success"]
        tables.append(pd.read_parquet(next(dataset.glob("*.parquet"))))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert sorted(tables[0]["state"]) == ["COMPLETED", "FAILED"]


def test_a_capability_without_a_store_reader_says_so(tmp_path):
    with open_store(str(tmp_path / "store")) as store:
        store.put_checkpoint("c", {})
    with pytest.raises(JobawareError, match="hold does not train from a job store"):
        steps.ingest("hold", str(tmp_path / "store"), tmp_path / "out")
