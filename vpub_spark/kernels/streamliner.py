"""The privacy streamliner (003 §2-§3): l-candidates, their minimal self-contained
partition, and the RIA (Table 5), RDA (Table 6) and GDA (Table 7) algorithms, vectorized.

Decisions (RDA re-sorts per group; GDA in segments cut from published multisets, with
random priorities; default weights), why they are safe and what they cost:
docs/explanation/streamliner.md, "Decisions".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import SpecError
from .arrays import distinct
from .minvariance import assign_buckets, check_m_eligible, top_counts

ALGORITHMS = ("rda", "gda", "ria")


@dataclass(frozen=True)
class Streamlined:
    """Per row: its group (the minimal self-contained partition) and its l - 1
    candidates (row indices, 003 Table 9's f_u)."""

    group: np.ndarray
    candidates: np.ndarray


def check_l(sensitive: np.ndarray, l: int, labels: Sequence[str] | None = None) -> None:
    if not isinstance(l, int) or l < 2:
        raise SpecError(f"l must be an integer >= 2, not {l!r}")
    check_m_eligible(sensitive, l, "the sensitive attribute", labels, "l")


def _canonical(codes: pd.DataFrame, sensitive: np.ndarray) -> np.ndarray:
    """The rows' canonical order: by every QI code, then by sensitive value."""
    keys = [codes[a].to_numpy() for a in reversed(list(codes.columns))]
    return np.lexsort([sensitive, *keys])


def _groups_of_buckets(bucket: np.ndarray, sensitive: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Split each bucket (one signature, c tuples per value) into c groups: group i takes
    the i-th tuple of each value in `key` order. Rows with bucket -1 get -1."""
    n = len(bucket)
    ok = bucket >= 0
    width = int(sensitive.max(initial=0)) + 1
    cell = np.where(ok, bucket * width + sensitive, -1)
    order = np.lexsort((key, cell))
    c = cell[order]
    first = np.searchsorted(c, c)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first
    per_bucket = np.zeros(int(bucket.max(initial=-1)) + 1, dtype=np.int64)
    np.maximum.at(per_bucket, bucket[ok], rank[ok] + 1)
    offset = np.concatenate([[0], np.cumsum(per_bucket)[:-1]])
    return np.where(ok, offset[np.maximum(bucket, 0)] + rank, -1)


def _cyclic_candidates(
    group: np.ndarray, sensitive: np.ndarray, l: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each member of a group of l distinct values maps, for u = 1..l-1, to the member
    u places after it (by value): 003 Definition 1's bijections inside the group.
    Returns (candidates per row, the members of every group: one row per group id)."""
    rows = np.flatnonzero(group >= 0)
    order = rows[np.lexsort((sensitive[rows], group[rows]))]
    members = order.reshape(-1, l)  # every group has exactly l members here, ids dense
    cand = np.full((len(group), l - 1), -1, dtype=np.int64)
    for u in range(1, l):
        cand[members, u - 1] = np.roll(members, -u, axis=1)
    return cand, members


def _append(
    group: np.ndarray,
    sensitive: np.ndarray,
    cand: np.ndarray,
    members: np.ndarray,
    left: np.ndarray,
    choose,
) -> None:
    """Leftover rows, one at a time, join a compatible group (no row of their value)
    chosen by `choose(leftover, compatible groups)`; their candidates are l - 1 of the
    group's first members (all of other values)."""
    for row in left:
        has = np.unique(group[(sensitive == sensitive[row]) & (group >= 0)])
        groups = np.setdiff1d(np.arange(len(members)), has)
        if not len(groups):
            raise SpecError("no group can take a leftover tuple (the table is not l-eligible)")
        g = choose(row, groups)
        cand[row] = members[g, : cand.shape[1]]
        group[row] = g


def _priority(n: int, seed: int, priority: np.ndarray | None, canon: np.ndarray) -> np.ndarray:
    """Every random choice of RDA and GDA reads one priority per row: a seeded random
    permutation, or the caller's (a test enumerates them all), in canonical positions."""
    if priority is None:  # drawn for canonical positions: the rows' order cannot matter
        return np.random.default_rng(seed).permutation(n)
    return np.asarray(priority)[canon]


def rda(
    codes: pd.DataFrame,
    sensitive: np.ndarray,
    l: int,
    seed: int,
    priority: np.ndarray | None = None,
) -> Streamlined:
    """003 Table 6 (docs/explanation/streamliner.md). The random choices: each color's tuples
    are taken in priority order, and a leftover joins, among the compatible groups of
    least size, the one holding the least priority."""
    check_l(sensitive, l)
    canon = _canonical(codes, sensitive)
    s = sensitive[canon].astype(np.int64)
    key = _priority(len(s), seed, priority, canon)
    group = _groups_of_buckets(assign_buckets(s, l, seed, order_key=key), s, key)
    cand, members = _cyclic_candidates(group, s, l)
    size = np.bincount(group[group >= 0])
    least = key[members].min(axis=1) if len(members) else np.zeros(0, dtype=np.int64)

    def smallest(row: int, groups: np.ndarray) -> int:
        best = groups[size[groups] == size[groups].min()]
        g = int(best[np.argmin(least[best])])
        size[g] += 1
        return g

    _append(group, s, cand, members, np.flatnonzero(group < 0), smallest)
    return _restore(canon, group, cand)


def _restore(canon: np.ndarray, group: np.ndarray, cand: np.ndarray) -> Streamlined:
    """Back from canonical positions to the caller's rows."""
    out_group = np.empty_like(group)
    out_group[canon] = group
    out_cand = np.empty_like(cand)
    out_cand[canon] = np.where(cand >= 0, canon[np.maximum(cand, 0)], -1)
    return Streamlined(out_group, out_cand)


def weighted_rank(
    codes: pd.DataFrame, sizes: Mapping[str, int], weights: Mapping[str, int] | None = None
) -> np.ndarray:
    """003 §3.3: wr = sum_A weight_A * rank_A (rank = code + 1). Default weights: the
    attributes in increasing domain size, each weighing the product of the later sizes."""
    attrs = list(codes.columns)
    if weights is None:
        order = sorted(attrs, key=lambda a: (sizes[a], a))
        weights, w = {}, 1
        for a in reversed(order):
            weights[a] = w
            w *= sizes[a]
    unknown = set(weights) - set(attrs)
    if unknown:
        raise SpecError(f"weights name unknown QI attributes {', '.join(sorted(unknown))}")
    wr = np.zeros(len(codes), dtype=np.int64)
    for a in attrs:
        wr += int(weights.get(a, 0)) * (codes[a].to_numpy(np.int64) + 1)
    return wr


def _segments(s: np.ndarray, l: int, segment: int) -> np.ndarray:
    """Each row's segment (docs/explanation/streamliner.md): top-down, a segment of B blocks of
    l rows whose most frequent value occurs c times is cut into k = min(B // c,
    B // ceil(segment / l)) runs of whole blocks (the last takes the remainder) while
    k >= 2, every segment of a round at once. Runs of whole blocks leave leftovers in
    the last run only. The cuts read each segment's multiset only, never where its
    values sit."""
    n = len(s)
    seg = np.zeros(n, dtype=np.int64)
    per = -(-max(segment, 1) // l)  # the blocks a run needs at least
    while True:
        rows = np.bincount(seg)
        blocks = rows // l
        k = np.maximum(np.minimum(blocks // top_counts(seg, s, len(rows)), blocks // per), 1)
        if (k == 1).all():
            return seg
        at = np.arange(n) - (np.cumsum(rows) - rows)[seg]  # the row's place in its segment
        block = np.minimum(at // l, np.maximum(blocks[seg] - 1, 0))
        seg = (np.cumsum(k) - k)[seg] + block * k[seg] // np.maximum(blocks[seg], 1)


def gda(
    codes: pd.DataFrame,
    sensitive: np.ndarray,
    l: int,
    seed: int,
    sizes: Mapping[str, int],
    weights: Mapping[str, int] | None = None,
    segment: int | None = None,
    priority: np.ndarray | None = None,
) -> Streamlined:
    """003 Table 7 (docs/explanation/streamliner.md); runs of `segment` * 2^k rows (default
    segment: 8 l)."""
    check_l(sensitive, l)
    wr = weighted_rank(codes, sizes, weights)
    canon = _canonical(codes, sensitive)
    canon = canon[np.argsort(wr[canon], kind="stable")]  # by weighted rank, ties canonical
    s = sensitive[canon].astype(np.int64)
    seg = _segments(s, l, segment or 8 * l)
    key = _priority(len(s), seed, priority, canon)
    group = _groups_of_buckets(assign_buckets(s, l, seed, seg, key), s, key)
    cand, members = _cyclic_candidates(group, s, l)
    left = np.flatnonzero(group < 0)
    least = key[members].min(axis=1)
    placed = _first_in_segment(left, s, seg, group, members, least)
    group[left[placed >= 0]] = placed[placed >= 0]
    cand[left[placed >= 0]] = members[placed[placed >= 0], : l - 1]

    def first(row: int, groups: np.ndarray) -> int:
        return int(groups[np.argmin(least[groups])])

    _append(group, s, cand, members, left[placed < 0], first)
    return _restore(canon, group, cand)


def _first_in_segment(left, s, seg, group, members, least) -> np.ndarray:
    """For each leftover row: the compatible group of its segment holding the least
    priority (-1 if its segment has none). Leftovers of one segment have distinct
    values, so several may join one group and it stays l-diverse."""
    width = int(s.max(initial=0)) + 1
    g_seg = seg[members[:, 0]]
    order = np.argsort(g_seg, kind="stable")
    lo = np.searchsorted(g_seg[order], seg[left])
    hi = np.searchsorted(g_seg[order], seg[left], side="right")
    count = hi - lo
    who = np.repeat(np.arange(len(left)), count)
    pos = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count) + np.repeat(lo, count)
    g = order[pos]
    cells = distinct(group[group >= 0] * width + s[group >= 0])
    ok = ~np.isin(g * width + s[left[who]], cells)
    score = np.where(ok, least[g], np.inf)
    best = np.full(len(left), -1, dtype=np.int64)
    if len(who):
        pick = pd.DataFrame({"who": who, "d": score, "g": g}).sort_values(
            ["who", "d", "g"], kind="stable"
        )
        first = pick.drop_duplicates("who")
        first = first[np.isfinite(first["d"].to_numpy())]
        best[first["who"].to_numpy()] = first["g"].to_numpy()
    return best


def ria(codes: pd.DataFrame, sensitive: np.ndarray, l: int, seed: int) -> Streamlined:
    """003 Table 5, then Table 9's merge (docs/explanation/streamliner.md)."""
    check_l(sensitive, l)
    canon = _canonical(codes, sensitive)
    s = sensitive[canon].astype(np.int64)
    rng = np.random.default_rng(seed)
    values = np.unique(s)
    members = {v: np.flatnonzero(s == v) for v in values}
    cand = np.full((len(s), l - 1), -1, dtype=np.int64)
    for v in values:  # one round of vectorized picks per color
        cand[members[v]] = _ria_color(v, members, values, l, rng)
    return _restore(canon, minimal_self_contained(cand), cand)


def _ria_color(v, members, values, l, rng) -> np.ndarray:
    """For each tuple of color v: l - 1 tuples of distinct other colors, none picked
    twice by color v (Table 5 lines 4-5). Each other color offers min(|C|, n_v) of its
    tuples at random; (l - 1) n_v of those offers are kept at random and dealt, sorted
    by color, round-robin to v's tuples in a random order, so no tuple gets a color
    twice (l-eligibility guarantees enough offers: sum_C min(|C|, n_v) >= (l-1) n_v)."""
    own = members[v]
    n_v = len(own)
    offers = [rng.permutation(members[c])[:n_v] for c in values if c != v]
    pool = np.concatenate(offers)
    keep = np.sort(rng.choice(len(pool), size=(l - 1) * n_v, replace=False))
    picks = np.empty((n_v, l - 1), dtype=np.int64)
    slot = np.arange(len(keep))
    picks[slot % n_v, slot // n_v] = pool[keep]
    return picks[rng.permutation(n_v)]


def streamline(
    algorithm: str,
    codes: pd.DataFrame,
    sensitive: np.ndarray,
    l: int,
    seed: int,
    sizes: Mapping[str, int],
    weights: Mapping[str, int] | None = None,
    segment: int | None = None,
) -> Streamlined:
    """One of ALGORITHMS by name (`sizes`, `weights` and `segment` matter to GDA only)."""
    run = _BY_NAME.get(algorithm)
    if run is None:
        raise SpecError(f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    return run(codes, sensitive, l, seed, sizes, weights, segment)


_BY_NAME = {
    "rda": lambda codes, sensitive, l, seed, sizes, weights, segment: rda(
        codes, sensitive, l, seed
    ),
    "gda": gda,
    "ria": lambda codes, sensitive, l, seed, sizes, weights, segment: ria(
        codes, sensitive, l, seed
    ),
}
assert tuple(_BY_NAME) == ALGORITHMS


def minimal_self_contained(candidates: np.ndarray) -> np.ndarray:
    """003 Table 9: the transient groups {i} + candidates[i] merged while they share a
    tuple (connected components), as dense group ids."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(candidates)
    rows = np.repeat(np.arange(n), candidates.shape[1])
    cols = candidates.reshape(-1)
    ok = cols >= 0
    graph = coo_matrix((np.ones(int(ok.sum())), (rows[ok], cols[ok])), shape=(n, n))
    return connected_components(graph, directed=False)[1].astype(np.int64)
