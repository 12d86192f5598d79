"""A fitted HistGradientBoostingClassifier's trees walked by one compiled loop, for any number of rows.

scikit-learn predicts tree by tree, each call a parallel region over the rows: for the one to a few jobs a
scheduler asks about, that per-tree overhead (about 20 microseconds times 500 trees) is most of the answer time,
and for a thousand rows it still costs more than the walk itself. `ArrayTrees` walks row by row, every tree in
turn, in one numba loop. It follows scikit-learn's `_predict_one_from_raw_data` (missing values, negative and
unknown categories, the left-category bitsets) and adds the leaf values in scikit-learn's order (the baseline,
then iteration by iteration), so its raw scores are bit for bit scikit-learn's; the model tests check that on
every model it is used for.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier


@numba.njit(cache=True, nogil=True)
def _in_bitset(bitsets, row, value) -> bool:
    """Whether category `value` (0-255) is set in bitset `row` (256 bits as 8 x uint32)."""
    return (bitsets[row, value >> 5] >> np.uint32(value & 31)) & np.uint32(1) == np.uint32(1)


# one node in 40 bytes, what a step of the walk reads in one cache line; flags: 1 leaf, 2 missing values go left,
# 4 categorical split
NODE = np.dtype([("threshold", "f8"), ("value", "f8"), ("left", "i4"), ("right", "i4"), ("feature", "i4"),
                 ("bitset", "i4"), ("flags", "u1")], align=True)
_LEAF, _MISSING_LEFT, _CATEGORICAL = 1, 2, 4


@numba.njit(cache=True, nogil=True)
def _walk(matrix, roots, per_iteration, baseline, nodes, left_categories, known_categories, known_row, out):
    """out[row, k] = baseline[k] + the leaf values of class k's trees, iteration by iteration; tree by tree over
    all rows, so that one tree's nodes stay in the cache."""
    for row in range(matrix.shape[0]):
        for k in range(per_iteration):
            out[row, k] = baseline[k]
    for tree in range(len(roots)):
        k = tree % per_iteration
        for row in range(matrix.shape[0]):
            node = nodes[roots[tree]]
            while not node.flags & _LEAF:
                x = matrix[row, node.feature]
                if np.isnan(x) or (node.flags & _CATEGORICAL and x < 0):
                    go_left = node.flags & _MISSING_LEFT != 0
                elif node.flags & _CATEGORICAL:
                    code = int(min(x, 255.0))
                    if _in_bitset(left_categories, node.bitset, code):
                        go_left = True
                    elif _in_bitset(known_categories, known_row[node.feature], code):
                        go_left = False
                    else:
                        go_left = node.flags & _MISSING_LEFT != 0
                else:
                    go_left = x <= node.threshold
                node = nodes[node.left] if go_left else nodes[node.right]
            out[row, k] += node.value


# a batch of at least this many rows is split across the cores: the loop releases the GIL, so plain threads
# run it in parallel (and, unlike numba's own parallel loops, safely from concurrent request threads)
SPLIT_ROWS = 64
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=_CORES, thread_name_prefix="trees")
    return _POOL


class ArrayTrees(ClassifierMixin, BaseEstimator):
    """The fitted booster's decision function and probabilities on an already transformed matrix."""

    def __init__(self, booster: HistGradientBoostingClassifier):
        self.booster = booster
        self.classes_ = booster.classes_
        predictors = [p for iteration in booster._predictors for p in iteration]
        self.per_iteration = booster.n_trees_per_iteration_
        sizes = np.array([len(p.nodes) for p in predictors])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        bitset_rows = np.array([len(p.raw_left_cat_bitsets) for p in predictors])
        bitset_offsets = np.concatenate([[0], np.cumsum(bitset_rows)[:-1]]).astype(np.int64)
        fitted = np.concatenate([p.nodes for p in predictors])
        tree_of = np.repeat(np.arange(len(predictors)), sizes)
        nodes = np.zeros(len(fitted), NODE)
        nodes["threshold"], nodes["value"], nodes["feature"] = fitted["num_threshold"], fitted["value"], fitted["feature_idx"]
        nodes["left"] = fitted["left"] + offsets[tree_of]
        nodes["right"] = fitted["right"] + offsets[tree_of]
        nodes["bitset"] = fitted["bitset_idx"] + bitset_offsets[tree_of]
        nodes["flags"] = (fitted["is_leaf"].astype(np.uint8) * _LEAF | fitted["missing_go_to_left"].astype(np.uint8) * _MISSING_LEFT
                          | fitted["is_categorical"].astype(np.uint8) * _CATEGORICAL)
        left_categories = [p.raw_left_cat_bitsets.reshape(-1, 8) for p in predictors]
        known_categories, f_idx_map = booster._bin_mapper.make_known_categories_bitsets()
        self.arrays = (
            offsets, self.per_iteration, np.ascontiguousarray(booster._baseline_prediction.ravel(), dtype=np.float64),
            nodes,
            np.ascontiguousarray(np.concatenate(left_categories or [np.zeros((0, 8), np.uint32)]), dtype=np.uint32),
            np.ascontiguousarray(known_categories.reshape(-1, 8), dtype=np.uint32) if known_categories.size
            else np.zeros((1, 8), np.uint32),
            f_idx_map.astype(np.int64),
        )
        self.dtype = booster._baseline_prediction.dtype

    def raw(self, matrix: np.ndarray) -> np.ndarray:
        """Raw scores (rows x trees per iteration), as scikit-learn's `_raw_predict` gives them."""
        matrix = np.ascontiguousarray(matrix, dtype=np.float64)
        out = np.zeros((len(matrix), self.per_iteration), dtype=np.float64)
        if len(matrix) < SPLIT_ROWS or _CORES == 1:
            _walk(matrix, *self.arrays, out)
        else:
            parts = np.array_split(np.arange(len(matrix)), _CORES)
            for done in [_pool().submit(_walk, matrix[p[0]:p[-1] + 1], *self.arrays, out[p[0]:p[-1] + 1])
                         for p in parts if len(p)]:
                done.result()
        return np.asfortranarray(out.astype(self.dtype, copy=False))

    def decision_function(self, matrix: np.ndarray) -> np.ndarray:
        raw = self.raw(matrix)
        return raw.ravel() if raw.shape[1] == 1 else raw

    def predict_proba(self, matrix: np.ndarray) -> np.ndarray:
        return self.booster._loss.predict_proba(self.raw(matrix))
