"""A marginal's QI-groups from m-invariant buckets (002 §3, Definition 6; 004
Definition 11), vectorized by level.

- `halved` (002 §3): a bucket whose every value appears c times is halved
  recursively (per value, the tuples sorted on one attribute, the first floor(c/2)
  left) on the marginal's attribute whose split minimizes NCP(B1) + NCP(B2), until
  groups hold one tuple per value (|K| tuples). All nodes of a level are split at once
  (one sort per candidate attribute).
- `decompose`: `halved` on the buckets and on their signature classes, the better per
  class. Decision (beyond 002): the buckets of one signature (004 Definition 11's
  merge, `statdb.signature_buckets`; buckets come one per sub-table and signature) are
  also halved as one, and per class the decomposition with the lower total NCP on the
  marginal's attributes is kept (ties: the buckets'). A marginal on few attributes
  gains most: a class's tuples pair up along those attributes across sub-tables cut on
  all of them (docs/benchmarks/marginals.md). Either way every group is m-unique and
  holds one tuple per value of its class's signature, so each tuple keeps its
  signature in every marginal (004 Lemma 4). Safety: the choice reads the QI values and which tuples
  share a bucket and a value, as 002's halving already does, nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .arrays import dense_ids, lex_order
from .minvariance import group_ncp
from .statdb import signature_buckets


def decompose(
    codes: pd.DataFrame, sensitive: np.ndarray, bucket: np.ndarray, extents: Mapping[str, int]
) -> np.ndarray:
    """QI-groups of one marginal (its attributes = `codes`' columns): per signature class,
    the halving of its buckets or of the class whole, whichever has the lower total NCP
    (see the module docstring). Returns a dense group index per row."""
    fine = halved(codes, sensitive, bucket, extents)
    if codes.shape[1] == 0 or len(bucket) == 0:
        return fine
    merged = signature_buckets(bucket, sensitive)
    own_bucket = dense_ids(bucket)[1]
    class_of = np.zeros(int(own_bucket.max()) + 1, dtype=np.int64)
    class_of[own_bucket] = merged
    rows = np.flatnonzero(np.bincount(class_of)[merged] > 1)  # one bucket: `fine` already
    if len(rows) == 0:
        return fine
    own, cls = codes.iloc[rows], dense_ids(merged[rows])[1]
    whole = halved(own, sensitive[rows], cls, extents)
    classes = int(cls.max()) + 1
    mine = dense_ids(fine[rows])[1]
    use = _class_ncp(own, whole, cls, classes, extents) < _class_ncp(
        own, mine, cls, classes, extents
    )
    group = fine * 2
    group[rows[use[cls]]] = whole[use[cls]] * 2 + 1
    return dense_ids(group)[1]


def _class_ncp(
    codes: pd.DataFrame,
    group: np.ndarray,
    cls: np.ndarray,
    classes: int,
    extents: Mapping[str, int],
) -> np.ndarray:
    """Each class's total NCP: the sum of its groups' NCP (`group` dense, inside classes)."""
    ncp = group_ncp(codes, group, extents).to_numpy()
    return np.bincount(cls, weights=(ncp / np.bincount(group))[group], minlength=classes)


def halved(
    codes: pd.DataFrame, sensitive: np.ndarray, bucket: np.ndarray, extents: Mapping[str, int]
) -> np.ndarray:
    """002 §3's decomposition of one marginal (its attributes = `codes`' columns): each
    bucket halved recursively until a group holds one tuple per value of its signature.
    Returns a group index per row (groups numbered in order of their first row's bucket
    and path)."""
    n = len(bucket)
    node = bucket.astype(np.int64).copy()
    attrs = list(codes.columns)
    cols = codes.to_numpy(dtype=np.int64) if attrs else np.zeros((n, 0), dtype=np.int64)
    while True:
        c_row = _top_per_node(node, sensitive)  # every value of a bucket appears c times
        act = np.flatnonzero(c_row > 1)  # only nodes still to split do any work
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
