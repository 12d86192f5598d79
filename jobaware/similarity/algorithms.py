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


def _better(value, weight, best_value, best_weight):
    """Lexicographic: a higher value (beyond the tie tolerance), else an equal value with more weight."""
    return (value > best_value + TIE) | ((value >= best_value - TIE) & (weight > best_weight))


def _best_attachment(pair: np.ndarray, extra: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per case c: the increasing attachment of all s rows to distinct columns (s <= l) maximising
    (sum of pair scores) / (base + sum of extra weights); ties to the larger weight. Returns (score, weight).

    Dinkelbach: with lam the ratio of the current attachment, the attachment maximising
    sum(pair - lam * extra) - lam * base is found by dynamic programming; its ratio is the next lam; at the
    fixed point no attachment has a higher ratio.
    """
    cases, s, l = pair.shape
    diagonal = np.arange(s)
    score = pair[:, diagonal, diagonal].sum(axis=1)
    weight = base + extra[:, diagonal, diagonal].sum(axis=1)
    lam = score / weight
    active = np.ones(cases, bool)
    for _ in range(DINKELBACH_STEPS):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        gain = pair[idx] - lam[idx, None, None] * extra[idx]
        n_best, d_best = _assign(gain, pair[idx], extra[idx])
        d_best = d_best + base[idx]
        value = n_best - lam[idx] * d_best
        better = _better(value, d_best, np.zeros_like(value), weight[idx])
        improved = value > TIE
        score[idx[better]], weight[idx[better]] = n_best[better], d_best[better]
        lam[idx] = score[idx] / weight[idx]
        active[idx[~improved]] = False
    return score, weight


def _assign(gain: np.ndarray, pair: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max-gain increasing assignment of every row to a distinct column, per case; (score, extra) of it.

    best[i] after column j = the best assignment of the first i rows within the first j columns: either
    column j is left free (best[i] after column j-1) or row i takes it (best[i-1] after column j-1 plus its
    gain). Each column depends only on the one before, so the loop runs over columns with every row at once.
    """
    cases, s, l = gain.shape
    val = np.full((cases, s + 1), -np.inf)
    val[:, 0] = 0.0
    num, den = np.zeros((cases, s + 1)), np.zeros((cases, s + 1))
    for j in range(l):
        attach_v = val[:, :-1] + gain[:, :, j]
        attach_n = num[:, :-1] + pair[:, :, j]
        attach_d = den[:, :-1] + extra[:, :, j]
        take = _better(attach_v, attach_d, val[:, 1:], den[:, 1:])
        val[:, 1:] = np.where(take, attach_v, val[:, 1:])
        num[:, 1:] = np.where(take, attach_n, num[:, 1:])
        den[:, 1:] = np.where(take, attach_d, den[:, 1:])
    return num[:, s], den[:, s]


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
        codes, _ = pd.factorize(np.asarray(texts(values[ragged_arange(starts, lengths)],
                                                 np.r_[0, np.cumsum(lengths)]), dtype=object))
        self.codes = codes
        keep = np.unique(codes, return_index=True)[1]
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
    pair = _pair_scores(reference, ref_starts, ref_lengths, values, table.unique_starts, table.unique_lengths)
    for p, rows in _groups(count):
        if p == 0:
            continue
        phase_index = table.first[rows][:, None] + np.arange(p)[None, :]    # (cases, p)
        pool_pair = pair[table.codes[phase_index]]                           # (cases, p, r)
        pool_len = table.lengths[phase_index]                                # (cases, p)
        if p <= r:  # the pool job has fewer (or as many) phases: it is the attached side
            matrix = pool_pair
            extra = np.maximum(0, pool_len[:, :, None] - ref_lengths[None, None, :])
            base = np.full(len(rows), float(ref_weight))
        else:
            matrix = pool_pair.transpose(0, 2, 1)
            extra = np.maximum(0, ref_lengths[None, :, None] - pool_len[:, None, :])
            base = table.own_weight[rows].astype(np.float64)
        score[rows], weight[rows] = _best_attachment(matrix, extra.astype(np.float64), base)
    return score, weight


def ks_metric(reference: np.ndarray, grid: np.ndarray, cumulative: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """KS p-value of one metric: the reference's values against every pool sample, each given by its
    cumulative counts at the pool's value grid (`cumulative[u, g]` = values <= grid[g]) and its size."""
    reference = np.sort(np.asarray(reference, np.float64))
    n_ref = len(reference)
    counts = counts.astype(np.float64)
    pool_at_grid = cumulative / counts[:, None]
    ref_at_grid = np.searchsorted(reference, grid, side="right") / n_ref
    distance = np.abs(pool_at_grid - ref_at_grid[None, :]).max(axis=1)
    points = np.unique(reference)
    slot = np.searchsorted(grid, points, side="right") - 1
    ref_at_points = np.searchsorted(reference, points, side="right") / n_ref
    pool_at_points = np.where(slot >= 0, pool_at_grid[:, np.maximum(slot, 0)], 0.0)
    distance = np.maximum(distance, np.abs(pool_at_points - ref_at_points[None, :]).max(axis=1))
    en = np.sqrt(n_ref * counts / (n_ref + counts))
    return kolmogorov((en + 0.12 + 0.11 / en) * distance)
