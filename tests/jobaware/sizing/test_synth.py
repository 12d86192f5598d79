import pandas as pd

from jobaware.fit import source_kind
from jobaware.sizing.synth import default_data, write_synthetic
from jobaware.swf import read_swf


def test_the_generated_trace_reads_whole_with_its_truth_beside_it(tmp_path):
    truth = write_synthetic(tmp_path / "gen.swf", 500, seed=1)
    trace = read_swf(tmp_path / "gen.swf")
    assert len(trace.jobs) == 500 and not trace.problems
    table = pd.read_parquet(truth)
    assert len(table) == 500 and (table["run_p95_s"] <= trace.jobs["time_req"].to_numpy()).all()
    assert source_kind([str(tmp_path / "gen.swf")]) == "synthetic"


def test_the_same_seed_writes_the_same_trace(tmp_path):
    write_synthetic(tmp_path / "a", 300, seed=4)
    write_synthetic(tmp_path / "b", 300, seed=4)
    assert (tmp_path / "a" / "synthetic_sizing.swf").read_bytes() == (tmp_path / "b" / "synthetic_sizing.swf").read_bytes()


def test_make_run_trains_on_the_real_kth_trace(tmp_path):
    assert default_data(tmp_path).endswith("jobaware/data/real/swf/KTH-SP2-1996-2.1-cln.swf")
    assert source_kind([default_data(tmp_path)]) == "real"
