"""How a planted family member differs from its template (used by the generator, and by the evaluation to
plant families of perturbed copies in a real pool):

  rerun    the same behaviour re-run: 5 % of the active (metric, segment) cells drop out (the generator also
           jitters intensities and redraws every node's values)
  nodes    the job on 0.5, 2 or 4 times as many nodes
  stretch  the timeline stretched by a factor 0.6..1.6 (each phase in proportion)
  shift    1..3 idle segments inserted before an I/O phase, or the leading idle segments dropped
  idle     1..3 extra idle runs of 1..4 segments inserted anywhere

Timeline operators are segment maps: new segment t shows old segment src[t], or idle where src[t] = -1.
"""

from __future__ import annotations

import numpy as np

from jobaware.similarity.schema import MAX_SEGMENTS

VARIANTS = ("rerun", "nodes", "stretch", "shift", "idle")
TIMELINE = ("stretch", "shift", "idle")
DROP_SHARE = 0.05
NODE_FACTORS = (0.5, 2.0, 4.0)


def choose(rng: np.random.Generator) -> list[str]:
    """One operator, or two different ones (40 %)."""
    return sorted(rng.choice(VARIANTS, 1 + int(rng.random() < 0.4), replace=False).tolist())


def segment_map(op: str, busy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The segment map of a timeline operator for a job whose segments with I/O are `busy`."""
    length = len(busy)
    source = np.arange(length)
    if op == "stretch":
        new = int(np.clip(round(length * rng.uniform(0.6, 1.6)), 1, MAX_SEGMENTS))
        return np.minimum((np.arange(new) * length / new).astype(int), length - 1)
    if op == "shift":
        active = np.flatnonzero(busy)
        lead = int(active[0]) if len(active) else 0
        if lead > 0 and rng.random() < 0.5:
            return source[int(rng.integers(1, lead + 1)):]
        starts = active[np.r_[True, np.diff(active) > 1]] if len(active) else np.array([0])
        at = int(rng.choice(starts))
        return np.concatenate([source[:at], np.full(int(rng.integers(1, 4)), -1), source[at:]])[:MAX_SEGMENTS]
    if op == "idle":
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(source) + 1))
            source = np.concatenate([source[:at], np.full(int(rng.integers(1, 5)), -1), source[at:]])
        return source[:MAX_SEGMENTS]
    raise ValueError(f"not a timeline operator: {op}")


def apply_map(values: np.ndarray, source: np.ndarray) -> np.ndarray:
    """Values along the last axis (segments) moved by a segment map; inserted segments are 0."""
    taken = values[..., np.maximum(source, 0)]
    return np.where(source >= 0, taken, 0).astype(values.dtype)


def dropped_cells(active: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`rerun`: a mask of the active cells that drop out."""
    return active & (rng.random(active.shape) < DROP_SHARE)
