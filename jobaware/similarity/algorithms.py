"""The six similarity algorithms of Betke & Kunkel, vectorised over a pool of jobs. Each scores two jobs in
[0, 1], 1 = identical.

Source: E. Betke, J. Kunkel, "A Workflow for Identifying Jobs with Similar I/O Behavior Utilizing Time Series
Analysis" (ISC High Performance 2021 workshops; code and data github.com/joobog/job-io-datasets,
git.hps.vi4io.org/julian.kunkel/mistral-io-datasets) and, for the codings, their ISC 2020 workshop paper "The
Importance of Temporal Behavior when Classifying Job IO Patterns Using Machine Learning Techniques". The
definitions below are those of jobaware's issue 8, which states the paper's algorithms precisely.

B-all (paper: BIN_all). a, b = the sequences of 9-bit segment symbols (binary coding);
    s = 1 - lev(a, b) / max(|a|, |b|), lev = Levenshtein distance (unit costs).
B-aggz (paper: BIN_aggzeros). The same on the codings after every run of zero segments is collapsed to one 0.
Q-lev (paper: HEX_lev). Per metric the B-all formula on the two sequences of levels 0..16;
    s = mean over the nine metrics.
Q-native (paper: HEX_native). Per metric, slide the shorter level sequence along the longer (every offset
    at which it lies wholly inside); at each offset sum over the overlapping positions (16 - |x - y|) / 16;
    take the best offset and divide by the longer length. s = mean over the metrics in which at least one
    of the two jobs has a non-zero level; 0 when neither job has a non-zero level in any metric.
    Checks: [0,8,16,9,1,8,0,0] vs [7,16,5,0,9] -> 0.5703125; ([1,2,3,4],[0,1,0,0]) vs
    ([1,2,3,4,5],[0,0,0,0,1]) -> 0.79375.
Q-phases (paper: HEX_phases). Per metric a phase is a maximal run of non-zero levels. Each phase of the job
    with fewer phases is attached to a distinct phase of the other, order kept, in every possible way; an
    attached pair scores the best shift of the shorter phase along the longer of sum(min(x, y) / max(x, y))
    with the longer phase's length as its weight; an unattached phase scores 0 with its own length as
    weight; the attachment with the highest score-to-weight ratio is kept. s = total score / total weight
    over all metrics; 0 when neither job has a phase in any metric. Ties: among attachments of equal
    (highest) ratio the one with the larger total weight is kept (the issue leaves ties open; the choice
    matters because the ratio is pooled over metrics). Combinatorics: exact, by Dinkelbach's method for the
    ratio, each step an order-preserving assignment solved by dynamic programming in O(phases^2), instead of
    enumerating the binomial(l, s) attachments (equivalent: the optimum of a ratio of sums over a finite
    set is reached by Dinkelbach's iteration, and each step maximises a sum over an increasing matching).
KS (paper: KS). Node values: per node and segment the score averaged over the file systems; each node's
    series concatenated. Per metric the two-sample Kolmogorov-Smirnov test between the two jobs' values:
    statistic D = max |F_a(x) - F_b(x)|; p-value as in the paper's Rust crate (kolmogorov_smirnov 1.1.0):
    the asymptotic Kolmogorov distribution with Stephens' correction, p = Q_KS((sqrt(n) + 0.12 + 0.11 /
    sqrt(n)) D), n = n_a n_b / (n_a + n_b), Q_KS(t) = 2 sum_j (-1)^(j-1) exp(-2 j^2 t^2) (scipy's
    `scipy.special.kolmogorov`). s = mean over metrics of p, i.e. of 1 - p_reject. A job with fewer than 8
    values is not comparable by KS (the crate refuses such samples): no score is given for it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pandas as pd
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein
from scipy.special import kolmogorov

from jobaware.errors import InputError
from jobaware.similarity.flat import ragged_arange, row_of, texts
from jobaware.similarity.schema import CODINGS, LEVEL_MAX, LEVELS, NODE_VALUES

ALGORITHMS = ("b-all", "b-aggz", "q-lev", "q-native", "q-phases", "ks")
NEEDS = {"b-all": CODINGS, "b-aggz": CODINGS, "q-lev": LEVELS, "q-native": LEVELS, "q-phases": LEVELS,
         "ks": NODE_VALUES}
KS_MIN_VALUES = 8
CHUNK_CELLS = 1 << 22
TIE = 1e-11
DINKELBACH_STEPS = 100
_RATIO = np.zeros((LEVEL_MAX + 1, LEVEL_MAX + 1))
_levels = np.arange(1, LEVEL_MAX + 1)
_RATIO[1:, 1:] = np.minimum.outer(_levels, _levels) / np.maximum.outer(_levels, _levels)


class MissingTableError(InputError):
    """The algorithm needs a table that this pool was not given."""


class NotComparableError(InputError):
    """The reference job cannot be scored by this algorithm (e.g. fewer than 8 values for KS)."""


def check_algorithm(name: str) -> str:
    if name not in ALGORITHMS:
        raise InputError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {name!r}")
    return name


def workers_for(workers: int) -> int:
    """0 means every core this process may use."""
    if workers > 0:
        return workers
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def as_text(values: np.ndarray) -> str:
    """A sequence of small integers as a string of code points, the form rapidfuzz compares fastest."""
    return "".join(map(chr, np.asarray(values).tolist()))


def levenshtein(reference: str, pool: list[str], workers: int = 1) -> np.ndarray:
    """1 - lev(reference, p) / max(len) for every p in `pool` (rapidfuzz), split over `workers` threads.

    The reference is the single query row (rapidfuzz then prepares its bit-parallel pattern once: measured
    about twice as fast per core as the pool on the query side) and the pool is cut into one slice per
    thread; rapidfuzz releases the GIL, so the threads run in parallel.
    """
    workers = workers_for(workers)
    score = Levenshtein.normalized_similarity
    if workers == 1 or len(pool) < 4096:
        return process.cdist([reference], pool, scorer=score, dtype=np.float64, workers=1)[0]
    bounds = np.linspace(0, len(pool), workers + 1).astype(int)
    slices = [pool[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    with ThreadPoolExecutor(workers) as threads:
        parts = threads.map(lambda part: process.cdist([reference], part, scorer=score, dtype=np.float64,
                                                       workers=1)[0], slices)
        return np.concatenate(list(parts))


def _groups(lengths: np.ndarray):
    """(length, row indices) for every distinct length."""
    order = np.argsort(lengths, kind="stable")
    ordered = lengths[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    for a, b in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        yield int(ordered[a]), order[a:b]


def q_native_metric(reference: np.ndarray, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Q-native of one metric: the reference's levels against every sequence (flat values, offsets)."""
    reference = np.asarray(reference, np.int32)
    n = len(reference)
    out = np.zeros(len(offsets) - 1)
    for m, rows in _groups(np.diff(offsets)):
        shorter, longer, positions = min(m, n), max(m, n), abs(n - m) + 1
        step = max(1, CHUNK_CELLS // positions)
        for a in range(0, len(rows), step):
            part = rows[a:a + step]
            seqs = values[ragged_arange(offsets[part], np.full(len(part), m))].reshape(len(part), m).astype(np.int32)
            cost = np.zeros((len(part), positions), np.int32)
            if m <= n:  # the pool sequence slides along the reference
                for k in range(m):
                    cost += np.abs(seqs[:, k:k + 1] - reference[None, k:k + positions])
            else:  # the reference slides along the pool sequence
                for k in range(n):
                    cost += np.abs(seqs[:, k:k + positions] - reference[k])
            out[part] = (shorter - cost.min(axis=1) / LEVEL_MAX) / longer
    return out


def phases(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of non-zero values of every sequence: (sequence index, flat start, length)."""
    active = values > 0
    rows = row_of(offsets)
    begin = active & np.r_[True, ~active[:-1] | (rows[1:] != rows[:-1])] if len(values) else active
    end = active & np.r_[~active[1:] | (rows[1:] != rows[:-1]), True] if len(values) else active
    starts, stops = np.flatnonzero(begin), np.flatnonzero(end) + 1
    return rows[starts], starts, stops - starts


def _pair_scores(ref_values: np.ndarray, ref_starts: np.ndarray, ref_lengths: np.ndarray,
                 values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Best-shift sum of min/max ratios between every pool phase (rows) and every reference phase (columns)."""
    out = np.zeros((len(starts), len(ref_starts)))
    for a, ref_cols in _groups(ref_lengths):
        ref = ref_values[ragged_arange(ref_starts[ref_cols], np.full(len(ref_cols), a))].reshape(len(ref_cols), a)
        for b, rows in _groups(lengths):
            positions = abs(a - b) + 1
            step = max(1, CHUNK_CELLS // (positions * len(ref_cols)))
            for c in range(0, len(rows), step):
                part = rows[c:c + step]
                seqs = values[ragged_arange(starts[part], np.full(len(part), b))].reshape(len(part), b)
                total = np.zeros((len(part), len(ref_cols), positions))
                if b <= a:  # the pool phase slides along the reference phase
                    for k in range(b):
                        total += _RATIO[seqs[:, None, k:k + 1], ref[None, :, k:k + positions]]
                else:
                    for k in range(a):
                        total += _RATIO[seqs[:, None, k:k + positions], ref[None, :, k:k + 1]]
                out[np.ix_(part, ref_cols)] = total.max(axis=2)
    return out


@numba.njit(cache=True, nogil=True)
def _better(value, weight, best_value, best_weight):
    """Lexicographic: a higher value (beyond the tie tolerance), else an equal value with more weight."""
    return value > best_value + TIE or (value >= best_value - TIE and weight > best_weight)


@numba.njit(cache=True, nogil=True)
def _cell(pair, ref_code, pool_code, pool_len, ref_len, first, flipped, i, j):
    """(pair score, extra weight) of attaching row i to column j of one case: rows are the pool job's phases
    (columns the reference's), or the reference's when `flipped`."""
    if flipped:
        return pair[pool_code[first + j], ref_code[i]], max(0, ref_len[i] - pool_len[first + j])
    return pair[pool_code[first + i], ref_code[j]], max(0, pool_len[first + i] - ref_len[j])


@numba.njit(cache=True, nogil=True)
def _attach_all(pair, ref_code, ref_len, pool_code, pool_len, first, count, own_weight, ref_weight, score, weight):
    """Per pool case with phases: the increasing attachment of the side with fewer phases (s rows) to distinct
    phases of the other (l columns) maximising (sum of pair scores) / (base + sum of extra weights); ties to
    the larger weight. Fills `score` and `weight`.

    Dinkelbach: with lam the ratio of the current attachment, the attachment maximising
    sum(pair - lam * extra) - lam * base is found by dynamic programming; its ratio is the next lam; at the
    fixed point no attachment has a higher ratio. The dynamic programme, best[i] after column j = the best
    attachment of the first i rows within the first j columns: either column j is left free (best[i] after
    column j-1) or row i takes it (best[i-1] after column j-1 plus its gain). O(s * l) per step, compiled:
    no (cases x s x l) array is built.
    """
    r = len(ref_code)
    val, num, den = np.empty(r + 1), np.empty(r + 1), np.empty(r + 1)
    for c in range(len(count)):
        p = count[c]
        if p == 0:
            continue
        flipped = p > r
        s, l = (r, p) if flipped else (p, r)
        base = float(own_weight[c]) if flipped else float(ref_weight)
        total_score, total_weight = 0.0, base
        for k in range(s):
            n, e = _cell(pair, ref_code, pool_code, pool_len, ref_len, first[c], flipped, k, k)
            total_score += n
            total_weight += e
        lam = total_score / total_weight
        for _ in range(DINKELBACH_STEPS):
            val[0], num[0], den[0] = 0.0, 0.0, 0.0
            for i in range(1, s + 1):
                val[i], num[i], den[i] = -np.inf, 0.0, 0.0
            for j in range(l):
                for i in range(min(s, j + 1), 0, -1):  # descending: row i reads best[i-1] of column j-1
                    n, e = _cell(pair, ref_code, pool_code, pool_len, ref_len, first[c], flipped, i - 1, j)
                    attach_v = val[i - 1] + (n - lam * e)
                    attach_d = den[i - 1] + e
                    if _better(attach_v, attach_d, val[i], den[i]):
                        val[i], num[i], den[i] = attach_v, num[i - 1] + n, attach_d
            d_best = den[s] + base
            value = num[s] - lam * d_best
            if _better(value, d_best, 0.0, total_weight):
                total_score, total_weight = num[s], d_best
            lam = total_score / total_weight
            if not value > TIE:
                break
        score[c], weight[c] = total_score, total_weight


def _distinct_phases(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each phase's code (equal contents, equal codes) and the index of each code's first phase."""
    codes, _ = pd.factorize(np.asarray(texts(values[ragged_arange(starts, lengths)], np.r_[0, np.cumsum(lengths)]),
                                       dtype=object))
    return codes, np.unique(codes, return_index=True)[1]


class PhaseTable:
    """The phases of many level sequences (a pool's distinct sequences of one metric), each distinct phase
    content once: built once per index shard and metric, used by every Q-phases query."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        owner, starts, lengths = phases(np.asarray(values), np.asarray(offsets))
        self.cases = len(offsets) - 1
        self.count = np.bincount(owner, minlength=self.cases)
        self.first = np.concatenate([[0], np.cumsum(self.count)])
        self.own_weight = np.bincount(owner, weights=lengths, minlength=self.cases)
        self.lengths = lengths
        self.codes, keep = _distinct_phases(values, starts, lengths)
        self.unique_starts, self.unique_lengths = starts[keep], lengths[keep]


def q_phases_metric(reference: np.ndarray, values: np.ndarray, table: PhaseTable) -> tuple[np.ndarray, np.ndarray]:
    """Q-phases of one metric: (score, weight) of the reference's levels against every sequence of `table`."""
    reference = np.asarray(reference, np.int64)
    _, ref_starts, ref_lengths = phases(reference, np.array([0, len(reference)]))
    r, ref_weight = len(ref_starts), int(ref_lengths.sum())
    count = table.count
    score = np.zeros(table.cases)
    weight = np.where(count == 0, ref_weight, table.own_weight).astype(np.float64)
    if r == 0 or not len(table.codes):
        return score, weight
    ref_codes, keep = _distinct_phases(reference, ref_starts, ref_lengths)
    pair = _pair_scores(reference, ref_starts[keep], ref_lengths[keep], values, table.unique_starts,
                        table.unique_lengths)
    _attach_all(pair, ref_codes, ref_lengths, table.codes, table.lengths, table.first, table.count,
                table.own_weight, ref_weight, score, weight)
    return score, weight


def compile_kernels() -> None:
    """Compile (or load from numba's cache) the compiled Q-phases kernel, on two tiny sequences."""
    levels = np.array([1, 0, 2, 3], np.int64)
    q_phases_metric(levels, levels, PhaseTable(levels, np.array([0, len(levels)])))


def ks_metric(reference: np.ndarray, grid: np.ndarray, cumulative: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """KS p-value of one metric: the reference's values against every pool sample, each given by its
    cumulative counts at the pool's value grid (`cumulative[u, g]` = values <= grid[g]) and its size."""
    reference = np.sort(np.asarray(reference, np.float64))
    n_ref = len(reference)
    counts = counts.astype(np.float64)
    pool_at_grid = cumulative / counts[:, None]
    ref_at_grid = np.searchsorted(reference, grid, side="right") / n_ref
    distance = np.abs(pool_at_grid - ref_at_grid[None, :]).max(axis=1)
    # between two grid values the pool's distribution is flat and the reference's rises: beyond the grid value
    # itself (above), the distance there is largest at the last reference value before the next grid value
    points = np.unique(reference)
    slot = np.searchsorted(grid, points, side="right") - 1
    last = np.r_[slot[1:] != slot[:-1], True]
    slot, ref_at_points = slot[last], np.searchsorted(reference, points[last], side="right") / n_ref
    pool_at_points = np.where(slot >= 0, pool_at_grid[:, np.maximum(slot, 0)], 0.0)
    distance = np.maximum(distance, np.abs(pool_at_points - ref_at_points[None, :]).max(axis=1))
    en = np.sqrt(n_ref * counts / (n_ref + counts))
    return kolmogorov((en + 0.12 + 0.11 / en) * distance)
