"""Many variable-length sequences held as one flat array plus offsets (len n+1), and helpers over them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def ragged_arange(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated `arange(start, start + length)` for every pair, without a Python loop."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(np.asarray(starts, np.int64) - first, lengths) + np.arange(total)


def row_of(offsets: np.ndarray) -> np.ndarray:
    """For every flat position, the index of the sequence it belongs to."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def parse(text: pa.Array | pa.ChunkedArray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Checked `:`-separated text (no nulls) -> (flat values of `dtype`, offsets)."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    parts = pc.split_pattern(text, ":")
    target = pa.float64() if np.dtype(dtype).kind == "f" else pa.int64()
    values = pc.cast(pc.list_flatten(parts), target).to_numpy().astype(dtype, copy=False)
    lengths = pc.list_value_length(parts).to_numpy()
    return values, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def take(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sequences `rows` (in that order) as a new flat array and offsets."""
    rows = np.asarray(rows, np.int64)
    lengths = offsets[rows + 1] - offsets[rows]
    return values[ragged_arange(offsets[rows], lengths)], np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def sequences_equal(a: np.ndarray, a_off: np.ndarray, b: np.ndarray, b_off: np.ndarray) -> np.ndarray:
    """Per row: are sequence i of `a` and sequence i of `b` equal?"""
    a_len, b_len = np.diff(a_off), np.diff(b_off)
    equal = a_len == b_len
    rows = np.flatnonzero(equal)
    if len(rows):
        differ = a[ragged_arange(a_off[rows], a_len[rows])] != b[ragged_arange(b_off[rows], a_len[rows])]
        bad = np.repeat(rows, a_len[rows])[differ]
        equal[bad] = False
    return equal


def texts(values: np.ndarray, offsets: np.ndarray) -> list[str]:
    """Each sequence as a string of code points (the form rapidfuzz compares, and a hashable key)."""
    raw = np.ascontiguousarray(values, dtype="<u4").tobytes()
    return [raw[4 * a:4 * b].decode("utf-32-le") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
