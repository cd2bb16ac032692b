"""m-invariant bucketization (002 §3; 004 §3.2), vectorized, on one encoded m-eligible
sub-table: the partitioning step (`partition`), the assigning step (`assign_buckets`,
random or QI-local dealing), the leftovers (`place_leftovers`) and NCP.

Decisions and why they are safe: docs/explanation/algorithms.md ("m-invariance: the first
release", "NCP"); docs/explanation/marginals.md ("The dealing", "Cuts that tell nothing").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import PrivacyError
from .arrays import dense_ids, distinct, run_starts


def check_m_eligible(
    sensitive: np.ndarray,
    m: int,
    name: str = "the sensitive attribute",
    labels: Sequence[str] | None = None,
    param: str = "m",
) -> None:
    """002 Theorem 2: an m-unique partition exists iff no value covers more than n/m
    (003's l-eligibility is the same condition; `param` names it in the message)."""
    values, counts = np.unique(sensitive, return_counts=True)
    names = [labels[int(v)] for v in values] if labels is not None else [int(v) for v in values]
    check_m_eligible_counts(names, counts, m, name, param)


def check_m_eligible_counts(
    labels: Sequence,
    counts: np.ndarray,
    m: int,
    name: str = "the sensitive attribute",
    param: str = "m",
) -> None:
    """`check_m_eligible` from value counts (labels[i] has counts[i]); the error names the
    most frequent value, its share and the largest m the table allows."""
    counts = np.asarray(counts)
    n = int(counts.sum())
    if n == 0:
        raise PrivacyError(f"an empty table has no {param}-eligible partition")
    top = int(np.argmax(counts))
    if counts[top] * m > n:
        raise PrivacyError(
            f"not {m}-eligible (002 Theorem 2): {name} = {labels[top]!r} covers {int(counts[top])} of {n} rows "
            f"({counts[top] / n:.1%}), more than 1/{m} = {1 / m:.1%}; choose {param} <= {n // int(counts[top])}"
        )


def top_counts(key: np.ndarray, sensitive: np.ndarray, keys: int) -> np.ndarray:
    """Per key in [0, keys): how often its most frequent sensitive value occurs. By
    counting (key, value) cells when there are few of them, else by one sort."""
    key = np.asarray(key, dtype=np.int64)
    sensitive = np.asarray(sensitive)
    if len(sensitive) and sensitive.min() >= 0 and sensitive.max() < 65536:  # codes
        width, index = int(sensitive.max()) + 1, sensitive.astype(np.int64)
    else:
        values = distinct(sensitive)
        width, index = max(len(values), 1), np.searchsorted(values, sensitive)
    cell = key * width + index
    if keys * width <= 4 * len(key) + 65536:
        counts = np.bincount(cell, minlength=keys * width).reshape(keys, width)
        return counts.max(axis=1, initial=0)
    cell = np.sort(cell)
    top = np.zeros(keys, dtype=np.int64)
    if len(cell):
        starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
        per_cell = np.diff(np.r_[starts, len(cell)])
        owner = cell[starts] // width
        first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        top[owner[first]] = np.maximum.reduceat(per_cell, first)
    return top


def group_ncp(codes: pd.DataFrame, group: np.ndarray, extents: Mapping[str, int]) -> pd.Series:
    """NCP(G) = |G| * sum_A (max_A - min_A) / extent_A for each group id in `group`
    (extent = |dom A| - 1; attributes with extent 0 add nothing)."""
    ids, dense = dense_ids(np.asarray(group))
    order = np.argsort(dense, kind="stable")
    starts = run_starts(dense[order])
    width = np.zeros(len(ids))
    for a in (a for a in codes.columns if extents[a] > 0):
        v = codes[a].to_numpy()[order]
        width += (np.maximum.reduceat(v, starts) - np.minimum.reduceat(v, starts)) / float(
            extents[a]
        )
    return pd.Series(width * np.diff(np.append(starts, len(order))), index=ids)


def _runs(
    pool_sub: np.ndarray, pool_count: np.ndarray, m: int, subs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The assigning step's runs of every sub-table at once, from pool sizes alone. Pools
    are sorted by (sub-table, value). Each round, every sub-table with at least m
    non-empty pools takes one tuple from each of its m largest pools (ties to the smaller
    value), k times, k = the m-th largest minus the (m+1)-th (at least 1): the same m
    pools stay the largest that long. Returns (pool, run, k) per pool a run takes from;
    runs are numbered in round order."""
    counts = pool_count.astype(np.int64).copy()
    out_pool, out_run, out_k = [], [], []
    runs = 0
    while True:
        nonempty = np.bincount(pool_sub, weights=counts > 0, minlength=subs)
        cand = np.flatnonzero((counts > 0) & (nonempty[pool_sub] >= m))
        if len(cand) == 0:
            break
        order = cand[np.lexsort((cand, -counts[cand], pool_sub[cand]))]
        sub_o = pool_sub[order]
        first = np.flatnonzero(np.concatenate([[True], sub_o[1:] != sub_o[:-1]]))
        size = np.diff(np.append(first, len(order)))
        start = np.repeat(first, size)
        rank = np.arange(len(order)) - start
        mth = counts[order[first + m - 1]]
        nxt = np.where(size > m, counts[order[np.minimum(first + m, len(order) - 1)]], 0)
        k = np.maximum(mth - nxt, 1)
        take = rank < m
        run = runs + np.repeat(np.arange(len(first)), size)
        out_pool.append(order[take])
        out_run.append(run[take])
        out_k.append(np.repeat(k, size)[take])
        counts[order[take]] -= np.repeat(k, size)[take]
        runs += len(first)
    if not out_pool:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e
    return np.concatenate(out_pool), np.concatenate(out_run), np.concatenate(out_k)


def _subs(sub: np.ndarray | None, n: int) -> np.ndarray:
    return (
        np.zeros(n, dtype=np.int64)
        if sub is None
        else np.unique(sub, return_inverse=True)[1].reshape(-1)
    )


def assign_buckets(
    sensitive: np.ndarray,
    m: int,
    seed: int,
    sub: np.ndarray | None = None,
    order_key: np.ndarray | None = None,
    local: np.ndarray | None = None,
) -> np.ndarray:
    """Each row's bucket (-1: a leftover), for every sub-table (`sub`, default one) at
    once. Buckets are keyed by (sub-table, signature) and numbered in that order; a
    pool's tuples, in a seeded order (or in `order_key` order), are dealt to the runs that
    take from it; with `local` (a QI order, `_deal_along`) each run's tuples are spread
    along it."""
    n = len(sensitive)
    sub = _subs(sub, n)
    subs = int(sub.max()) + 1 if n else 0
    if n == 0:
        check_m_eligible(sensitive, m)
    sizes, top = np.bincount(sub, minlength=subs), top_counts(sub, sensitive, subs)
    if (top * m > sizes).any():
        bad = int(np.argmax(top * m > sizes))
        check_m_eligible(sensitive[sub == bad], m, "a sub-table's sensitive attribute")
    width = int(sensitive.max()) + 1
    pool_key = sub * width + sensitive
    keys, pool_of, pool_count = np.unique(pool_key, return_inverse=True, return_counts=True)
    pool_of = pool_of.reshape(-1)
    pool_sub, pool_val = keys // width, keys % width
    rp_pool, rp_run, rp_k = _runs(pool_sub, pool_count, m, subs)
    run_bucket = _run_buckets(rp_pool, rp_run, pool_sub, pool_val, width)
    by = np.lexsort((rp_run, rp_pool))  # each pool's runs in round order
    rp_pool, rp_run, rp_k = rp_pool[by], rp_run[by], rp_k[by]
    pool_start = np.concatenate([[0], np.cumsum(pool_count)[:-1]])
    csum = np.cumsum(rp_k)
    block = (
        np.flatnonzero(np.concatenate([[True], rp_pool[1:] != rp_pool[:-1]]))
        if len(rp_pool)
        else np.zeros(0, dtype=np.int64)
    )
    base = np.repeat(csum[block] - rp_k[block], np.diff(np.append(block, len(rp_pool))))
    end = pool_start[rp_pool] + csum - base  # sorted position where each (pool, run) share ends
    rng = np.random.default_rng(seed)
    deal = rng.random(n) if order_key is None else order_key
    if local is not None:  # QI-local dealing: each run's share spread along the QI order
        return _deal_along(local, deal, pool_of, pool_count, rp_pool, rp_run, rp_k, run_bucket, rng)
    order = np.lexsort((deal, pool_of))  # each pool, seeded
    j = np.searchsorted(end, np.arange(n), side="right")
    ok = (
        (j < len(end)) & (rp_pool[np.minimum(j, max(len(end) - 1, 0))] == pool_of[order])
        if len(end)
        else np.zeros(n, dtype=bool)
    )
    bucket = np.full(n, -1, dtype=np.int64)
    bucket[order[ok]] = run_bucket[rp_run[j[ok]]]
    return bucket


ALIGN_ROUNDS = 5  # the QI-local dealing's alignment rounds (docs/explanation/marginals.md)


def _deal_along(
    local: np.ndarray,
    deal: np.ndarray,
    pool_of: np.ndarray,
    pool_count: np.ndarray,
    rp_pool: np.ndarray,
    rp_run: np.ndarray,
    rp_k: np.ndarray,
    run_bucket: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """QI-local dealing (docs/explanation/marginals.md): a run taking k tuples of a pool has
    k groups (its j-th tuple of every pool it takes from), first placed at (j + u) / k,
    u drawn per run; a pool's leftover slots are single groups placed uniformly. Each
    pool's tuples, in `local` order (ties in `deal` order), fill its slots in the order of
    their groups' places; then every group moves to the mean rank of its tuples along
    `local`, and the pools are dealt again, up to ALIGN_ROUNDS times (or until nothing
    moves): each group's tuples of all its pools settle in one region of the order."""
    n = len(pool_of)
    k = rp_k.astype(np.int64)
    first = np.cumsum(k) - k
    slot_pool = np.repeat(rp_pool, k)
    j = np.arange(len(slot_pool)) - np.repeat(first, k)
    u = rng.random(int(rp_run.max()) + 1 if len(rp_run) else 0)
    pos = (j + np.repeat(u[rp_run], k)) / np.repeat(k, k)
    run_first = np.zeros(len(u), dtype=np.int64)  # groups numbered per run: (run, j)
    run_first[rp_run] = k  # every pool of a run takes the same k
    run_first = np.cumsum(run_first) - run_first
    slot_group = run_first[np.repeat(rp_run, k)] + j
    slot_bucket = np.repeat(run_bucket[rp_run], k)
    spare = pool_count - np.bincount(slot_pool, minlength=len(pool_count))
    extra = int(spare.sum())
    slot_pool = np.concatenate([slot_pool, np.repeat(np.arange(len(pool_count)), spare)])
    pos = np.concatenate([pos, rng.random(extra)])
    groups = int(slot_group.max(initial=-1)) + 1
    slot_group = np.concatenate([slot_group, groups + np.arange(extra)])
    slot_bucket = np.concatenate([slot_bucket, np.full(extra, -1, dtype=np.int64)])
    rows = np.lexsort((deal, local, pool_of))  # each pool's tuples along the order
    rank = np.empty(n)
    rank[np.lexsort((deal, local))] = np.arange(n)
    row_of = _aligned(rows, rank, slot_pool, slot_group, pos, groups + extra)
    bucket = np.full(n, -1, dtype=np.int64)
    bucket[row_of] = slot_bucket
    return bucket


def _aligned(
    rows: np.ndarray,
    rank: np.ndarray,
    slot_pool: np.ndarray,
    slot_group: np.ndarray,
    pos: np.ndarray,
    groups: int,
) -> np.ndarray:
    """The row each slot gets (`_deal_along`): a pool's rows (`rows`, grouped by pool in
    order) fill the pool's slots in `pos` order; each group then moves to the mean `rank`
    of its rows, and again, until the dealing repeats or after ALIGN_ROUNDS rounds (1-D
    alternating minimization: each round is the best monotone dealing for the places,
    each move the best place for the dealing)."""
    size = np.bincount(slot_group, minlength=groups)
    row_of: np.ndarray | None = None
    for _ in range(ALIGN_ROUNDS + 1):
        dealt = np.empty(len(rows), dtype=np.int64)
        dealt[np.lexsort((pos, slot_pool))] = rows
        if row_of is not None and (dealt == row_of).all():
            break
        row_of = dealt
        pos = (np.bincount(slot_group, weights=rank[row_of], minlength=groups) / size)[slot_group]
    assert row_of is not None  # the loop runs at least once
    return row_of


def _run_buckets(
    rp_pool: np.ndarray,
    rp_run: np.ndarray,
    pool_sub: np.ndarray,
    pool_val: np.ndarray,
    width: int,
) -> np.ndarray:
    """Each run's bucket: runs with the same (sub-table, signature) share one, numbered
    in that order; the signature is kept as a bit set of the run's values."""
    runs = int(rp_run.max()) + 1 if len(rp_run) else 0
    if not runs:
        return np.zeros(0, dtype=np.int64)
    words = (width + 63) // 64
    bits = np.zeros((runs, words), dtype=np.uint64)
    v = pool_val[rp_pool]
    np.bitwise_or.at(
        bits, (rp_run, v // 64), np.left_shift(np.uint64(1), (v % 64).astype(np.uint64))
    )
    run_sub = np.zeros(runs, dtype=np.int64)
    run_sub[rp_run] = pool_sub[rp_pool]
    key = np.concatenate([run_sub[:, None].astype(np.uint64), bits], axis=1)
    return np.unique(key, axis=0, return_inverse=True)[1].reshape(-1)


def signatures(bucket: np.ndarray, sensitive: np.ndarray) -> dict[int, tuple[int, ...]]:
    """Each bucket's (or group's) signature: its sorted distinct sensitive values
    (codes >= 0; buckets may be negative)."""
    width = int(np.max(sensitive, initial=0)) + 1
    pairs = distinct(np.asarray(bucket, np.int64) * width + sensitive)  # (bucket, value) sorted
    out: dict[int, list[int]] = {}
    for b, v in zip((pairs // width).tolist(), (pairs % width).tolist(), strict=True):
        out.setdefault(b, []).append(v)
    return {b: tuple(v) for b, v in out.items()}


def place_leftovers(
    sensitive: np.ndarray, bucket: np.ndarray, seed: int, sub: np.ndarray | None = None
) -> np.ndarray:
    """Give every leftover (bucket -1) a bucket of its own: one tuple of each value of a
    bucket of its sub-table lacking its value, that bucket and its tuples drawn by the
    secret seed, never by QI distance (docs/explanation/algorithms.md). Leftovers are
    handled in waves, in each sub-table the pending one of the smallest value first (a
    sub-table's leftovers have distinct values, fixed by its pool sizes). Returns dense
    bucket ids."""
    n = len(bucket)
    sub = _subs(sub, n)
    bucket = bucket.copy()
    width = int(sensitive.max()) + 1 if n else 1
    rng = np.random.default_rng(seed)
    while (bucket < 0).any():
        left = np.flatnonzero(bucket < 0)
        left = left[np.lexsort((sensitive[left], sub[left]))]
        rows = left[run_starts(sub[left])]  # per sub-table, its smallest pending value
        members = np.flatnonzero((bucket >= 0) & np.isin(sub, sub[rows]))
        ids = distinct(bucket[members])
        b_sub = np.zeros(len(ids), dtype=np.int64)
        b_sub[np.searchsorted(ids, bucket[members])] = sub[members]
        has = distinct(bucket[members] * width + sensitive[members])
        pair = pd.DataFrame({"i": np.arange(len(rows)), "sub": sub[rows]}).merge(
            pd.DataFrame({"b": np.arange(len(ids)), "sub": b_sub}), on="sub"
        )
        i, b = pair["i"].to_numpy(), pair["b"].to_numpy()
        keep = ~np.isin(ids[b] * width + sensitive[rows[i]], has)
        i, b = i[keep], b[keep]
        if len(distinct(i)) < len(rows):
            lost = rows[np.setdiff1d(np.arange(len(rows)), i)[0]]
            raise PrivacyError(
                f"a leftover tuple with sensitive code {int(sensitive[lost])} found no bucket of its sub-table without that value"
            )
        starts = run_starts(i)  # pairs are in leftover order
        pick = starts + rng.integers(0, np.diff(np.append(starts, len(i))))
        chosen = np.full(len(ids), -1, dtype=np.int64)
        chosen[b[pick]] = i[pick]  # bucket -> the leftover it serves, drawn uniformly
        mine = members[chosen[np.searchsorted(ids, bucket[members])] >= 0]
        owner = chosen[np.searchsorted(ids, bucket[mine])]
        by = np.lexsort((mine, sensitive[mine], owner))
        firstv = run_starts(owner[by] * width + sensitive[mine[by]])
        taken = by[firstv + rng.integers(0, np.diff(np.append(firstv, len(by))))]
        new = bucket.max() + 1 + np.arange(len(rows))
        bucket[mine[taken]] = new[owner[taken]]  # per value, a uniform tuple
        bucket[rows] = new
    return np.unique(bucket, return_inverse=True)[1].reshape(-1)


def bucketize(
    qi: pd.DataFrame,
    sensitive: np.ndarray,
    m: int,
    extents: Mapping[str, int],
    seed: int,
    tries: int = 5,
    blocks: int = 32,
    sub: np.ndarray | None = None,
    local: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """002's partitioning and assigning steps: (sub-table, bucket) per row; `sub`: the
    m-eligible sub-tables made another way (then `tries`, `blocks` are unused); `local`:
    deal along this QI order (`assign_buckets`). The rows' order matters for ties:
    callers put them in a canonical order first."""
    if sub is None:
        sub = partition(qi, sensitive, m, extents, seed, tries, blocks)
    bucket = assign_buckets(sensitive, m, seed + 1, sub, local=local)
    return sub, place_leftovers(sensitive, bucket, seed + 2, sub)


def _split_level(
    points: np.ndarray, node: np.ndarray, nodes: int, rng: np.random.Generator, blocks: int
) -> np.ndarray:
    """One try of 002 Figure 1 lines 4-7 for every node at once: side 0 (the group seeded
    by the node's all-max artificial tuple) or 1 (all-min) per row. Each node's rows are
    visited in a random order in `blocks` blocks; a row is decided against the two
    groups as they were at its block's start (blocks = rows: the paper's greedy)."""
    n, d = points.shape
    key = rng.random(int(n))
    order = np.lexsort((key, node))
    size_of = np.bincount(node, minlength=nodes)
    start = np.concatenate([[0], np.cumsum(size_of)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - start[node[order]]
    block = rank * blocks // np.maximum(size_of[node], 1)
    sorted_pts = points[order]
    top = np.maximum.reduceat(
        sorted_pts, start, axis=0
    )  # every node has rows, so start is strictly increasing
    bottom = np.minimum.reduceat(sorted_pts, start, axis=0)
    lo = np.stack(
        [top, bottom], axis=1
    )  # [nodes, 2, d]: the artificial tuples (the node's own extremes)
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


def _blind_halves(
    node: np.ndarray, side: np.ndarray, sensitive: np.ndarray, nodes: int, m: int
) -> np.ndarray:
    """Per node: both halves hold at least m c rows, c being the node's top count of one
    sensitive value, so both are m-eligible however its values lie (the decision of
    `partition`)."""
    sizes = np.bincount(node * 2 + side, minlength=2 * nodes)
    need = m * top_counts(node, sensitive, nodes)
    return (sizes[0::2] >= need) & (sizes[1::2] >= need)


def next_level(
    node: np.ndarray, split: np.ndarray, side: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One level of a binary split of every node at once: rows of a `split` node go to
    its child `side` (0/1), other nodes stay whole and become final. Returns the rows'
    new dense node ids and which new nodes are final."""
    child = np.where(split[node], node * 2 + side, node * 2)
    ids, new = dense_ids(child)
    final = np.zeros(len(ids), dtype=bool)
    final[new[~split[node]]] = True
    return new, final


def partition(
    codes: pd.DataFrame,
    sensitive: np.ndarray,
    m: int,
    extents: Mapping[str, int],
    seed: int,
    tries: int = 5,
    blocks: int = 32,
) -> np.ndarray:
    """002 Figure 1: m-eligible sub-tables of QI-close tuples; returns a sub-table id per
    row. Every sub-table of a level is split at once (`_split_level`, which reads the
    QI only); a node whose halves are not both large enough (`_blind_halves`) gets up to
    `tries` shuffles, then stays whole. Decision, departing from 002 (a split is kept
    when both halves are m-eligible): a split is kept when both halves hold at least m
    times the node's top count, so it never tells where the node's values lie
    (kernels/mondrian.py says why; the same rule)."""
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
            good = _blind_halves(local.reshape(-1), trial, sensitive[rows], len(sub), m)
            accept = good[local.reshape(-1)]
            side[rows[accept]] = trial[accept]
            split[sub[good]] = True
        node, final = next_level(node, split, side)
    return node
