"""m-invariant bucketization and its decomposition into marginals (002 §3; 004 §3.2;
ALGORITHMS.md §4, §5), vectorized, on one encoded m-eligible sub-table.

- `partition` (the partitioning step, 002 Figure 1): split a sub-table in two by
  NCP with the artificial extreme tuples, up to k shuffled tries, keep a split only if
  both halves are m-eligible, recurse. Decision: tuples are taken in their shuffled
  order in blocks (`block` = 1 is the paper's tuple-at-a-time greedy; larger blocks
  decide every tuple of a block against the two groups as they were at the block's
  start, one vectorized step per block instead of one Python step per tuple).
- `assign_buckets` (the assigning step, m-invariance's first release): one pool per
  sensitive value; while at least m pools are non-empty, one tuple from each of the m
  largest pools (ties to the smaller value) goes to the bucket keyed by that sorted
  signature (equal signatures merge). The sequence of signatures depends on the pool
  sizes only, so it is computed in runs (the m largest stay the same until the m-th
  falls to the (m+1)-th) and the tuples of each pool, in a seeded order, are dealt to
  the runs that take from it: no loop per tuple.
- Leftovers (at most m-1 tuples, distinct values). Decision: a leftover with value v
  may not simply join one QI-group, because the groups differ between marginals and
  the signatures would then differ too (002 needs one signature per tuple across all
  marginals). It instead forms a new bucket with one tuple of each value of a bucket B
  lacking v (B chosen so that its QI box grows least by the leftover; from B, per
  value, the tuple nearest the leftover): signature sig(B) + {v}, one tuple each.
  Every decomposition of every marginal then keeps each tuple's signature.
- `decompose` (002 §3, Definition 6): a bucket whose every value appears c times is
  halved recursively — per value, the tuples sorted on one attribute, the first
  floor(c/2) left — on the marginal's attribute whose split minimizes
  NCP(B1) + NCP(B2), until groups hold one tuple per value (|K| tuples). All nodes of
  a level are split at once (one sort per candidate attribute).
- NCP (ALGORITHMS.md §5; Xu et al. KDD 2006): decision: every attribute's codes are in
  its domain order (numeric by value, categorical by the declared order), so a group's
  penalty on A is (max - min) / (|dom A| - 1), and NCP(G) = |G| * sum over A.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import PrivacyError


def check_m_eligible(sensitive: np.ndarray, m: int, name: str = "the sensitive attribute", labels: Sequence[str] | None = None) -> None:
    """002 Theorem 2: an m-unique partition exists iff no value covers more than n/m."""
    values, counts = np.unique(sensitive, return_counts=True)
    n = len(sensitive)
    if n == 0 or counts.max() * m > n:
        if n == 0:
            raise PrivacyError("an empty table has no m-unique partition")
        top = values[np.argmax(counts)]
        label = labels[int(top)] if labels is not None else top
        raise PrivacyError(
            f"not {m}-eligible (002 Theorem 2): {name} = {label!r} covers {counts.max()} of {n} rows "
            f"({counts.max() / n:.1%}), more than 1/{m} = {1 / m:.1%}"
        )


def top_counts(key: np.ndarray, sensitive: np.ndarray, keys: int) -> np.ndarray:
    """Per key in [0, keys): how often its most frequent sensitive value occurs."""
    top = pd.DataFrame({"k": key, "v": sensitive}).groupby(["k", "v"]).size().groupby(level=0).max()
    return top.reindex(range(keys), fill_value=0).to_numpy()


def group_ncp(codes: pd.DataFrame, group: np.ndarray, extents: Mapping[str, int]) -> pd.Series:
    """NCP(G) = |G| * sum_A (max_A - min_A) / extent_A for each group id in `group`
    (extent = |dom A| - 1; attributes with extent 0 add nothing)."""
    cols = [a for a in codes.columns if extents[a] > 0]
    frame = codes[cols].assign(__g=group)
    agg = frame.groupby("__g", sort=True)
    width = (agg.max() - agg.min()) / pd.Series({a: float(extents[a]) for a in cols})
    return width.sum(axis=1) * agg.size()


def _runs(counts: np.ndarray, m: int) -> list[tuple[tuple[int, ...], int]]:
    """(indices of the m pools taken, times) of the assigning step, from pool sizes alone."""
    counts = counts.astype(np.int64).copy()
    idx = np.arange(len(counts))
    runs = []
    while (counts > 0).sum() >= m:
        order = np.lexsort((idx, -counts))
        top = order[:m]
        nxt = int(counts[order[m]]) if len(order) > m else 0
        k = max(int(counts[top[-1]]) - nxt, 1)
        runs.append((tuple(sorted(int(i) for i in top)), k))
        counts[top] -= k
    return runs


def assign_buckets(sensitive: np.ndarray, m: int, seed: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Each row's bucket (-1: a leftover) and each bucket's signature (sorted codes)."""
    check_m_eligible(sensitive, m)
    values, inverse, counts = np.unique(sensitive, return_inverse=True, return_counts=True)
    runs = _runs(counts, m)
    keys = sorted({sig for sig, _ in runs})
    bucket_of = {sig: b for b, sig in enumerate(keys)}
    bucket = np.full(len(sensitive), -1, dtype=np.int64)
    order = np.lexsort((np.random.default_rng(seed).random(len(sensitive)), inverse))  # each pool, seeded
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    taken = np.zeros(len(values), dtype=np.int64)
    for sig, k in runs:
        for v in sig:
            rows = order[start[v] + taken[v] : start[v] + taken[v] + k]
            bucket[rows] = bucket_of[sig]
            taken[v] += k
    return bucket, [tuple(int(values[i]) for i in sig) for sig in keys]


def place_leftovers(
    qi: pd.DataFrame, sensitive: np.ndarray, bucket: np.ndarray, signatures: list[tuple[int, ...]], extents: Mapping[str, int]
) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Give every leftover (bucket -1) a bucket of its own built with one tuple per value
    of the nearest bucket lacking its value (see the module's decision)."""
    bucket, signatures = bucket.copy(), list(signatures)
    scale = np.array([1.0 / extents[a] if extents[a] > 0 else 0.0 for a in qi.columns])
    pts = qi.to_numpy(dtype=np.float64) * scale
    for row in np.flatnonzero(bucket < 0):
        v = int(sensitive[row])
        best, best_growth = -1, np.inf
        for b, sig in enumerate(signatures):
            members = np.flatnonzero(bucket == b)
            if v in sig or len(members) == 0:
                continue
            lo, hi = pts[members].min(0), pts[members].max(0)
            growth = float((np.maximum(hi, pts[row]) - np.minimum(lo, pts[row])).sum() - (hi - lo).sum())
            if growth < best_growth:
                best, best_growth = b, growth
        if best < 0:
            raise PrivacyError(f"a leftover tuple with sensitive code {v} found no bucket without that value")
        members = np.flatnonzero(bucket == best)
        new = len(signatures)
        for value in signatures[best]:
            same = members[sensitive[members] == value]
            nearest = same[np.argmin(np.abs(pts[same] - pts[row]).sum(1))]
            bucket[nearest] = new
        bucket[row] = new
        signatures.append(tuple(sorted((*signatures[best], v))))
    used, bucket = np.unique(bucket, return_inverse=True)  # drop buckets emptied above
    return bucket.reshape(-1), [signatures[k] for k in used]


def decompose(codes: pd.DataFrame, sensitive: np.ndarray, bucket: np.ndarray, extents: Mapping[str, int]) -> np.ndarray:
    """QI-groups of one marginal (its attributes = `codes`' columns): each bucket halved
    recursively until a group holds one tuple per value of its signature. Returns a
    group index per row (groups numbered in order of their first row's bucket and path)."""
    n = len(bucket)
    node = bucket.astype(np.int64).copy()
    attrs = list(codes.columns)
    cols = codes.to_numpy(dtype=np.int64) if attrs else np.zeros((n, 0), dtype=np.int64)
    while True:
        per = pd.DataFrame({"n": node, "s": sensitive}).groupby(["n", "s"]).size()
        c = per.groupby(level=0).max()  # every value of a bucket appears c times
        c_row = c.reindex(node).to_numpy()
        if (c_row <= 1).all():
            break
        half = c_row // 2
        best_side, best_cost = None, np.full(n, np.inf)
        for j, _ in enumerate(attrs or [None]):
            key = cols[:, j] if attrs else np.zeros(n, dtype=np.int64)
            order = np.lexsort((np.arange(n), key, sensitive, node))
            grp = np.stack([node[order], sensitive[order]], axis=1)
            first = np.concatenate([[True], (grp[1:] != grp[:-1]).any(axis=1)])
            start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
            rank = np.empty(n, dtype=np.int64)
            rank[order] = np.arange(n) - start
            side = (rank >= half).astype(np.int64)  # 0: left
            split = node * 2 + side
            cost = group_ncp(codes, split, extents) if attrs else pd.Series(0.0, index=np.unique(split))
            node_cost = cost.groupby(cost.index // 2).sum().reindex(node).to_numpy()
            better = (node_cost < best_cost) & (c_row > 1)
            if best_side is None:
                best_side = side
            best_side = np.where(better, side, best_side)
            best_cost = np.where(better, node_cost, best_cost)
        new = np.where(c_row > 1, node * 2 + best_side, node * 2)
        node = np.unique(new, return_inverse=True)[1].reshape(-1)
    return np.unique(node, return_inverse=True)[1].reshape(-1)


def _split_level(points: np.ndarray, node: np.ndarray, nodes: int, rng: np.random.Generator, blocks: int) -> np.ndarray:
    """One try of 002 Figure 1 lines 4-7 for every node at once: side 0 (the group seeded
    by the node's all-max artificial tuple) or 1 (all-min) per row. Each node's rows are
    visited in a random order in `blocks` blocks; a row is decided against the two
    groups as they were at its block's start (blocks = rows: the paper's greedy)."""
    n, d = points.shape
    key = rng.random(n)
    order = np.lexsort((key, node))
    size_of = np.bincount(node, minlength=nodes)
    start = np.concatenate([[0], np.cumsum(size_of)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - start[node[order]]
    block = rank * blocks // np.maximum(size_of[node], 1)
    sorted_pts = points[order]
    top = np.maximum.reduceat(sorted_pts, start, axis=0)  # every node has rows, so start is strictly increasing
    bottom = np.minimum.reduceat(sorted_pts, start, axis=0)
    lo = np.stack([top, bottom], axis=1)  # [nodes, 2, d]: the artificial tuples (the node's own extremes)
    hi = lo.copy()
    size = np.ones((nodes, 2))
    side = np.zeros(n, dtype=np.int64)
    by_block = np.argsort(block, kind="stable")
    bounds = np.searchsorted(block[by_block], np.arange(blocks + 1))
    for j in range(blocks):
        rows = by_block[bounds[j] : bounds[j + 1]]
        if len(rows) == 0:
            continue
        x, g = points[rows], node[rows]
        width = (hi[g] - lo[g]).sum(2)  # [r, 2]
        grown = (np.maximum(hi[g], x[:, None, :]) - np.minimum(lo[g], x[:, None, :])).sum(2)
        delta = (size[g] + 1) * grown - size[g] * width
        pick = (delta[:, 1] <= delta[:, 0]).astype(np.int64)  # G1 if delta1 < delta2, else G2
        side[rows] = pick
        cell = g * 2 + pick  # fold the block into the boxes: one sort, one reduceat per bound
        by = np.argsort(cell, kind="stable")
        first = np.flatnonzero(np.concatenate([[True], np.diff(cell[by]) != 0]))
        cg, cp = g[by][first], pick[by][first]
        lo[cg, cp] = np.minimum(lo[cg, cp], np.minimum.reduceat(x[by], first, axis=0))
        hi[cg, cp] = np.maximum(hi[cg, cp], np.maximum.reduceat(x[by], first, axis=0))
        size[cg, cp] += np.diff(np.append(first, len(by)))
    return side


def _eligible_halves(node: np.ndarray, side: np.ndarray, sensitive: np.ndarray, nodes: int, m: int) -> np.ndarray:
    """Per node: both halves non-empty and m-eligible."""
    half = node * 2 + side
    sizes = np.bincount(half, minlength=2 * nodes)
    top = top_counts(half, sensitive, 2 * nodes)
    ok = (sizes >= m) & (top * m <= sizes)
    return ok[0::2] & ok[1::2]


def next_level(node: np.ndarray, split: np.ndarray, side: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One level of a binary split of every node at once: rows of a `split` node go to
    its child `side` (0/1), other nodes stay whole and become final. Returns the rows'
    new dense node ids and which new nodes are final."""
    child = np.where(split[node], node * 2 + side, node * 2)
    ids, new = np.unique(child, return_inverse=True)
    new = new.reshape(-1)
    final = np.zeros(len(ids), dtype=bool)
    final[new[~split[node]]] = True
    return new, final


def partition(codes: pd.DataFrame, sensitive: np.ndarray, m: int, extents: Mapping[str, int], seed: int, tries: int = 5, blocks: int = 32) -> np.ndarray:
    """002 Figure 1: m-eligible sub-tables of QI-close tuples; returns a sub-table id per
    row. Every sub-table of a level is split at once (`_split_level`); a node whose
    halves are not both m-eligible gets up to `tries` shuffles, then stays whole."""
    check_m_eligible(sensitive, m)
    scale = np.array([1.0 / extents[a] if extents[a] > 0 else 0.0 for a in codes.columns])
    points = codes.to_numpy(dtype=np.float64) * scale
    rng = np.random.default_rng(seed)
    node = np.zeros(len(sensitive), dtype=np.int64)
    final = np.zeros(1, dtype=bool)
    while not final.all():
        nodes = len(final)
        active = ~final & (np.bincount(node, minlength=nodes) >= 2 * m)
        side = np.zeros(len(node), dtype=np.int64)
        split = np.zeros(nodes, dtype=bool)
        for _ in range(tries):
            pending = active & ~split
            rows = np.flatnonzero(pending[node])
            if len(rows) == 0:
                break
            sub, local = np.unique(node[rows], return_inverse=True)
            trial = _split_level(points[rows], local.reshape(-1), len(sub), rng, blocks)
            good = _eligible_halves(local.reshape(-1), trial, sensitive[rows], len(sub), m)
            accept = good[local.reshape(-1)]
            side[rows[accept]] = trial[accept]
            split[sub[good]] = True
        node, final = next_level(node, split, side)
    return node
