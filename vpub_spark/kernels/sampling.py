"""Seeded sampling without replacement that depends on content only, not on row order.

Rows with equal values are interchangeable, so each row's key hashes its codes, its
occurrence index among equal rows, and the seed; the sample is the `n` smallest keys.
Both engines compute the same keys, so they draw the same sample. The same numbering
(`with_occurrence`) gives anatomy's shards one per row (kernels/partitioning.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .hashing import content_hash

OCCURRENCE = "__occurrence"


def sample_keys(frame: pd.DataFrame, seed: int) -> np.ndarray:
    """uint64 key of each row of `frame` (codes plus the OCCURRENCE column)."""
    return content_hash(frame, seed)


def with_occurrence(frame: pd.DataFrame, columns: Sequence[str] | None) -> pd.DataFrame:
    """`frame` with OCCURRENCE: each row's index among the rows equal in `columns`
    (None: every column; empty: the whole frame is one run), in the order of all the
    frame's columns, so it depends on content only (Spark's engine numbers them with the
    same window). Rows equal in every column are alike, so which of them gets which
    number does not matter (the sample's keys, anatomy's shards)."""
    cols = list(frame.columns)
    key = cols if columns is None else list(columns)
    rest = [frame[c].to_numpy() for c in cols if c not in key]
    n = len(frame)
    run = content_hash(frame, 0, key) if key else np.zeros(n, dtype=np.uint64)
    order = np.lexsort([*rest[::-1], run])  # runs of equal `columns`, then every column
    ordered = run[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    occurrence = np.empty(n, dtype=np.int64)
    occurrence[order] = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    return frame.assign(**{OCCURRENCE: occurrence})
