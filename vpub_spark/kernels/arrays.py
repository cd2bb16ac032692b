"""Small NumPy helpers shared by the kernels."""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D array, as `np.unique(values)` but by one
    sort. NumPy 2.3+ finds a plain `np.unique`'s values with a hash table: on this
    machine 1.06 s for 1M distinct int64 against 0.02 s by sorting (4M: 5.1 s against
    0.1 s), as its hash table misses the cache at every insert (README, issue 18)."""
    s = np.sort(np.asarray(values).ravel())
    if len(s) == 0:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
