"""The index: built once, saved, memory-mapped, sharded; rankings, histograms, consensus, lookups."""

from __future__ import annotations

import joblib
import numpy as np
import pytest

from jobaware.errors import InputError, JobawareError
from jobaware.similarity.algorithms import ALGORITHMS
from jobaware.similarity.index import BINS, Reference, SimilarityIndex, histogram, rank

from .jobs import index_of, random_job


def test_rank_sorts_by_similarity_then_jobid_and_skips_the_incomparable():
    scores = np.array([0.5, 0.9, np.nan, 0.9, 0.1, 0.5])
    jobids = np.array([10, 20, 30, 5, 40, 1])
    top, values = rank(scores, jobids, 4)
    assert top.tolist() == [5, 20, 1, 10] and values.tolist() == [0.9, 0.9, 0.5, 0.5]
    assert rank(scores, jobids, 100)[0].tolist() == [5, 20, 1, 10, 40]


def test_histogram_has_forty_bins_of_two_and_a_half_percent():
    counts = histogram(np.array([0.0, 0.024, 0.025, 0.5, 0.999, 1.0, np.nan]))
    assert len(BINS) == 41 and BINS[1] == pytest.approx(0.025)
    assert counts.sum() == 6 and counts[0] == 2 and counts[1] == 1 and counts[20] == 1 and counts[39] == 2


def test_real_sample_every_job_is_its_own_best_match(real_index):
    rng = np.random.default_rng(8)
    jobids = real_index.jobids
    assert real_index.size == 69_937
    for jobid in rng.choice(jobids, 25, replace=False).tolist():
        for algorithm in ("b-all", "b-aggz"):
            scores = real_index.scores(real_index.reference(jobid), algorithm)
            own = scores[np.searchsorted(jobids, jobid)]
            assert own == 1.0 and np.nanmax(scores) == 1.0
            answer = real_index.query(real_index.reference(jobid), algorithm, top_k=50)
            tied = jobids[scores == 1.0]
            # the job itself is among the best; ties (identical codings) come by jobid
            assert jobid in [r["jobid"] for r in answer["ranking"]] or len(tied) > 50
            assert answer["ranking"][0]["similarity"] == 1.0
            assert sum(answer["histogram"]["counts"]) == answer["comparable"] == real_index.size


def test_query_by_inline_coding_equals_query_by_jobid(generated_index):
    jobid = int(generated_index.jobids[17])
    stored = generated_index.reference(jobid)
    inline = Reference(coding=stored.coding, levels=stored.levels, values=stored.values)
    for algorithm in ALGORITHMS:
        try:
            expected = generated_index.scores(stored, algorithm)
        except InputError:
            continue
        assert np.array_equal(generated_index.scores(inline, algorithm), expected, equal_nan=True)


def test_save_load_memory_maps_and_answers_the_same(generated_index, tmp_path):
    folder = generated_index.save(tmp_path / "index")
    loaded = SimilarityIndex.load(folder)
    assert loaded.version == generated_index.version and loaded.size == generated_index.size
    assert isinstance(loaded.shards[0]["coding_ids"], np.memmap)
    jobid = int(generated_index.jobids[3])
    for algorithm in ALGORITHMS:
        try:
            expected = generated_index.scores(generated_index.reference(jobid), algorithm)
        except InputError:
            continue
        assert np.array_equal(loaded.scores(loaded.reference(jobid), algorithm), expected, equal_nan=True)
    assert loaded.job(jobid) == generated_index.job(jobid)


def test_load_refuses_other_folders_and_other_feature_versions(tmp_path, generated_index):
    with pytest.raises(InputError, match="not a similarity index"):
        SimilarityIndex.load(tmp_path)
    folder = generated_index.save(tmp_path / "index")
    meta = (folder / "index.json").read_text().replace('"feature_version": "1"', '"feature_version": "0"')
    (folder / "index.json").write_text(meta)
    with pytest.raises(JobawareError, match="rebuild the index"):
        SimilarityIndex.load(folder)


def test_shards_give_the_same_scores_as_one_index(generated_dataset, generated_index):
    sharded = SimilarityIndex.build(generated_dataset, shard_jobs=1000)
    assert len(sharded.shards) == 4 and len(generated_index.shards) == 1
    assert np.array_equal(sharded.jobids, generated_index.jobids)
    jobid = int(generated_index.jobids[2500])
    for algorithm in ALGORITHMS:
        try:
            expected = generated_index.scores(generated_index.reference(jobid), algorithm)
        except InputError:
            continue
        assert np.allclose(sharded.scores(sharded.reference(jobid), algorithm), expected, equal_nan=True, atol=1e-12)


def test_pickled_with_joblib_and_memory_mapped_back(generated_index, tmp_path):
    path = tmp_path / "index.joblib"
    generated_index.scores(generated_index.reference(int(generated_index.jobids[0])), "b-all")  # fills a cache
    joblib.dump(generated_index, path)
    back = joblib.load(path, mmap_mode="r")
    assert isinstance(back.shards[0]["coding_values"], np.memmap)
    assert back.version == generated_index.version
    jobid = int(generated_index.jobids[1])
    assert np.array_equal(back.scores(back.reference(jobid), "b-aggz"),
                          generated_index.scores(generated_index.reference(jobid), "b-aggz"))


def test_consensus_is_the_jobs_every_algorithm_ranks_in_its_top_k(generated_index):
    jobid = int(generated_index.jobids[5])
    ref = generated_index.reference(jobid)
    chosen = ["b-all", "q-lev", "q-phases"]
    got = generated_index.consensus(ref, chosen, top_k=30)
    tops = [set(r["jobid"] for r in generated_index.query(ref, a, 30)["ranking"]) for a in chosen]
    assert {r["jobid"] for r in got} == set.intersection(*tops)
    scores = [generated_index.scores(ref, a) for a in chosen]
    for item in got:
        at = np.searchsorted(generated_index.jobids, item["jobid"])
        assert item["similarity"] == pytest.approx(np.mean([s[at] for s in scores]))
    assert [r["similarity"] for r in got] == sorted((r["similarity"] for r in got), reverse=True)


def test_job_lookup_and_unknown_jobs(generated_index):
    jobid = int(generated_index.jobids[0])
    job = generated_index.job(jobid)
    assert job["jobid"] == jobid and job["segments"] == len(job["coding"].split(":"))
    assert set(job["levels"]) == {"md_file_create", "md_file_delete", "md_mod", "md_other", "md_read",
                                  "read_bytes", "read_calls", "write_bytes", "write_calls"}
    assert set(job["metadata"]) == {"user", "group", "nodes", "elapsed", "job_name"}
    assert job["node_values"]["count"] >= 1
    with pytest.raises(InputError, match="jobid: unknown job 1 "):
        generated_index.job(1)


def test_a_pool_without_node_values_ranks_by_levels():
    rng = np.random.default_rng(3)
    jobs = [random_job(rng) for _ in range(20)]
    index = index_of(jobs, node_values=False)
    assert index.tables == ["mistral_codings", "mistral_levels"]
    assert index.info["duplicate_jobids"] == 0
    scores = index.scores(index.reference(4), "q-native")
    assert scores.shape == (20,) and np.isfinite(scores).all()


def test_threads_give_the_same_scores_as_one_core(generated_index):
    jobid = int(generated_index.jobids[40])
    reference = generated_index.reference(jobid)
    for algorithm in ALGORITHMS:
        try:
            one = generated_index.scores(reference, algorithm, workers=1)
        except InputError:
            continue
        assert np.array_equal(generated_index.scores(reference, algorithm, workers=4), one, equal_nan=True)
