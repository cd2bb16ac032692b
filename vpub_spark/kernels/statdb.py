"""The anatomy-based statistical database of 004 (§4-§6) on one encoded bucketization:
A-Count (Figure 3), G-Count (Figure 6) and the static and perturbed baselines,
vectorized over all buckets at once.

Definitions, intervals and decisions: docs/explanation/statdb.md;
docs/explanation/algorithms.md, "Random perturbation".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .arrays import dense_ids, distinct


@dataclass(frozen=True)
class Query:
    """COUNT(*) WHERE lo_i <= A_i <= hi_i (for the attributes in `ranges`, inclusive
    codes) AND A^s in `sensitive` (codes)."""

    ranges: Mapping[str, tuple[int, int]]
    sensitive: frozenset[int]


def qi_mask(
    codes: Mapping[str, np.ndarray], ranges: Mapping[str, tuple[int, int]], n: int | None = None
) -> np.ndarray:
    """Tuples meeting every QI predicate (`codes`: columns by attribute, a frame or a
    mapping of arrays; `n` rows, needed only when `ranges` is empty)."""
    ok = np.ones(len(codes[next(iter(codes))]) if n is None else n, dtype=bool)
    for a, (lo, hi) in ranges.items():
        col = np.asarray(codes[a])
        ok &= (col >= lo) & (col <= hi)
    return ok


def _in(values: np.ndarray, chosen: Iterable[int]) -> np.ndarray:
    return np.isin(values, np.fromiter(chosen, dtype=np.int64))


@dataclass(frozen=True)
class SensitiveCounts:
    """A partition's sensitive table (ST, 004 §3.1): per (group, value) its tuples;
    groups are dense ids."""

    group: np.ndarray
    value: np.ndarray
    count: np.ndarray
    groups: int

    @classmethod
    def of(cls, group: np.ndarray, sensitive: np.ndarray) -> SensitiveCounts:
        width = int(sensitive.max(initial=0)) + 1
        key, count = np.unique(group.astype(np.int64) * width + sensitive, return_counts=True)
        return cls(key // width, key % width, count, int(group.max(initial=-1)) + 1)

    def selected(self, chosen: Iterable[int]) -> np.ndarray:
        """s(G) per group: its tuples with a value in `chosen`."""
        weights = self.count * _in(self.value, chosen)
        return np.bincount(self.group, weights=weights, minlength=self.groups)


@dataclass(frozen=True)
class StaticAnatomy:
    """sta-ana (004 §9): one anatomized partition, QIT (`group` per tuple, the QI codes
    kept by the caller) and ST, answering every query by Lemma 3."""

    group: np.ndarray
    st: SensitiveCounts

    def interval(self, qi_ok: np.ndarray, chosen: Iterable[int]) -> tuple[int, int]:
        """Lemma 3: [sum_G max(0, q(G) + s(G) - |G|), sum_G min(q(G), s(G))]."""
        size = np.bincount(self.st.group, weights=self.st.count, minlength=self.st.groups)
        q = np.bincount(self.group[qi_ok], minlength=self.st.groups)
        s = self.st.selected(chosen)
        return int(np.maximum(0, q + s - size).sum()), int(np.minimum(q, s).sum())


def anatomy_interval(
    group: np.ndarray, sensitive: np.ndarray, qi_ok: np.ndarray, chosen: Iterable[int]
) -> tuple[int, int]:
    """004 Lemma 3: the result interval of a query on the anatomy of a partition
    (`group` per tuple), given which tuples meet the QI predicates."""
    _, g = np.unique(group, return_inverse=True)
    g = g.reshape(-1)
    return StaticAnatomy(g, SensitiveCounts.of(g, sensitive)).interval(qi_ok, chosen)


def signature_buckets(bucket: np.ndarray, sensitive: np.ndarray) -> np.ndarray:
    """004 Definition 11: U hashes every tuple to a bucket by its signature in the first
    partition, so buckets of one signature are one bucket (a store made chunk by chunk
    holds several). Returns dense bucket ids, one per tuple. Every decomposition of the
    merged buckets keeps each tuple's signature, so it stays m-invariant with every
    release made from the unmerged ones (004 Lemma 4, Definition 7)."""
    b = dense_ids(bucket)[1]
    width = int(sensitive.max(initial=0)) + 1
    cells = distinct(b.astype(np.int64) * width + sensitive)
    owner, value = cells // width, cells % width
    bits = np.zeros((int(b.max(initial=-1)) + 1, (width + 63) // 64), dtype=np.uint64)
    np.bitwise_or.at(
        bits, (owner, value // 64), np.left_shift(np.uint64(1), (value % 64).astype(np.uint64))
    )
    order = np.lexsort(bits.T[::-1])  # the bit sets in order, the first word primary
    ranked = bits[order]
    new = np.ones(len(bits), dtype=bool)
    new[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    signature = np.empty(len(bits), dtype=np.int64)
    signature[order] = np.cumsum(new) - 1
    return signature[b]


@dataclass(frozen=True)
class Cells:
    """A bucketization's (bucket, sensitive value) cells, computed once per store: each
    tuple's cell; each cell's bucket (dense index; cells are ordered by bucket) and
    value; each bucket's first cell, |K| and |B| / |K| (Lemma 5); and the inverted index
    of 004 §6.2 (`by_value[value_start[v]:value_start[v + 1]]`: the cells of value v).
    When the tuples come cell by cell (as a store lays them out), `runs` holds each
    cell's first tuple, and counting per cell is one segmented sum instead of a scatter
    (6M rows: 1.7 ms against 12 ms)."""

    cell: np.ndarray
    cell_bucket: np.ndarray
    cell_value: np.ndarray
    start: np.ndarray
    k: np.ndarray
    groups: np.ndarray
    by_value: np.ndarray
    value_start: np.ndarray
    runs: np.ndarray | None = None

    @classmethod
    def of(cls, bucket: np.ndarray, sensitive: np.ndarray) -> Cells:
        _, b = np.unique(bucket, return_inverse=True)
        width = int(sensitive.max(initial=0)) + 1
        cells, cell = np.unique(b.astype(np.int64) * width + sensitive, return_inverse=True)
        cell_bucket, cell_value = cells // width, cells % width
        k = np.bincount(cell_bucket)
        start = np.concatenate([[0], np.cumsum(k)[:-1]])
        by_value = np.argsort(cell_value, kind="stable")
        value_start = np.searchsorted(cell_value[by_value], np.arange(width + 1))
        cell = cell.reshape(-1).astype(np.int32 if len(cells) < 1 << 31 else np.int64)
        ordered = bool((cell[1:] >= cell[:-1]).all())
        runs = np.flatnonzero(np.diff(cell, prepend=-1)) if ordered else None
        groups = np.bincount(b.reshape(-1)) // k
        return cls(cell, cell_bucket, cell_value, start, k, groups, by_value, value_start, runs)

    def per_cell(self, mask: np.ndarray) -> np.ndarray:
        """The tuples of each cell meeting `mask`."""
        if self.runs is not None and len(mask):
            return np.add.reduceat(mask, self.runs, dtype=np.int32)
        return np.bincount(self.cell[mask], minlength=len(self.cell_bucket))

    def alpha(self, chosen: Iterable[int]) -> np.ndarray:
        """Per bucket: the values of its signature meeting the sensitive predicate (from
        the inverted index: only the chosen values' cells are touched)."""
        width = len(self.value_start) - 1
        parts = [
            self.by_value[self.value_start[v] : self.value_start[v + 1]]
            for v in chosen
            if 0 <= v < width
        ]
        hit = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return np.bincount(self.cell_bucket[hit], minlength=len(self.k))


def a_count(
    bucket: np.ndarray, sensitive: np.ndarray, qi_ok: np.ndarray, chosen: Iterable[int]
) -> tuple[int, int]:
    """004 Figure 3 over every bucket at once: the shortest result interval any
    decomposition of the bucketization gives (the sum of the buckets' a-intervals)."""
    return a_count_cells(Cells.of(bucket, sensitive), qi_ok, chosen)


def a_count_cells(cells: Cells, qi_ok: np.ndarray, chosen: Iterable[int]) -> tuple[int, int]:
    """`a_count` on precomputed cells (what a store answers queries with). Buckets with
    alpha = 0 add nothing; alpha = |K| adds all its beta to both ends; alpha = 1 its
    least and largest beta (one pass each); only the others sort their cells."""
    beta = cells.per_cell(qi_ok)
    alpha, k, start = cells.alpha(chosen), cells.k, cells.start
    total = np.add.reduceat(beta, start)
    full, one = alpha == k, (alpha == 1) & (k > 1)
    both = int(total[full].sum())
    lower = both + int(np.minimum.reduceat(beta, start)[one].sum())
    upper = both + int(np.maximum.reduceat(beta, start)[one].sum())
    rest = (alpha > 1) & (alpha < k)
    if rest.any():
        sub = np.flatnonzero(rest[cells.cell_bucket])  # the cells of those buckets, by bucket
        owner = cells.cell_bucket[sub]
        order = np.lexsort((beta[sub], owner))
        owner, sorted_beta = owner[order], beta[sub][order]
        first = np.searchsorted(owner, owner)
        rank = np.arange(len(owner)) - first
        lower += int(sorted_beta[rank < alpha[owner]].sum())
        upper += int(sorted_beta[rank >= k[owner] - alpha[owner]].sum())
    return lower, upper


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
    values_per_bucket = np.bincount(distinct(key) // width, minlength=b.max(initial=-1) + 1)  # |K|
    groups = np.bincount(b) // np.maximum(values_per_bucket, 1)  # |B| / |K| (Lemma 5)
    offset = np.concatenate([[0], np.cumsum(groups)[:-1]])
    return offset[b] + rank


@dataclass(frozen=True)
class StaticGeneralization:
    """sta-gen (004 §9): one generalized partition, each group's MBR (`low`, `high` per
    attribute) and its sensitive counts, answering every query by Lemma 2."""

    low: Mapping[str, np.ndarray]
    high: Mapping[str, np.ndarray]
    st: SensitiveCounts

    @classmethod
    def of(
        cls,
        group: np.ndarray,
        codes: Mapping[str, np.ndarray],
        attributes: Iterable[str],
        sensitive: np.ndarray,
    ) -> StaticGeneralization:
        _, g = np.unique(group, return_inverse=True)
        g = g.reshape(-1)
        frame = pd.DataFrame({a: np.asarray(codes[a]) for a in attributes}, index=g).groupby(
            level=0
        )
        low, high = frame.min(), frame.max()
        return cls(
            {a: low[a].to_numpy() for a in low},
            {a: high[a].to_numpy() for a in high},
            SensitiveCounts.of(g, sensitive),
        )

    def interval(self, query: Query) -> tuple[int, int]:
        """Lemma 2: groups whose box lies inside the query rectangle count for both
        ends, groups whose box meets it only for the upper end."""
        inside = np.ones(self.st.groups, dtype=bool)
        meets = np.ones(self.st.groups, dtype=bool)
        for a, (lo, hi) in query.ranges.items():
            low, high = self.low[a], self.high[a]
            inside &= (low >= lo) & (high <= hi)
            meets &= (high >= lo) & (low <= hi)
        s = self.st.selected(query.sensitive)
        return int(s[inside].sum()), int(s[meets].sum())


def generalized_interval(
    group: np.ndarray, codes: pd.DataFrame, query: Query, sensitive: np.ndarray
) -> tuple[int, int]:
    """004 Lemma 2 for the MBR-generalization of a partition (`group` per tuple)."""
    return StaticGeneralization.of(group, codes, query.ranges, sensitive).interval(query)


def _patterns(
    codes: Mapping[str, np.ndarray], ranges: Mapping[str, tuple[int, int]], n: int
) -> np.ndarray:
    """Per tuple, its place against the query rectangle: the base-3 number whose i-th
    digit is 0 (inside), 1 (below) or 2 (above) on the i-th constrained attribute."""
    kind = np.dtype(np.uint16 if 3 ** len(ranges) <= 1 << 16 else np.int64)
    pattern: np.ndarray = np.zeros(n, dtype=kind)
    for i, (a, (lo, hi)) in enumerate(ranges.items()):
        col = np.asarray(codes[a])
        state: np.ndarray = (col < lo).view(np.uint8) + 2 * (col > hi).view(np.uint8)
        pattern += state.astype(kind) * np.array(3**i, dtype=kind)
    return pattern


def _pattern_counts(cells: Cells, pattern: np.ndarray, lam: int) -> tuple[np.ndarray, np.ndarray]:
    """(the patterns present, their tuples per cell: one row per pattern). Few
    patterns on tuples laid out cell by cell: one segmented sum per pattern."""
    if cells.runs is not None and 3**lam <= 9:
        rows = np.stack([cells.per_cell(pattern == p) for p in range(3**lam)])
        present = np.flatnonzero(rows.any(axis=1))
        return present, rows[present]
    if 3**lam <= 1 << 16:  # a table of every pattern: no sort
        seen = np.bincount(pattern, minlength=3**lam) > 0
        present, p = np.flatnonzero(seen), (np.cumsum(seen) - 1)[pattern]
    else:
        present, p = np.unique(pattern, return_inverse=True)
    width = len(cells.cell_bucket)
    flat = np.bincount(p.reshape(-1) * width + cells.cell, minlength=len(present) * width)
    return present, flat.reshape(len(present), width)


def g_count(
    bucket: np.ndarray, sensitive: np.ndarray, codes: Mapping[str, np.ndarray], query: Query
) -> tuple[int, int]:
    """004 Figure 6 over every bucket at once: the interval of a phantom decomposition.
    n_1 = the yield of the tuples inside the query rectangle (type-1 groups; the yield
    of a set, 004 §7.3, is the least count of a signature value in it); then each of
    the 2 lambda margins (lower, upper, per constrained attribute in the query's order)
    yields y more type-3 groups, whose tuples leave the bucket; the bucket contributes
    [n_1 alpha, (|B|/|K| - n_3) alpha]. Decision (004 leaves it open): the y tuples of
    a value taken from a margin are those lying in the fewest later margins (then the
    lowest pattern of `_patterns`), so later margins keep what they can use. Tuples of
    one cell and one pattern are interchangeable, so the greedy runs on their counts
    (one vector step per pattern and margin), never on single tuples."""
    return g_count_cells(Cells.of(bucket, sensitive), codes, query)


def g_count_cells(
    cells: Cells, codes: Mapping[str, np.ndarray], query: Query, fake: np.ndarray | None = None
) -> tuple[int, int]:
    """`g_count` on precomputed cells (what a store answers queries with). `fake`: the
    counterfeit tuples (kernels/dynamic.py), which hold no QI values. Decision: a
    counterfeit is placed below the query on its first constrained attribute (a query
    without one gets the whole range of the first QI attribute): never inside, so no
    type-1 group counts it; in a margin, where it only helps type-3 groups, which count
    nothing. Both ends stay sound for the real tuples."""
    ranges = dict(query.ranges)
    if fake is not None and not ranges:
        first = next(iter(codes))
        ranges = {first: (0, int(np.asarray(codes[first]).max(initial=0)))}
    lam = len(ranges)
    pattern = _patterns(codes, ranges, len(cells.cell))
    if fake is not None:
        pattern[fake] = 1
    present, left = _pattern_counts(cells, pattern, lam)
    digits = present[:, None] // 3 ** np.arange(lam) % 3
    margins = np.stack([digits == 1, digits == 2], axis=2).reshape(len(present), 2 * lam)
    inside = np.flatnonzero(present == 0)
    n1 = np.minimum.reduceat(left[inside[0]], cells.start) if len(inside) else 0
    n3 = np.zeros(len(cells.k), dtype=np.int64)
    for j in range(2 * lam):
        members = np.flatnonzero(margins[:, j])
        if not len(members):
            continue
        y = np.minimum.reduceat(left[members].sum(axis=0), cells.start)
        n3 += y
        wanted = y[cells.cell_bucket]
        later = margins[members, j + 1 :].sum(axis=1)
        for p in members[np.lexsort((members, later))]:
            take = np.minimum(wanted, left[p])
            left[p] -= take
            wanted -= take
    alpha = cells.alpha(query.sensitive)
    return int((n1 * alpha).sum()), int(((cells.groups - n3) * alpha).sum())


def retention(m: int, domain: int) -> float:
    """004 Formula 10: the retention probability p at which random perturbation gives the
    protection of m-invariance: p + (1 - p)/|A^s| = 1/m, so p = (|A^s| - m) / (m (|A^s| - 1))
    (m = 10, |A^s| = 50: 4/49, 004 §9)."""
    return (domain - m) / (m * (domain - 1))


def perturb(sensitive: np.ndarray, p: float, domain: int, seed: int) -> np.ndarray:
    """004 §8: every tuple keeps its sensitive code with probability p, else draws one
    uniformly from the domain (seeded; QI values are untouched)."""
    rng = np.random.default_rng(seed)
    keep = rng.random(len(sensitive)) < p
    return np.where(keep, sensitive, rng.integers(0, domain, len(sensitive)))


Z80 = 1.2815515655446004  # the standard normal's 90% quantile: a two-sided 80% interval


def perturbed_interval(
    qi_ok: np.ndarray, perturbed: np.ndarray, chosen: Iterable[int], p: float, domain: int
) -> tuple[float, float]:
    """Agrawal, Srikant, Thomas (docs/explanation/algorithms.md, Random perturbation):
    with n tuples meeting the QI predicates, y of them with a perturbed value in V and
    b = |V| / |A^s|, the unbiased estimate is x = (y - (1 - p) b n) / p. A tuple counted
    in x shows a value in V with q1 = p + (1 - p) b, any other with q0 = (1 - p) b,
    independently, so
    Var(x) = [x q1 (1 - q1) + (n - x) q0 (1 - q0)] / p^2, estimated with x clipped to
    [0, n]; the 80% interval is x +- 1.2816 sigma (normal approximation), clipped to
    [0, n], the counts possible (004 §9 plots ran-pert's lower ends at zero)."""
    values = frozenset(chosen)
    n = int(qi_ok.sum())
    y = int((qi_ok & _in(perturbed, values)).sum())
    b = len(values) / domain
    x = (y - (1 - p) * b * n) / p
    q1, q0 = p + (1 - p) * b, (1 - p) * b
    c = min(max(x, 0.0), float(n))
    sigma = np.sqrt((c * q1 * (1 - q1) + (n - c) * q0 * (1 - q0)) / p**2)
    return max(x - Z80 * sigma, 0.0), min(x + Z80 * sigma, float(n))
