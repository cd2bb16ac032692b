"""The anatomy-based statistical database of 004 (§4-§6) on one encoded bucketization.

A bucketization (004 Definition 11) gives every tuple a bucket; a bucket's signature K
is the set of its sensitive values, each held by |B|/|K| tuples (Lemma 5), so a bucket
splits into |B|/|K| QI-groups of signature K (a decomposition, Definition 12), and every
decomposition is an anonymized version m-invariant with the first (Lemma 6).

A query (004 §4) is a range of codes per QI attribute it constrains and a set of
sensitive codes. For anatomy the result interval of a partition is Lemma 3's
`[sum_G max(0, q(G) + s(G) - |G|), sum_G min(q(G), s(G))]`; the decomposition that makes
it shortest is A-Decompose's (Figure 2, Lemma 7), and its interval is A-Count's
(Figure 3): per bucket, with beta_v the tuples of value v meeting every QI predicate and
alpha the values of K meeting the sensitive predicate, `[sum of the alpha smallest
beta, sum of the alpha largest beta]`. Decision: 004's Lemma 7 names the two ends the
other way round; Figure 3 and Example 2 ([1, 2] for Q_2 on B_1) fix the order used here.
Everything is vectorized over all buckets at once (no loop over buckets or tuples).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Query:
    """COUNT(*) WHERE lo_i <= A_i <= hi_i (for the attributes in `ranges`, inclusive
    codes) AND A^s in `sensitive` (codes)."""

    ranges: Mapping[str, tuple[int, int]]
    sensitive: frozenset[int]


def qi_mask(codes: pd.DataFrame, ranges: Mapping[str, tuple[int, int]]) -> np.ndarray:
    """Tuples meeting every QI predicate."""
    ok = np.ones(len(codes), dtype=bool)
    for a, (lo, hi) in ranges.items():
        col = codes[a].to_numpy()
        ok &= (col >= lo) & (col <= hi)
    return ok


def _in(values: np.ndarray, chosen: Iterable[int]) -> np.ndarray:
    return np.isin(values, np.fromiter(chosen, dtype=np.int64))


def anatomy_interval(group: np.ndarray, sensitive: np.ndarray, qi_ok: np.ndarray, chosen: Iterable[int]) -> tuple[int, int]:  # fmt: skip
    """004 Lemma 3: the result interval of a query on the anatomy of a partition
    (`group` per tuple), given which tuples meet the QI predicates."""
    _, g = np.unique(group, return_inverse=True)
    size = np.bincount(g)
    q = np.bincount(g, weights=qi_ok, minlength=len(size))
    s = np.bincount(g, weights=_in(sensitive, chosen), minlength=len(size))
    return int(np.maximum(0, q + s - size).sum()), int(np.minimum(q, s).sum())


def a_count(bucket: np.ndarray, sensitive: np.ndarray, qi_ok: np.ndarray, chosen: Iterable[int]) -> tuple[int, int]:  # fmt: skip
    """004 Figure 3 over every bucket at once: the shortest result interval any
    decomposition of the bucketization gives (the sum of the buckets' a-intervals)."""
    width = int(sensitive.max(initial=0)) + 1
    key = bucket.astype(np.int64) * width + sensitive
    cells, cell = np.unique(key, return_inverse=True)  # the buckets' (bucket, value) cells
    beta = np.bincount(cell[qi_ok], minlength=len(cells))
    cell_bucket, cell_value = cells // width, cells % width
    _, b = np.unique(cell_bucket, return_inverse=True)
    k = np.bincount(b)  # |K| per bucket
    alpha = np.bincount(b, weights=_in(cell_value, chosen), minlength=len(k)).astype(np.int64)
    order = np.lexsort((beta, b))  # per bucket, beta ascending
    start = np.concatenate([[0], np.cumsum(k)[:-1]])
    rank = np.arange(len(order)) - start[b[order]]
    sorted_beta, owner = beta[order], b[order]
    lower = sorted_beta[rank < alpha[owner]].sum()
    upper = sorted_beta[rank >= k[owner] - alpha[owner]].sum()
    return int(lower), int(upper)


def a_decompose(bucket: np.ndarray, sensitive: np.ndarray, qi_ok: np.ndarray) -> np.ndarray:
    """004 Figure 2 for every bucket at once: each tuple's QI-group. Group i of a bucket
    takes, for every value v of its signature, the i-th tuple of v, tuples meeting the
    QI predicates first (S_1 before S_2; ties by position), so the i-th group is built
    from S_1 whenever S_1 still has a tuple of v. Group ids are dense from 0."""
    n = len(bucket)
    _, b = np.unique(bucket, return_inverse=True)
    width = int(sensitive.max(initial=0)) + 1
    key = b.astype(np.int64) * width + sensitive
    order = np.lexsort((np.arange(n), ~qi_ok, key))
    sorted_key = key[order]
    first = np.concatenate([[True], sorted_key[1:] != sorted_key[:-1]])
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - start  # the tuple's place among its bucket's tuples of v
    values_per_bucket = np.bincount(np.unique(key) // width, minlength=b.max(initial=-1) + 1)  # |K|
    groups = np.bincount(b) // np.maximum(values_per_bucket, 1)  # |B| / |K| (Lemma 5)
    offset = np.concatenate([[0], np.cumsum(groups)[:-1]])
    return offset[b] + rank
