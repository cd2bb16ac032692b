"""A marginal's QI-groups from m-invariant buckets (002 §3, Definition 6; 004 Definition
11), vectorized by level: 002's halving (`halved`), the matching (`matched`) and, per
signature class, the narrowest of three decompositions (`decompose`).

Decisions and why they are safe: docs/explanation/marginals.md, "Decisions, and the
runs that measure them"; docs/explanation/algorithms.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .arrays import dense_ids, lex_order, run_starts
from .minvariance import group_ncp
from .statdb import signature_buckets

MATCH_CAP = 128  # groups matched at once in one node (`matched`); larger nodes are halved first
_COST_CELLS = 1 << 22  # pair-attribute cells costed at once (`_assign`): 32 MiB of floats


def decompose(
    codes: pd.DataFrame, sensitive: np.ndarray, bucket: np.ndarray, extents: Mapping[str, int]
) -> np.ndarray:
    """QI-groups of one marginal (its attributes = `codes`' columns): per signature class,
    the lowest total NCP of 002's halving of its buckets, the matching of its buckets and
    the matching of the class whole (docs/explanation/marginals.md). Returns a dense group
    index per row."""
    fine = halved(codes, sensitive, bucket, extents)
    if codes.shape[1] == 0 or len(bucket) == 0:
        return fine
    merged = signature_buckets(bucket, sensitive)
    own_bucket = dense_ids(bucket)[1]
    class_of = np.zeros(int(own_bucket.max()) + 1, dtype=np.int64)
    class_of[own_bucket] = merged
    cls = class_of[own_bucket]
    rows = np.flatnonzero(_top_per_node(cls, sensitive) > 1)  # classes of one group: done
    if len(rows) == 0:
        return fine
    own, s, c = codes.iloc[rows], sensitive[rows], dense_ids(cls[rows])[1]
    candidates = [fine[rows], matched(own, s, bucket[rows], extents), matched(own, s, c, extents)]
    group = fine * 2
    group[rows] = _lowest(own, c, candidates, extents) * 2 + 1
    return dense_ids(group)[1]


def _lowest(
    codes: pd.DataFrame, cls: np.ndarray, candidates: list[np.ndarray], extents: Mapping[str, int]
) -> np.ndarray:
    """Per class (`cls` per row), the candidate grouping with the lowest total NCP (ties:
    the earlier). Dense group ids."""
    classes = int(cls.max()) + 1
    cost = np.empty((len(candidates), classes))
    for i, group in enumerate(candidates):
        mine = dense_ids(group)[1]
        ncp = group_ncp(codes, mine, extents).to_numpy()
        cost[i] = np.bincount(cls, weights=(ncp / np.bincount(mine))[mine], minlength=classes)
    pick = cost.argmin(axis=0)[cls]
    out = np.zeros(len(cls), dtype=np.int64)
    for i, group in enumerate(candidates):
        out[pick == i] = group[pick == i] * len(candidates) + i
    return dense_ids(out)[1]


def matched(
    codes: pd.DataFrame,
    sensitive: np.ndarray,
    node: np.ndarray,
    extents: Mapping[str, int],
    cap: int = MATCH_CAP,
) -> np.ndarray:
    """Groups of one tuple per value of each node (a bucket or a class, every value `c`
    times): nodes of more than `cap` groups are halved first (`halved`); then per node
    the tuples of its first value seed c groups and each next value's tuples are
    assigned to them by a minimum-cost perfect matching (`linear_sum_assignment`), the
    cost of a pair the normalized width sum_A (max_A - min_A) / extent_A of the group's
    box with the tuple added. Values go in the order of their first row (label-free, see
    docs/explanation/marginals.md). Returns dense group ids."""
    node = halved(codes, sensitive, node, extents, until=cap)
    scale = np.array([1.0 / extents[a] if extents[a] > 0 else 0.0 for a in codes.columns])
    x = codes.to_numpy(dtype=np.float64) * scale if len(scale) else np.zeros((len(node), 0))
    order = lex_order([node, _first_row_of_value(node, sensitive)])  # label-free
    nd, sv = node[order], sensitive[order]
    new_value = np.r_[True, (nd[1:] != nd[:-1]) | (sv[1:] != sv[:-1])]
    block = np.cumsum(new_value) - 1
    rank = np.arange(len(nd)) - np.flatnonzero(new_value)[block]  # place in its value
    value_index = block - block[np.r_[True, nd[1:] != nd[:-1]]][nd]
    per_node = np.bincount(nd)
    c = per_node // np.maximum(np.bincount(nd[new_value], minlength=len(per_node)), 1)
    if (np.bincount(block) != c[nd[new_value]]).any():
        raise ValueError("matched: every value of a node must appear equally often")
    offset = np.r_[0, np.cumsum(c)[:-1]]
    group = np.empty(len(nd), dtype=np.int64)
    first = value_index == 0
    group[order[first]] = offset[nd[first]] + rank[first]
    lo, hi = np.empty((int(c.sum()), x.shape[1])), np.empty((int(c.sum()), x.shape[1]))
    lo[group[order[first]]] = hi[group[order[first]]] = x[order[first]]
    for j in range(1, int(value_index.max(initial=0)) + 1):
        take = value_index == j
        rows, at = order[take], offset[nd[take]]  # a node's tuples of value j, rank order
        _assign(lo, hi, x, rows, at, run_starts(nd[take]))
        g = at + rank[take]
        group[rows] = g
        lo[g], hi[g] = np.minimum(lo[g], x[rows]), np.maximum(hi[g], x[rows])
    return group


def _first_row_of_value(node: np.ndarray, sensitive: np.ndarray) -> np.ndarray:
    """Per row, the first row of its node holding its value: values ordered by where they
    first appear, never by their codes, so relabeling the values changes no group."""
    s = sensitive.astype(np.int64) - int(sensitive.min(initial=0))
    key = node.astype(np.int64) * (int(s.max(initial=0)) + 1) + s
    _, first, cell = np.unique(key, return_index=True, return_inverse=True)
    return first[cell.reshape(-1)]


def _assign(
    lo: np.ndarray, hi: np.ndarray, x: np.ndarray, rows: np.ndarray, at: np.ndarray, starts
) -> None:
    """Reorder `rows` in place, per run (from `starts`; a node's tuples of one value, its
    groups numbered from `at`), so that the i-th goes to the run's i-th group at the least
    total width of the grown boxes (`matched`). Runs of one size are costed at once.
    (SciPy is imported here: a partition task of a publish that never decomposes
    marginals does not pay for it.)"""
    from scipy.optimize import linear_sum_assignment

    size = np.diff(np.append(starts, len(rows)))
    for k in np.unique(size[size > 1]).tolist():
        runs = starts[size == k]
        step = max(1, _COST_CELLS // (k * k * max(x.shape[1], 1)))  # bounded memory
        for first in (runs[i : i + step] for i in range(0, len(runs), step)):
            idx = first[:, None] + np.arange(k)  # (runs, k) positions in `rows`
            groups = at[first][:, None] + np.arange(k)
            t = x[rows[idx]][:, None, :, :]  # runs, 1, tuples, attributes
            cost = (
                np.maximum(hi[groups][:, :, None, :], t) - np.minimum(lo[groups][:, :, None, :], t)
            ).sum(axis=3)
            for r in range(len(first)):
                tuples = linear_sum_assignment(cost[r])[1]  # square: groups in order
                rows[idx[r]] = rows[idx[r][tuples]]


def halved(
    codes: pd.DataFrame,
    sensitive: np.ndarray,
    bucket: np.ndarray,
    extents: Mapping[str, int],
    until: int = 1,
) -> np.ndarray:
    """002 §3's decomposition of one marginal (its attributes = `codes`' columns): each
    bucket halved recursively until a group holds one tuple per value of its signature
    (`until` > 1: until a node holds at most that many tuples of each value).
    Returns a group index per row (groups numbered in order of their first row's bucket
    and path)."""
    n = len(bucket)
    node = bucket.astype(np.int64).copy()
    attrs = list(codes.columns)
    cols = codes.to_numpy(dtype=np.int64) if attrs else np.zeros((n, 0), dtype=np.int64)
    while True:
        c_row = _top_per_node(node, sensitive)  # every value of a bucket appears c times
        act = np.flatnonzero(c_row > until)  # only nodes still to split do any work
        if len(act) == 0:
            break
        side = _halve(
            codes.iloc[act], cols[act], node[act], sensitive[act], c_row[act] // 2, extents
        )
        new = node * 2
        new[act] += side
        node = dense_ids(new)[1]
    return dense_ids(node)[1]


def _top_per_node(node: np.ndarray, sensitive: np.ndarray) -> np.ndarray:
    """Per row, the largest count of one sensitive value in its node (by counting)."""
    s = sensitive.astype(np.int64) - min(int(sensitive.min(initial=0)), 0)
    width = int(s.max(initial=0)) + 1
    ids, dense = dense_ids(node)
    cells = np.bincount(dense * width + s, minlength=len(ids) * width)
    return cells.reshape(len(ids), width).max(axis=1)[dense]


def _halve(
    codes: pd.DataFrame,
    cols: np.ndarray,
    node: np.ndarray,
    sensitive: np.ndarray,
    half: np.ndarray,
    extents: Mapping[str, int],
) -> np.ndarray:
    """One level of `halved` on the rows of nodes to split: per node, the side (0: left,
    the first `half` tuples of each value in the order of one attribute) of the attribute
    with the least NCP(B1) + NCP(B2) (ties: the first attribute)."""
    n, attrs = len(node), list(codes.columns)
    best_side: np.ndarray | None = None
    best_cost = np.full(n, np.inf)
    for j in range(max(len(attrs), 1)):
        key = cols[:, j] if attrs else np.zeros(n, dtype=np.int64)
        order = lex_order([node, sensitive, key])  # stable: ties in row order
        grp = np.stack([node[order], sensitive[order]], axis=1)
        first = np.concatenate([[True], (grp[1:] != grp[:-1]).any(axis=1)])
        start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - start
        side = (rank >= half).astype(np.int64)
        split = node * 2 + side
        cost = group_ncp(codes, split, extents) if attrs else pd.Series(0.0, index=np.unique(split))
        node_cost = cost.groupby(cost.index // 2).sum().reindex(node).to_numpy()
        better = node_cost < best_cost
        best_side = side if best_side is None else np.where(better, side, best_side)
        best_cost = np.where(better, node_cost, best_cost)
    assert best_side is not None  # the loop runs at least once
    return best_side
