"""Mondrian partitioning (LeFevre et al. ICDE 2006), vectorized by level, for ANGEL's two
partitions (l-diverse batches, k-anonymous groups), and `blind_mondrian`, the marginal
publisher's partitioning step (002 §3, Figure 1), its cuts placed by the QI alone.

Decisions: docs/explanation/algorithms.md, "Mondrian for l-diversity"; why the blind
cut: docs/explanation/marginals.md, "Cuts that tell nothing".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from .arrays import dense_ids, lex_order
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


def _blind_cut(
    node: np.ndarray, value: np.ndarray, median: np.ndarray, nodes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per node, the value boundary nearest its middle on one attribute, from the QI
    alone: `value <= median` or `value < median`, whichever leaves the smaller side
    larger (ties: `<=`, Mondrian's cut). Returns (left side per row, the smaller side's
    rows per node)."""
    cuts = [value <= median[node], value < median[node]]
    smaller = []
    for left in cuts:
        sizes = np.bincount(node * 2 + (~left).astype(np.int64), minlength=2 * nodes)
        smaller.append(np.minimum(sizes[0::2], sizes[1::2]))
    second = smaller[1] > smaller[0]
    return np.where(second[node], cuts[1], cuts[0]), np.maximum(smaller[0], smaller[1])


def _widths(x: np.ndarray, node: np.ndarray, nodes: int) -> np.ndarray:
    """Per node, max - min of every column of x (rows of a node sorted together, one
    `reduceat` each), as a pandas group-by of the non-empty nodes gives it."""
    order = np.argsort(node, kind="stable")
    sizes = np.bincount(node, minlength=nodes)
    starts = (np.cumsum(sizes) - sizes)[sizes > 0]
    rows = x[order]
    return np.maximum.reduceat(rows, starts, axis=0) - np.minimum.reduceat(rows, starts, axis=0)


Cut = Callable[[np.ndarray, np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def mondrian(
    codes: pd.DataFrame,
    extents: Mapping[str, int],
    sensitive: np.ndarray | None = None,
    l: int | None = None,
    k: int | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """A group id per row: l-diverse groups (with `sensitive`, `l`) or strict k-anonymous
    ones (`k`), or both; `start`: dense node ids to refine (default: one node). An
    l-diverse cut is accepted by its sides' values, so it tells where values lie: the
    marginal publisher uses `blind_mondrian` instead."""

    def cut(node: np.ndarray, value: np.ndarray, median: np.ndarray, nodes: int):
        trial = value <= median[node]
        return trial, _allowed(node, trial, sensitive, l, k, nodes)

    return _levels(codes, extents, start, cut)


def blind_mondrian(
    codes: pd.DataFrame,
    extents: Mapping[str, int],
    sensitive: np.ndarray,
    m: int,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """m-eligible sub-tables whose cuts never depend on where sensitive values lie (see
    docs/explanation/marginals.md): a node of n rows whose most frequent value occurs c
    times is cut at the QI boundary nearest its middle (`_blind_cut`, widest attribute
    first) only if both sides hold at least m c rows, so both are m-eligible however
    the node's values are arranged. Returns a sub-table id per row."""

    level: list = [None, None]  # (node ids, their top counts): once per level, not per attribute

    def cut(node: np.ndarray, value: np.ndarray, median: np.ndarray, nodes: int):
        if level[0] is not node:
            level[:] = [node, top_counts(node, sensitive, nodes)]
        trial, smaller = _blind_cut(node, value, median, nodes)
        return trial, smaller >= m * level[1]

    return _levels(codes, extents, start, cut)


def _levels(
    codes: pd.DataFrame, extents: Mapping[str, int], start: np.ndarray | None, cut: Cut
) -> np.ndarray:
    """Mondrian's recursion, one level of every node at a time: per node, attributes in
    decreasing normalized width, the first whose `cut` is allowed splits it; a node no
    attribute splits is final."""
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
            value = x[np.arange(n), rank_attr[node, r]]
            order = lex_order([node, value])
            sizes = np.bincount(node, minlength=nodes)
            first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            median = value[order][first + (sizes - 1) // 2]
            trial, ok = cut(node, value, median, nodes)
            ok &= ~decided
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
