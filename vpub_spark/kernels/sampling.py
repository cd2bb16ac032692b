"""Seeded sampling without replacement that depends on content only, not on row order.

Rows with equal values are interchangeable, so each row's key hashes its codes, its
occurrence index among equal rows, and the seed; the sample is the `n` smallest keys.
Both engines compute the same keys, so they draw the same sample.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .hashing import content_hash

OCCURRENCE = "__occurrence"


def sample_keys(frame: pd.DataFrame, seed: int) -> np.ndarray:
    """uint64 key of each row of `frame` (codes plus the OCCURRENCE column)."""
    return content_hash(frame, seed)


def with_occurrence(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame.assign(
        **{OCCURRENCE: frame.groupby(columns, sort=False).cumcount().astype(np.int64)}
    )
