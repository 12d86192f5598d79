import numpy as np
import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.failure.reader import read_jobs
from jobaware.failure.synth import TRUTH_CLASSES, write
from tests.conftest import NREL_CSV


@pytest.fixture(scope="module")
def three_formats(tmp_path_factory):
    out = tmp_path_factory.mktemp("formats")
    for fmt in ("csv", "json", "parquet"):
        write(out / f"jobs.{fmt}", 3_000, fmt, seed=11)
    return out


def test_writes_the_exact_nrel_encodings(three_formats):
    csv_lines = (three_formats / "jobs.csv").read_text().splitlines()
    assert csv_lines[0] == NREL_CSV.read_text().splitlines()[0]
    fields = csv_lines[1].split(",")
    assert len(fields) == 18 and fields[5].endswith(".0") and len(fields[10]) == 19 and fields[0].isdigit()
    assert (three_formats / "jobs.json").read_text().startswith('[{"job_id":')
    tables = [read_jobs(three_formats / f"jobs.{fmt}")[0] for fmt in ("csv", "json", "parquet")]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    pd.testing.assert_frame_equal(tables[0], tables[2])


def test_same_seed_same_data_and_realistic_structure(tmp_path, three_formats):
    write(tmp_path / "again.csv", 3_000, seed=11)
    assert (tmp_path / "again.csv").read_bytes() == (three_formats / "jobs.csv").read_bytes()
    jobs, _ = read_jobs(three_formats / "jobs.csv")
    assert jobs.groupby(["user", "submit_time"]).size().max() > 5  # job arrays land in one second
    assert (jobs["mem_req"] == 0).mean() > 0.4  # memory mostly unset
    assert jobs["wallclock_req"].isin([300, 600, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800, 345600, 864000]).mean() > 0.9
    assert set(jobs["state"]) == {"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "CANCELLED"}
    assert (jobs["end_time"] >= jobs["start_time"]).all() and (jobs["start_time"] >= jobs["submit_time"]).all()


def test_true_probabilities_are_what_the_states_were_drawn_from(synthetic):
    jobs, _ = read_jobs(synthetic[0])
    truth = pd.read_parquet(synthetic[1])
    probs = truth[[f"p_{c}" for c in TRUTH_CLASSES]]
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    assert (truth["job_id"].to_numpy() == jobs["job_id"].to_numpy()).all()
    observed = jobs["state"].value_counts(normalize=True)
    for c in TRUTH_CLASSES:
        expected = probs[f"p_{c}"].mean()
        assert abs(observed.get(c, 0.0) - expected) < 4 * np.sqrt(expected * (1 - expected) / len(jobs)) + 1e-3, c
    # timeouts are caused by the request: the true P(TIMEOUT) ranks observed timeouts far above chance
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(jobs["state"] == "TIMEOUT", truth["p_TIMEOUT"]) > 0.85


def test_job_count_is_bounded():
    with pytest.raises(InputError, match="between 1,000 and 11,000,000"):
        write("/tmp/never.csv", 10, seed=0)
