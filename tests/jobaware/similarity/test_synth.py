"""The generator: exact formats, tables that agree with each other, the real shape, families, seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.similarity import synth
from jobaware.similarity.schema import FLOATS, METRICS, aggregate_zeros, quantise

from .conftest import REAL


def _codings(path):
    frame = pd.read_csv(path, dtype={"coding": str})
    return frame, [np.array(c.split(":"), int) for c in frame["coding"]]


def test_real_shape_constants_are_measured_on_the_real_sample():
    _, codings = _codings(REAL)
    measured = synth.measure_shape(codings)
    for key in ("one_segment", "zero_given_one", "zero_given_longer", "idle_share"):
        assert measured[key] == pytest.approx(synth.REAL_SHAPE[key], abs=0.005), key
    assert measured["longest"] == synth.REAL_SHAPE["longest"]
    lengths = np.array([len(c) for c in codings])
    for (low, count), high in zip(synth.REAL_SHAPE["length_bins"],
                                  [b[0] - 1 for b in synth.REAL_SHAPE["length_bins"][1:]] + [433], strict=True):
        assert ((lengths >= low) & (lengths <= high)).sum() == count


@pytest.mark.timeout(120)
def test_generated_pool_has_the_real_shape(tmp_path):
    truth = synth.write_synthetic(tmp_path, 40_000, seed=1, tables=(synth.CODINGS,))
    assert truth == tmp_path / "families.csv"
    _, codings = _codings(tmp_path / synth.FILES[synth.CODINGS])
    _, real = _codings(REAL)
    got, want = synth.measure_shape(codings), synth.measure_shape(real)
    for key in ("one_segment", "all_zero", "zero_given_one", "zero_given_longer"):
        assert got[key] == pytest.approx(want[key], abs=0.03), key
    assert got["idle_share"] == pytest.approx(want["idle_share"], abs=0.03)
    assert got["median_length"] == 1 and got["p99_length"] == pytest.approx(want["p99_length"], rel=0.2)
    long_share = np.mean([len(c) > 40 for c in codings])
    assert long_share == pytest.approx(np.mean([len(c) > 40 for c in real]), abs=0.004)
    # the long tail: the real sample has 2 jobs of 300+ segments in 70k; the sampler reaches 400+
    lengths = synth._Shapes(np.random.default_rng(0)).longer_lengths(400_000)
    assert lengths.max() >= 400 and lengths.max() <= 433


def test_formats_are_exact_and_the_tables_agree(generated):
    binary = (generated / synth.FILES[synth.CODINGS]).read_bytes()
    assert binary.startswith(b"coding,jobid\r\n") and binary.count(b"\r\n") == 4001
    levels = pd.read_csv(generated / synth.FILES[synth.LEVELS], dtype=str)
    assert list(levels.columns) == ["jobid", *FLOATS, *METRICS, "coding_abs", "coding_abs_aggzeros"]
    nodes = pd.read_csv(generated / synth.FILES[synth.NODE_VALUES], dtype=str)
    meta = pd.read_csv(generated / synth.FILES[synth.JOBS], dtype={"job_name": str})
    codings, _ = _codings(generated / synth.FILES[synth.CODINGS])
    assert levels["jobid"].astype(int).tolist() == codings["jobid"].tolist() == meta["jobid"].tolist()
    assert (levels["coding_abs"] == codings["coding"]).all()
    by_job = nodes.groupby(nodes["jobid"].astype(int))
    assert (by_job.size().reindex(meta["jobid"]).to_numpy() == meta["nodes"].to_numpy()).all()
    for i in range(0, 4000, 97):
        row, jobid = levels.iloc[i], int(levels["jobid"].iloc[i])
        coding = np.array(row["coding_abs"].split(":"), int)
        assert np.array_equal(np.array(row["coding_abs_aggzeros"].split(":"), int), aggregate_zeros(coding))
        per_node = by_job.get_group(jobid)
        for m, metric in enumerate(METRICS):
            node_values = np.array([r.split(":") for r in per_node[metric]], float)  # nodes x segments
            mean = node_values.mean(axis=0)
            assert np.allclose(np.array(row[f"{metric}_float"].split(":"), float), mean, atol=5e-5)
            assert np.array_equal(np.array(row[metric].split(":"), int), quantise(mean))
            assert np.array_equal((coding >> m) & 1, (node_values > 0).any(axis=0).astype(int))
            assert set(np.unique(node_values)) <= {0, 0.5, 1, 2, 2.5, 4}
        assert meta.loc[i, "elapsed"] // 600 == len(coding) - 1 or meta.loc[i, "elapsed"] == len(coding) * 600


def test_families_are_planted_with_their_variants(generated):
    truth = pd.read_csv(generated / "families.csv", keep_default_na=False)
    members = truth[truth["family"] >= 0]
    assert 0.15 < len(members) / len(truth) < 0.3
    assert (members.groupby("family").size() >= 2).all()
    assert (members.groupby("family")["variant"].apply(lambda v: (v == "template").sum()) == 1).all()
    variants = set("+".join(members["variant"]).replace("+", " ").split())
    assert variants == {"template", "rerun", "nodes", "stretch", "shift", "idle"}
    assert (truth.loc[truth["family"] < 0, "variant"] == "").all()


def test_same_seed_same_bytes_other_seed_other_jobs(tmp_path):
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        synth.write_synthetic(tmp_path / name, 500, seed=seed, tables=(synth.CODINGS, synth.LEVELS))
    read = {n: (tmp_path / n / synth.FILES[synth.LEVELS]).read_bytes() for n in "abc"}
    assert read["a"] == read["b"] != read["c"]


def test_a_binary_path_names_the_files_beside_it(tmp_path):
    truth = synth.write_synthetic(tmp_path / "pool.csv", 200, seed=0)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["pool.csv", "pool_families.csv", "pool_jobs.csv", "pool_levels.csv", "pool_node_values.csv"]
    assert truth == tmp_path / "pool_families.csv"


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(InputError, match="jobs: expected 100"):
        synth.write_synthetic(tmp_path, 5, seed=0)
    with pytest.raises(InputError, match="format: the Mistral tables are CSV only"):
        synth.write_synthetic(tmp_path, 500, 0, "parquet")
    with pytest.raises(InputError, match="tables:"):
        synth.write_synthetic(tmp_path, 500, 0, tables=(synth.JOBS,))
