"""The fewest rows to suppress so that a sensitive attribute becomes l-eligible
(`privacy.suppression`), and which ones. Pure NumPy.

An attribute is l-eligible when no value covers more than 1/l of the rows
(docs/explanation/architecture.md, "The data model"). Removing x_i rows of value i
(X = sum x_i) leaves it eligible iff c_i - x_i <= (n - X) / l for every i. For a fixed
X the least x_i are max(0, c_i - floor((n - X) / l)), so the least X is the smallest with
sum_i max(0, c_i - floor((n - X) / l)) <= X: the left side grows by at most
(values above the cap) / l < 1 per row removed while the right grows by 1, so the
condition is monotone in X and a binary search finds it. Only rows of the values above
the cap are removed; which ones is decided by a seeded hash of each row's content and
occurrence (`kernels/sampling.sample_keys`), so a run is reproducible and both engines
remove the same rows.
"""

from __future__ import annotations

import numpy as np


def excess(counts: np.ndarray, l: int, removed: int) -> np.ndarray:
    """Per value, the rows above the cap floor((n - removed) / l)."""
    cap = (int(counts.sum()) - removed) // l
    return np.maximum(0, counts - cap)


def fewest_to_suppress(counts: np.ndarray, l: int) -> np.ndarray:
    """Per value, how many rows to remove (the least total; see the module docstring)."""
    counts = np.asarray(counts, dtype=np.int64)
    lo, hi = 0, int(counts.sum())
    while lo < hi:
        mid = (lo + hi) // 2
        if int(excess(counts, l, mid).sum()) <= mid:
            hi = mid
        else:
            lo = mid + 1
    return excess(counts, l, lo)
