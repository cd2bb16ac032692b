"""An anatomy table's QI rows arranged for estimates at many keys at once (000 §5.1):
est(x_q, s) = sum_g n_g(x_q) c_g(s) / |g|, where n_g(x_q) is the number of group g's
QIT rows showing x_q.

`QiRuns` holds n_g(x_q) for every (x_q, g) the QIT shows, as "runs" sorted by x_q's
codes packed into one int64: each distinct packed key owns a contiguous slice of runs,
one per group. `pair_sums` walks the (key, run) pairs a bounded number at a time, so
its arrays stay small (int32 where they fit) and each chunk's memory is freed before
the next one takes the same amount: on a machine that backs fresh memory lazily, first
touching 1 GB took 2.5 s, and the 10M-row KL's pair arrays, expanded 4M at a time,
had grown its process by that much (docs/explanation/performance.md). `cell_sums` sums
the same estimates densely at every cell, when the cells are few, as a sparse product.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..kernels.arrays import pack_codes, run_starts

PAIRS = 1 << 20
"""At most about this many (key, run) pairs are expanded at once by `pair_sums`: a few
arrays of this length (about 20 MB), which stay in the caches' reach. 4M-pair chunks
took 1.3x as long at 10M rows (110M pairs), 64K-pair chunks 1.4x (Python's per-chunk
cost)."""


@dataclass(frozen=True, eq=False)
class QiRuns:
    """n_g(x_q) sorted by packed x_q: distinct packed keys `keys` (ascending; mixed radix
    over `radix`, the first QI column most significant), the runs of `keys[i]` at
    `starts[i]:starts[i + 1]`, each run one dense group `group` holding `n` rows."""

    radix: list[int]
    keys: np.ndarray
    starts: np.ndarray
    group: np.ndarray
    n: np.ndarray
    _derived: dict = field(default_factory=dict, compare=False, repr=False)

    def per_run(self, name: str, make: Callable[[], np.ndarray]) -> np.ndarray:
        """An array over the runs, made once (by `make`) and kept: e.g. each run's rows
        over its group's size, the same for every key that meets the run."""
        if name not in self._derived:
            self._derived[name] = make()
        return self._derived[name]

    def slices(self, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each packed key's runs as [lo, hi) (empty where the QIT never shows it)."""
        pos = np.searchsorted(self.keys, packed)
        found = pos < len(self.keys)
        found[found] = self.keys[pos[found]] == packed[found]
        lo = self.starts[pos]  # pos <= len(keys): starts has one more entry
        return lo, np.where(found, self.starts[pos + found], lo)


def qi_runs(codes: Sequence[np.ndarray], group: np.ndarray, groups: int) -> QiRuns | None:
    """`QiRuns` of QIT rows with QI `codes` (one array a column, any integer type) in
    dense groups `group`; None when a code is negative or the codes do not pack into 62
    bits. One sort of key * groups + group when that fits in int64 (10M rows: about
    1 s against 3 s for `np.lexsort` of the two), else the lexsort."""
    rows = len(group)
    if not rows:
        nothing = np.zeros(0, np.int64)
        return QiRuns([1] * len(codes), nothing, np.zeros(1, np.int32), nothing, nothing * 1.0)
    radix = [int(c.max()) + 1 for c in codes]
    if any(int(c.min()) < 0 for c in codes) or float(np.prod(radix, dtype=float)) >= 2.0**62:
        return None
    key = pack_codes(codes, radix, rows)  # in place, column by column: no int64 copies
    if float(key.max()) * groups + groups < 2.0**62:
        key *= groups
        key += group
        key.sort()
        start = run_starts(key)
        pairs = key[start]
        del key
        g = np.empty(len(pairs), np.int32 if groups < 2**31 else np.int64)
        np.remainder(pairs, groups, out=g, casting="unsafe")  # < groups: fits
        np.floor_divide(pairs, groups, out=pairs)
        k = pairs
    else:
        order = np.lexsort((group, key))
        k, g = key[order], group[order]
        start = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (g[1:] != g[:-1])])
        k, g = k[start], g[start]
    n = np.diff(start, append=rows).astype(float)
    first = run_starts(k)
    return QiRuns(
        radix, k[first], _narrow(np.append(first, len(k)), len(k) + 1), _narrow(g, groups), n
    )


def _narrow(values: np.ndarray, top: int) -> np.ndarray:
    return values.astype(np.int32 if top < 2**31 else np.int64, copy=False)


def pair_sums(
    lo: np.ndarray,
    hi: np.ndarray,
    weights: Callable[[np.ndarray, np.ndarray], np.ndarray],
    s: np.ndarray,
) -> np.ndarray:
    """Per key i, sum over its runs r in [lo[i], hi[i]) of weights(r, s[i]) (vectorized:
    `weights` takes the pairs' run indexes and sensitive codes). At most about `PAIRS`
    pairs at a time (a key with more is a chunk of its own)."""
    count = hi - lo
    ends = np.cumsum(count)
    est = np.zeros(len(lo))
    index = np.int32 if not len(hi) or int(hi.max()) < 2**31 else np.int64
    a = 0
    while a < len(lo):
        base = int(ends[a - 1]) if a else 0
        b = max(a + 1, int(np.searchsorted(ends, base + PAIRS, "right")))
        r = count[a:b]
        total = int(ends[b - 1]) - base
        if total:
            first = ends[a:b] - r - base  # each key's first pair in the chunk
            at = np.repeat((lo[a:b] - first).astype(index), r)
            at += np.arange(total, dtype=at.dtype)
            some = r > 0  # reduceat sums from each start to the next: empty keys left out
            est[a:b][some] = np.add.reduceat(weights(at, np.repeat(s[a:b], r)), first[some])
        a = b
    return est


def cell_sums(
    cell: np.ndarray, group: np.ndarray, cells: int, shares: tuple[np.ndarray, ...]
) -> np.ndarray:
    """sum_g n_g(x) c_g(s) / |g| at every QI cell x < `cells` and sensitive code s, a
    dense array (cells, width = the largest code + 1): work of about rows x l whatever
    is asked later, against `pair_sums`' pairs of each key with every group that shows
    it (a QI of one attribute meets most groups). `cell`, `group`: each QIT row's cell
    and dense group; `shares`: each group's first position, its sensitive codes and
    c_g(s) / |g|, sorted by group (a suppressed -1 counts in |g| and is never asked
    for). The sum is a product of sparse matrices, QIT rows per (cell, group) times
    shares per (group, value), in scipy's C: no (row, value) pair is expanded in NumPy
    (as fast as counting the pairs a chunk at a time: docs/explanation/performance.md)."""
    from scipy.sparse import csr_matrix

    first, values, share = shares
    width = max(int(values.max(initial=-1)) + 1, 1)
    groups = len(first) - 1
    if len(group) > 1 and not bool((group[1:] >= group[:-1]).all()):  # as written: sorted
        order = np.argsort(group, kind="stable")
        group, cell = group[order], cell[order]
    rows = np.zeros(groups + 1, np.int64)
    np.cumsum(np.bincount(group, minlength=groups), out=rows[1:])
    index = np.int32 if max(cells, width, len(cell), len(values)) < 2**31 else np.int64
    qit = csr_matrix(
        (np.ones(len(cell)), cell.astype(index, copy=False), rows.astype(index)),
        shape=(groups, cells),
    )
    if len(values) and int(values.min()) < 0:  # suppressed: in no cell
        share, values = np.where(values >= 0, share, 0.0), np.maximum(values, 0)
    st = csr_matrix(
        (share, values.astype(index, copy=False), first.astype(index, copy=False)),
        shape=(groups, width),
    )
    return (qit.T @ st).toarray()
