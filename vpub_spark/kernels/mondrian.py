"""Mondrian partitioning (LeFevre et al. ICDE 2006; ALGORITHMS.md §6), vectorized by level,
for ANGEL's two partitions (ALGORITHMS.md §1): l-diverse batches and k-anonymous
generalization groups.

Anonymize(P): try the attributes in decreasing normalized width (ties: lower index);
the median is the value at position floor((|P| - 1) / 2) of P's sorted values;
L = {t : t.A <= median}, R = the rest; skip the attribute if R is empty or a side is
not allowed; split on the first allowed attribute, else P is final. All nodes of a
level are handled at once: one sort per attribute rank.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

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


def mondrian(
    codes: pd.DataFrame,
    extents: Mapping[str, int],
    sensitive: np.ndarray | None = None,
    l: int | None = None,
    k: int | None = None,
) -> np.ndarray:
    """A group id per row: l-diverse groups (with `sensitive`, `l`) or strict k-anonymous
    ones (`k`), or both."""
    n, attrs = len(codes), list(codes.columns)
    x = codes.to_numpy(dtype=np.int64)
    ext = np.array([max(extents[a], 1) for a in attrs], dtype=np.float64)
    node = np.zeros(n, dtype=np.int64)
    final = np.zeros(1, dtype=bool)
    while not final.all():
        nodes = len(final)
        frame = pd.DataFrame(x).assign(__n=node).groupby("__n")
        width = (frame.max() - frame.min()).to_numpy() / ext  # [nodes, d], normalized
        rank_attr = np.argsort(
            -width, axis=1, kind="stable"
        )  # per node: attributes by decreasing width, ties lower index
        decided = final.copy()
        left = np.zeros(n, dtype=bool)
        for r in range(len(attrs)):
            attr = rank_attr[node, r]
            value = x[np.arange(n), attr]
            order = np.lexsort((value, node))
            sizes = np.bincount(node, minlength=nodes)
            start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            median = value[order][start + (sizes - 1) // 2]
            trial = value <= median[node]
            ok = _allowed(node, trial, sensitive, l, k, nodes) & ~decided
            take = ok[node]
            left[take] = trial[take]
            decided |= ok
        node, final = next_level(node, decided & ~final, (~left).astype(np.int64))
    return node
