"""Mondrian partitioning (LeFevre et al. ICDE 2006; docs/explanation/algorithms.md), vectorized by
level, for ANGEL's two partitions: l-diverse batches and k-anonymous generalization groups.

Anonymize(P): try the attributes in decreasing normalized width (ties: lower index);
the median is the value at position floor((|P| - 1) / 2) of P's sorted values;
L = {t : t.A <= median}, R = the rest; skip the attribute if R is empty or a side is
not allowed; split on the first allowed attribute, else P is final. All nodes of a
level are handled at once: one sort per attribute rank. `flexible` (l-diverse only, the
marginal publisher's partitioning step): where the median cut is not allowed, the
allowed cut nearest the middle on the same attribute is taken before the next
attribute is tried: narrower m-eligible sub-tables than 002 Figure 1's
(docs/benchmarks/marginals.md, "Why 002's error is not reproduced").
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .arrays import dense_ids, distinct, lex_order
from .minvariance import next_level, top_counts


def _allowed(
    node: np.ndarray,
    left: np.ndarray,
    sensitive: np.ndarray | None,
    l: int | None,
    k: int | None,
    nodes: int,
) -> np.ndarray:
    """Per node: both sides non-empty and allowed (size >= k; l-diverse: c(v) <= size / l)."""
    half = node * 2 + (~left).astype(np.int64)
    sizes = np.bincount(half, minlength=2 * nodes)
    ok = sizes > 0
    if k is not None:
        ok &= sizes >= k
    if l is not None:
        assert sensitive is not None, "l-diverse cuts need the sensitive values"
        ok &= top_counts(half, sensitive, 2 * nodes) * l <= sizes
    return ok[0::2] & ok[1::2]


def _nearest_cut(node: np.ndarray, value: np.ndarray, sensitive: np.ndarray, l: int):
    """Per node (dense ids), the cut between two distinct values nearest the node's middle
    whose two sides are both l-diverse (c(v) <= size / l): (left side per row, found per
    node). One pass over the rows sorted by (node, value): a side's largest count of one
    sensitive value is a running maximum of the rows' occurrence numbers (`_side_tops`),
    linear in the rows, not in rows times values."""
    n = len(node)
    order = lex_order([node, value])
    sn, sv = node[order], value[order]
    sizes = np.bincount(node)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ranked = sensitive[order]
    codes = np.searchsorted(distinct(ranked), ranked)
    before, after = _side_tops(sn, codes)
    pos = np.arange(n) - start[sn]  # rows left of a cut placed before this row
    boundary = (pos > 0) & np.concatenate([[False], sv[1:] != sv[:-1]])
    ok = boundary & (before * l <= pos) & (after * l <= sizes[sn] - pos)
    far = np.iinfo(np.int64).max
    dist = np.where(ok, np.abs(2 * pos - sizes[sn]), far)
    best = np.minimum.reduceat(dist, start)  # rows sorted by node, every node non-empty
    hit = ok & (dist == best[sn])
    chosen = np.maximum.reduceat(np.where(hit, pos, -1), start)  # ties: the later cut
    side = np.zeros(n, dtype=bool)
    side[order] = pos < chosen[sn]
    return side, best < far


def _side_tops(node: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by node: per row, the largest count of one code among the node's
    rows before it, and among the node's rows from it on. The k-th row of a code in its
    node has occurrence k; the largest count before row i is the running maximum of the
    occurrences before i, and from i on the running maximum (from the end) of the
    occurrences counted from the end. Node offsets keep the maxima within a node."""
    n = len(node)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    by_code = lex_order([node, codes])  # stable: a code's rows in row order
    key = node[by_code] * (int(codes.max()) + 1) + codes[by_code]
    runs = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    length = np.diff(np.r_[runs, n])
    k = np.arange(n) - np.repeat(runs, length)  # 0-based occurrence in the run
    occ, from_end = np.empty(n, np.int64), np.empty(n, np.int64)
    occ[by_code], from_end[by_code] = k + 1, np.repeat(length, length) - k
    big = n + 1
    upto = np.maximum.accumulate(occ + node * big) - node * big  # through row i
    before = np.r_[0, upto[:-1]]
    before[np.r_[True, node[1:] != node[:-1]]] = 0  # a node's first row has none before
    back = (int(node[-1]) - node[::-1]) * big
    after = (np.maximum.accumulate(from_end[::-1] + back) - back)[::-1]
    return before, after


def _widths(x: np.ndarray, node: np.ndarray, nodes: int) -> np.ndarray:
    """Per node, max - min of every column of x (rows of a node sorted together, one
    `reduceat` each), as a pandas group-by of the non-empty nodes gives it."""
    order = np.argsort(node, kind="stable")
    sizes = np.bincount(node, minlength=nodes)
    starts = (np.cumsum(sizes) - sizes)[sizes > 0]
    rows = x[order]
    return np.maximum.reduceat(rows, starts, axis=0) - np.minimum.reduceat(rows, starts, axis=0)


def mondrian(
    codes: pd.DataFrame,
    extents: Mapping[str, int],
    sensitive: np.ndarray | None = None,
    l: int | None = None,
    k: int | None = None,
    start: np.ndarray | None = None,
    flexible: bool = False,
) -> np.ndarray:
    """A group id per row: l-diverse groups (with `sensitive`, `l`) or strict k-anonymous
    ones (`k`), or both; `start`: dense node ids to refine (default: one node).
    `flexible` (l-diverse only): where the median cut is not allowed, cut at the allowed
    value boundary nearest the median (`_nearest_cut`) before trying the next attribute."""
    assert not flexible or (l is not None and k is None), "flexible cuts are for l-diverse groups"
    n, attrs = len(codes), list(codes.columns)
    x = codes.to_numpy(dtype=np.int64)
    ext = np.array([max(extents[a], 1) for a in attrs], dtype=np.float64)
    node = np.zeros(n, dtype=np.int64) if start is None else np.asarray(start, dtype=np.int64)
    final = np.zeros(int(node.max()) + 1 if n else 1, dtype=bool)
    while not final.all():
        nodes = len(final)
        width = _widths(x, node, nodes) / ext  # [nodes, d], normalized
        rank_attr = np.argsort(
            -width, axis=1, kind="stable"
        )  # per node: attributes by decreasing width, ties lower index
        decided = final.copy()
        left = np.zeros(n, dtype=bool)
        for r in range(len(attrs)):
            attr = rank_attr[node, r]
            value = x[np.arange(n), attr]
            order = lex_order([node, value])
            sizes = np.bincount(node, minlength=nodes)
            start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            median = value[order][start + (sizes - 1) // 2]
            trial = value <= median[node]
            ok = _allowed(node, trial, sensitive, l, k, nodes) & ~decided
            if flexible and (need := ~ok & ~decided).any():
                rows = np.flatnonzero(need[node])
                ids, local = dense_ids(node[rows])
                side, found = _nearest_cut(
                    local, value[rows], np.asarray(sensitive)[rows], int(l or 1)
                )
                trial[rows] = side
                ok[ids[found]] = True
            take = ok[node]
            left[take] = trial[take]
            decided |= ok
        node, final = next_level(node, decided & ~final, (~left).astype(np.int64))
    return node


def qi_order(
    codes: pd.DataFrame, extents: Mapping[str, int], k: int, start: np.ndarray
) -> np.ndarray:
    """A value-blind order of the rows inside each node of `start` (the QI-local dealing
    of `minvariance.assign_buckets`): the leaves of strict Mondrian with this k in tree
    order (leaf ids follow the cuts left to right), so rows of nearby ranks are close on
    every attribute. It reads the QI codes only."""
    return mondrian(codes, extents, k=k, start=dense_ids(start)[1]).astype(np.float64)
