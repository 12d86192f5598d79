"""The overlap index: keys of the events read so far, to drop records repeated from an earlier segment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class _Run:
    keys: np.ndarray  # sorted
    segment: np.ndarray  # the first segment each key was seen in
    low: int
    high: int


class Overlaps:
    """Keys of the events read so far, in runs (one per block), to drop records repeated from an earlier segment."""

    def __init__(self):
        self.runs: list[_Run] = []

    def duplicates(self, keys: np.ndarray, segment: np.ndarray, ms: np.ndarray) -> np.ndarray:
        dup = np.zeros(len(keys), bool)
        if len(keys) == 0:
            return dup
        low, high = int(ms.min()), int(ms.max())
        for run in self.runs:
            if run.high < low or run.low > high:
                continue
            candidates = np.flatnonzero((ms >= run.low) & (ms <= run.high))
            if len(candidates) == 0:
                continue
            pos = np.searchsorted(run.keys, keys[candidates]).clip(max=len(run.keys) - 1)
            hit = (run.keys[pos] == keys[candidates]) & (run.segment[pos] < segment[candidates])
            dup[candidates[hit]] = True
        # within the block: a key first seen in an earlier segment of this same block
        order = np.lexsort((segment, keys))
        sorted_keys = keys[order]
        group_start = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
        first_segment = segment[order][np.maximum.accumulate(np.where(group_start, np.arange(len(order)), 0))]
        dup[order] |= first_segment < segment[order]
        unique = order[group_start]
        self.runs.append(_Run(keys[unique], segment[unique].astype(np.int32), low, high))
        return dup
