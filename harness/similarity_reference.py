"""Plain, obviously-correct implementations of the six algorithms, one pair of jobs at a time.

Written straight from the definitions (see jobaware/similarity/algorithms.py): textbook dynamic programme
for Levenshtein, every offset for the sliding windows, every attachment (itertools.combinations) with exact
fractions for Q-phases, scipy's ks_2samp for the KS statistic. Slow on purpose; the tests hold the fast
engine to these.

A job here is a dict: "coding" (binary symbols), "levels" (nine level lists), "values" (nine lists of node
values, each node's series concatenated).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from scipy.special import kolmogorov
from scipy.stats import ks_2samp


def levenshtein(a, b) -> int:
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def lev_similarity(a, b) -> float:
    return 1 - levenshtein(a, b) / max(len(a), len(b))


def collapse_zeros(coding):
    out = []
    for x in coding:
        if not (x == 0 and out and out[-1] == 0):
            out.append(x)
    return out


def b_all(job_a, job_b) -> float:
    return lev_similarity(job_a["coding"], job_b["coding"])


def b_aggz(job_a, job_b) -> float:
    return lev_similarity(collapse_zeros(job_a["coding"]), collapse_zeros(job_b["coding"]))


def q_lev(job_a, job_b) -> float:
    return sum(lev_similarity(a, b) for a, b in zip(job_a["levels"], job_b["levels"], strict=True)) / 9


def native_metric(a, b) -> float:
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    best = max(
        sum((16 - abs(x - y)) / 16 for x, y in zip(short, long_[offset:offset + len(short)], strict=True))
        for offset in range(len(long_) - len(short) + 1)
    )
    return best / len(long_)


def q_native(job_a, job_b) -> float:
    scores = [native_metric(a, b) for a, b in zip(job_a["levels"], job_b["levels"], strict=True)
              if any(a) or any(b)]
    return sum(scores) / len(scores) if scores else 0.0


def phases_of(levels):
    found, current = [], []
    for x in levels:
        if x:
            current.append(x)
        elif current:
            found.append(current)
            current = []
    if current:
        found.append(current)
    return found


def phase_pair(x, y) -> tuple[Fraction, int]:
    short, long_ = (x, y) if len(x) <= len(y) else (y, x)
    best = max(
        sum(Fraction(min(p, q), max(p, q)) for p, q in zip(short, long_[shift:shift + len(short)], strict=True))
        for shift in range(len(long_) - len(short) + 1)
    )
    return best, len(long_)


def phases_metric(a, b) -> tuple[Fraction, int]:
    """(score, weight) of the best attachment; ties in the ratio go to the larger weight."""
    pa, pb = phases_of(a), phases_of(b)
    few, many = (pa, pb) if len(pa) <= len(pb) else (pb, pa)
    if not few:
        return Fraction(0), sum(len(p) for p in many)
    best = None
    for chosen in itertools.combinations(range(len(many)), len(few)):
        score, weight = Fraction(0), 0
        for phase, j in zip(few, chosen, strict=True):
            s, w = phase_pair(phase, many[j])
            score, weight = score + s, weight + w
        weight += sum(len(many[j]) for j in range(len(many)) if j not in chosen)
        key = (score / weight, weight)
        if best is None or key > best[0]:
            best = (key, score, weight)
    return best[1], best[2]


def q_phases(job_a, job_b) -> float:
    score, weight = Fraction(0), 0
    for a, b in zip(job_a["levels"], job_b["levels"], strict=True):
        s, w = phases_metric(a, b)
        score, weight = score + s, weight + w
    return float(score / weight) if weight else 0.0


def ks(job_a, job_b) -> float | None:
    """None when either job has fewer than 8 values (not comparable)."""
    if len(job_a["values"][0]) < 8 or len(job_b["values"][0]) < 8:
        return None
    total = 0.0
    for a, b in zip(job_a["values"], job_b["values"], strict=True):
        d = ks_2samp(a, b, method="asymp").statistic
        en = math.sqrt(len(a) * len(b) / (len(a) + len(b)))
        total += kolmogorov((en + 0.12 + 0.11 / en) * d)
    return total / 9


REFERENCE = {"b-all": b_all, "b-aggz": b_aggz, "q-lev": q_lev, "q-native": q_native, "q-phases": q_phases, "ks": ks}
