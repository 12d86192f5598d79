"""The fast engine against the plain reference implementations, the hand checks, and properties."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import similarity_reference as ref_impl
from jobaware.errors import InputError
from jobaware.similarity import algorithms as alg
from jobaware.similarity.index import Reference
from jobaware.similarity.schema import METRICS, NODE_VALUES

from .jobs import index_of, long_job, random_job

TOLERANCE = 1e-6


def _levels(*metrics):
    """Nine level sequences: the given ones first, the rest all zero of the same length."""
    length = len(metrics[0])
    return [list(m) for m in metrics] + [[0] * length] * (9 - len(metrics))


def _job(levels, coding=None):
    coding = coding or [0] * len(levels[0])
    nodes = np.zeros((1, 9, len(coding)))
    return {"coding": coding, "levels": levels, "nodes": nodes, "values": [[0.0] * len(coding)] * 9}


def _pair_score(algorithm: str, a: dict, b: dict) -> float:
    index = index_of([a, b])
    return float(index.scores(index.reference(1), algorithm)[1])


def test_q_native_hand_check_one_metric():
    a = _job(_levels([0, 8, 16, 9, 1, 8, 0, 0]))
    b = _job(_levels([7, 16, 5, 0, 9]))
    assert ref_impl.q_native(a, b) == pytest.approx(0.5703125, abs=1e-12)
    assert _pair_score("q-native", a, b) == pytest.approx(0.5703125, abs=1e-12)
    assert _pair_score("q-native", b, a) == pytest.approx(0.5703125, abs=1e-12)


def test_q_native_hand_check_two_metrics():
    a = _job(_levels([1, 2, 3, 4], [0, 1, 0, 0]))
    b = _job(_levels([1, 2, 3, 4, 5], [0, 0, 0, 0, 1]))
    assert ref_impl.q_native(a, b) == pytest.approx(0.79375, abs=1e-12)
    assert _pair_score("q-native", a, b) == pytest.approx(0.79375, abs=1e-12)


def test_q_phases_small_worked_example():
    # metric 1: [2,2,9,3] vs [2,2,2,2,8,2]: best shift 2/2 + 2/2 + 8/9 + 2/3, weight 6; metric 2 none
    a = _job(_levels([2, 2, 9, 3, 0, 0]))
    b = _job(_levels([2, 2, 2, 2, 8, 2]))
    expected = (1 + 1 + 8 / 9 + 2 / 3) / 6
    assert ref_impl.q_phases(a, b) == pytest.approx(expected, abs=1e-12)
    assert _pair_score("q-phases", a, b) == pytest.approx(expected, abs=1e-12)


def test_levenshtein_formula_hand_check():
    a = _job(_levels([0]), coding=[1, 0, 0, 0, 5, 96])
    b = _job(_levels([0]), coding=[1, 5, 96])
    assert _pair_score("b-all", a, b) == pytest.approx(0.5)   # three deletions over max length 6
    assert _pair_score("b-aggz", a, b) == pytest.approx(0.75)  # [1,0,5,96] vs [1,5,96]: one deletion over 4


@pytest.mark.parametrize("algorithm", alg.ALGORITHMS)
def test_engine_agrees_with_reference_on_random_pairs(algorithm):
    rng = np.random.default_rng(11)
    jobs = [random_job(rng, max_len=16) for _ in range(150)]
    # long jobs (up to 420 segments) and exact copies too
    jobs += [long_job(rng, int(length)) for length in (40, 90, 180, 420)]
    jobs += [dict(jobs[i]) for i in range(5)]
    index = index_of(jobs)
    compared = 0
    references = [*rng.choice(150, 12, replace=False).tolist(), 150, 153]
    for r in references[-10:] if algorithm == "ks" else references:  # scipy's KS is slow: 10 x 169 pairs
        try:
            scores = index.scores(index.reference(r + 1), algorithm)
        except alg.NotComparableError:
            assert ref_impl.ks(jobs[r], jobs[r]) is None
            continue
        for i, job in enumerate(jobs):
            expected = ref_impl.REFERENCE[algorithm](jobs[r], job)
            if expected is None:
                assert np.isnan(scores[i])
                continue
            assert scores[i] == pytest.approx(expected, abs=TOLERANCE), (algorithm, r, i)
            compared += 1
    assert compared >= 1000


def test_q_phases_agrees_on_tie_prone_pairs():
    """Few distinct levels make equal score-to-weight ratios common: the tie rule must match exactly."""
    rng = np.random.default_rng(5)
    for alphabet in ([4], [1, 2], [1, 16]):
        jobs = []
        for _ in range(60):
            length = int(rng.integers(1, 16))
            levels = rng.choice(alphabet, (9, length))
            levels[rng.random((9, length)) < 0.45] = 0
            jobs.append(_job(levels.tolist()))
        index = index_of(jobs)
        for r in range(0, 60, 6):
            scores = index.scores(index.reference(r + 1), "q-phases")
            for i, job in enumerate(jobs):
                assert scores[i] == pytest.approx(ref_impl.q_phases(jobs[r], job), abs=TOLERANCE)


def test_engine_agrees_on_real_pairs(real_index):
    """B-all and B-aggz on the real Mistral codings: 5 references (one of 400+ segments) x 800 jobs."""
    rng = np.random.default_rng(2)
    jobids = real_index.jobids
    lengths = np.array([len(real_index.reference(int(j)).coding) for j in jobids[:20_000]])
    longest = int(jobids[:20_000][np.argmax(lengths)])
    references = [longest, *rng.choice(jobids, 4, replace=False).tolist()]
    others = rng.choice(jobids, 800, replace=False)
    positions = np.searchsorted(jobids, others)
    compared = 0
    for jobid in references:
        reference = real_index.reference(int(jobid))
        job_ref = {"coding": reference.coding.tolist()}
        for algorithm in ("b-all", "b-aggz"):
            scores = real_index.scores(reference, algorithm)
            for other, at in zip(others.tolist(), positions.tolist(), strict=True):
                job = {"coding": real_index.reference(other).coding.tolist()}
                assert scores[at] == pytest.approx(ref_impl.REFERENCE[algorithm](job_ref, job), abs=TOLERANCE)
                compared += 1
    assert compared == 8000


def test_ks_agrees_with_scipy_on_generated_node_values(generated_dataset, generated_index):
    """KS from the node-value table read independently (not from the index's reconstruction)."""
    table = pq.read_table(generated_dataset / f"{NODE_VALUES}.parquet").to_pandas()
    values = {}
    for jobid, rows in table.groupby("jobid"):
        values[jobid] = [[float(x) for row in rows[m] for x in row.split(":")] for m in METRICS]
    jobids = generated_index.jobids
    rng = np.random.default_rng(4)
    comparable = [j for j in jobids.tolist() if len(values[j][0]) >= 8]
    compared = 0
    for jobid in rng.choice(comparable, 4, replace=False).tolist():
        scores = generated_index.scores(generated_index.reference(jobid), "ks")
        for other in rng.choice(jobids, 300, replace=False).tolist():
            expected = ref_impl.ks({"values": values[jobid]}, {"values": values[other]})
            got = scores[np.searchsorted(jobids, other)]
            if expected is None:
                assert np.isnan(got)
            else:
                assert got == pytest.approx(expected, abs=TOLERANCE)
                compared += 1
    assert compared >= 300


def test_ks_refuses_a_reference_with_fewer_than_eight_values():
    rng = np.random.default_rng(0)
    short = random_job(rng, nodes=1, length=7)
    long_ = random_job(rng, nodes=2, length=4)
    index = index_of([short, long_])
    with pytest.raises(alg.NotComparableError, match="has 7 node value.*at least 8.*not comparable by KS"):
        index.scores(index.reference(1), "ks")
    scores = index.scores(index.reference(2), "ks")
    assert np.isnan(scores[0]) and scores[1] == pytest.approx(1.0)
    answer = index.query(index.reference(2), "ks", top_k=5)
    assert answer["not_comparable"] == 1 and [r["jobid"] for r in answer["ranking"]] == [2]


def test_algorithms_that_need_the_quantised_table_say_so(real_index):
    reference = real_index.reference(int(real_index.jobids[0]))
    for algorithm in ("q-lev", "q-native", "q-phases"):
        with pytest.raises(alg.MissingTableError, match=f"{algorithm} needs the quantised .*mistral_levels"):
            real_index.scores(reference, algorithm)
    with pytest.raises(alg.MissingTableError, match="ks needs the per-node value table"):
        real_index.scores(reference, "ks")
    assert np.isfinite(real_index.scores(reference, "b-aggz")).all()


def test_an_inline_reference_without_levels_is_refused_for_q_algorithms(generated_index):
    with pytest.raises(InputError, match="levels: q-lev needs the reference's per-metric levels"):
        generated_index.scores(Reference(coding=np.array([1, 2])), "q-lev")


# properties

job_strategy = st.integers(1, 12).flatmap(lambda n: st.fixed_dictionaries({
    "coding": st.lists(st.sampled_from([0, 0, 1, 6, 128, 511]), min_size=n, max_size=n),
    "levels": st.lists(st.lists(st.sampled_from([0, 0, 1, 3, 8, 16]), min_size=n, max_size=n), min_size=9, max_size=9),
    "nodes": st.integers(1, 3).flatmap(lambda k: st.lists(
        st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 4.0]), min_size=n, max_size=n), min_size=9, max_size=9),
        min_size=k, max_size=k)),
}))


def _complete(job: dict) -> dict:
    nodes = np.array(job["nodes"])
    return {**job, "nodes": nodes, "values": [nodes[:, m, :].reshape(-1).tolist() for m in range(9)]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_strategy, job_strategy)
def test_range_symmetry_and_identity(first, second):
    a, b = _complete(first), _complete(second)
    index = index_of([a, b, a])
    for algorithm in alg.ALGORITHMS:
        try:
            forward = index.scores(index.reference(1), algorithm)
            backward = index.scores(index.reference(2), algorithm)
        except alg.NotComparableError:
            continue
        finite = forward[np.isfinite(forward)]
        assert ((finite >= 0) & (finite <= 1 + 1e-12)).all(), algorithm
        if np.isfinite(forward[1]):
            assert forward[1] == pytest.approx(backward[0], abs=1e-12), algorithm  # every algorithm is symmetric
        # identity: the job against itself (and against its copy) scores 1, except where the definition
        # gives 0 to jobs without any I/O (Q-native, Q-phases)
        silent = not np.any(a["levels"])
        if algorithm in ("q-native", "q-phases") and silent:
            assert forward[0] == 0.0
        else:
            assert forward[0] == pytest.approx(1.0, abs=1e-12), algorithm
            assert forward[2] == pytest.approx(1.0, abs=1e-12), algorithm
