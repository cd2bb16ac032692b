"""Re-publication after inserts and deletes: m-invariance (Xiao and Tao, SIGMOD 2007,
§4-§5) on a bucketization, vectorized: division, balancing by counterfeits, assignment.

Decisions (buckets balanced one by one, a batch bucketized whole or made one bucket,
counterfeits rather than inserts fill a shortfall) and why they are safe:
docs/explanation/statdb.md, "Versions".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .arrays import dense_ids
from .minvariance import bucketize
from .mondrian import blind_mondrian


@dataclass(frozen=True)
class Republished:
    """U_{k+1}'s new parts: each inserted tuple's bucket, and the counterfeits as
    (bucket, value, count) cells; survivors keep their buckets."""

    bucket: np.ndarray
    counterfeit_bucket: np.ndarray
    counterfeit_value: np.ndarray
    counterfeit_count: np.ndarray

    @property
    def counterfeits(self) -> int:
        return int(self.counterfeit_count.sum())

    def cells(self) -> tuple[tuple[int, int, int], ...]:
        """The counterfeit cells as (bucket, value, count) tuples."""
        c = (self.counterfeit_bucket, self.counterfeit_value, self.counterfeit_count)
        return tuple(zip(*(x.tolist() for x in c), strict=True))


def republish(
    old_bucket: np.ndarray,
    old_value: np.ndarray,
    kept: np.ndarray,
    new_value: np.ndarray,
    new_qi: pd.DataFrame,
    m: int,
    extents: Mapping[str, int],
    seed: int,
    next_bucket: int,
    domain: int,
    counterfeits: bool = True,
    fill: str = "counterfeits",
) -> Republished:
    """U_{k+1} (docs/explanation/statdb.md). `old_*`: every row of U_k (counterfeits
    included), `kept`: the survivors among them; `new_*`: the inserted tuples; new
    buckets are numbered from `next_bucket`; `domain`: the sensitive values' count."""
    rng = np.random.default_rng(seed)
    new_value = np.asarray(new_value, dtype=np.int64)
    bucket = np.full(len(new_value), -1, dtype=np.int64)
    cells = _balance(old_bucket, old_value, kept, new_value, bucket, rng, counterfeits, fill)
    left = np.flatnonzero(bucket < 0)
    if len(left):
        frame = new_qi.iloc[left].reset_index(drop=True)
        more = _assign(new_value[left], frame, m, extents, seed + 1, domain, counterfeits)
        bucket[left] = next_bucket + more[0]
        cells.append((next_bucket + more[1], more[2]))
    b = np.concatenate([c[0] for c in cells]) if cells else np.zeros(0, np.int64)
    v = np.concatenate([c[1] for c in cells]) if cells else np.zeros(0, np.int64)
    width = max(domain, 1)
    key, count = np.unique(b * width + v, return_counts=True)
    return Republished(bucket, key // width, key % width, count)


def _balance(old_bucket, old_value, kept, new_value, bucket, rng, counterfeits, fill) -> list:
    """The balancing phase: the counterfeit cells it adds, as [(buckets, values)] with
    one entry per counterfeit; with `fill == "inserts"` (the paper's) it first places
    inserts of a short value, filling `bucket` for them."""
    old_bucket = np.asarray(old_bucket, dtype=np.int64)
    old_value = np.asarray(old_value, dtype=np.int64)
    kept = np.asarray(kept, dtype=bool)
    if not kept.any():
        return []
    # only a bucket that lost a tuple (a deleted one or a counterfeit) can fall short
    low = int(old_bucket.min())
    mark = np.zeros(int(old_bucket.max()) - low + 1, dtype=bool)  # ids are dense: no sort
    mark[old_bucket[~kept] - low] = True
    touched = mark[old_bucket - low]
    old_bucket, old_value, kept = old_bucket[touched], old_value[touched], kept[touched]
    if not kept.any():
        return []
    rep, sig = dense_ids(old_bucket - old_bucket.min())
    rep = rep + old_bucket.min()
    width = int(max(old_value.max(initial=0), new_value.max(initial=0))) + 1
    sigs = len(rep)
    # every (bucket, value) cell of U_k, and the survivors per cell
    cell = np.unique(sig * width + old_value)
    have = np.bincount(sig[kept] * width + old_value[kept], minlength=sigs * width)[cell]
    c_sig, c_val = cell // width, cell % width
    alpha = np.zeros(sigs, dtype=np.int64)
    np.maximum.at(alpha, c_sig, have)
    need = alpha[c_sig] - have  # 0 for every cell of a bucket without survivors
    filled = np.zeros_like(need)
    if fill == "inserts":
        filled = _fill(c_sig, c_val, need, rep, new_value, bucket, rng, sigs, width)
    fake = need - filled if counterfeits else np.zeros_like(need)
    return [(np.repeat(rep[c_sig], fake), np.repeat(c_val, fake))]


def _fill(c_sig, c_val, need, rep, new_value, bucket, rng, sigs, width) -> np.ndarray:
    """The paper's filling of shortfalls with inserts of the short value: signatures
    in a secret order per value, a value's inserts in a secret order. Sets `bucket`
    for the inserts placed; returns the inserts each cell got."""
    order = np.lexsort((rng.permutation(sigs)[c_sig], c_val))
    inverse = np.argsort(order)
    c_sig, c_val, need = c_sig[order], c_val[order], need[order]
    ins = np.lexsort((rng.permutation(len(new_value)), new_value))
    pool = np.bincount(new_value, minlength=width)
    pool_start = np.concatenate([[0], np.cumsum(pool)[:-1]])
    end = np.cumsum(need)
    first = np.searchsorted(c_val, np.arange(width))
    before = end - need - np.concatenate([[0], end])[first[c_val]]  # need of earlier cells
    filled = np.clip(pool[c_val] - before, 0, need)
    at = np.repeat(pool_start[c_val] + before, filled) + _ranks(filled)
    bucket[ins[at]] = np.repeat(rep[c_sig], filled)
    return filled[inverse]


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for every c of `counts`, concatenated."""
    total = int(counts.sum())
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total) - starts


def _assign(values, qi: pd.DataFrame, m, extents, seed, domain, counterfeits):
    """The assignment phase on the inserts left: (their bucket ids from 0, counterfeit
    cells' buckets, values; one entry per counterfeit). An m-eligible batch is
    bucketized as a first release is (`_as_first_release`); any other is one bucket,
    balanced by counterfeits (`_padding`). Which path runs depends on the batch's
    multiset only."""
    counts = np.bincount(values, minlength=domain)
    if m * int(counts.max(initial=0)) <= len(values):
        none = np.zeros(0, dtype=np.int64)
        return _as_first_release(values, qi, m, extents, seed), none, none
    rng = np.random.default_rng(seed)
    fake_v = _padding(counts, m, rng) if counterfeits else np.zeros(0, dtype=np.int64)
    return np.zeros(len(values), dtype=np.int64), np.zeros(len(fake_v), np.int64), fake_v


def _as_first_release(values, qi: pd.DataFrame, m, extents, seed) -> np.ndarray:
    """Buckets (dense from 0) for an m-eligible batch, as a store's build makes them: in
    an order of content only, QI-local sub-tables cut blind (`mondrian.blind_mondrian`),
    002's dealing and the leftovers placed by the secret randomness."""
    columns = [qi[c].to_numpy() for c in reversed(list(qi.columns))]
    order = np.lexsort([values, *columns])  # sorted by the QI, then the value
    codes, s = qi.iloc[order].reset_index(drop=True), values[order]
    sub = blind_mondrian(codes, extents, s, m)
    bucket = np.empty(len(values), dtype=np.int64)
    bucket[order] = bucketize(codes, s, m, extents, seed, sub=sub)[1]
    return dense_ids(bucket)[1]


def _padding(counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """The counterfeits' values that balance one bucket holding the batch: each value
    present up to the top count, and, while fewer than m values are present, values the
    secret randomness draws among the absent ones, each the top count times."""
    top = int(counts.max())
    present = np.flatnonzero(counts)
    absent = np.flatnonzero(counts == 0)
    lack = max(m - len(present), 0)
    drawn = absent[np.sort(rng.choice(len(absent), lack, replace=False))] if lack else absent[:0]
    short = np.concatenate([top - counts[present], np.full(lack, top)])
    return np.repeat(np.concatenate([present, drawn]), short)


def signature_keys(bucket: np.ndarray, value: np.ndarray, domain: int) -> np.ndarray:
    """Per tuple, a 64-bit key of its signature (its bucket's set of values, as a bit
    set over the `domain` values, hashed 32 bits at a time): equal keys, equal
    signatures, comparable across versions (a tuple's key must not change)."""
    from .hashing import content_hash

    bucket, value = np.asarray(bucket, dtype=np.int64), np.asarray(value, dtype=np.int64)
    ids, b = dense_ids(bucket - bucket.min(initial=0))
    words = (max(domain, 1) + 63) // 64
    bits = np.zeros((len(ids), words), dtype=np.uint64)
    np.bitwise_or.at(
        bits, (b, value // 64), np.left_shift(np.uint64(1), (value % 64).astype(np.uint64))
    )
    halves = bits.view(np.uint32)  # every bit reaches the hash (it reads 32 per column)
    frame = pd.DataFrame({f"h{i}": halves[:, i] for i in range(halves.shape[1])})
    return content_hash(frame, 0)[b]


def invariance_failures(
    prev_row: np.ndarray,
    prev_key: np.ndarray,
    row: np.ndarray,
    key: np.ndarray,
    bucket: np.ndarray,
    value: np.ndarray,
    m: int,
) -> list[str]:
    """What breaks m-invariance between two versions (nothing: []): a survivor (a real
    `row` in both) whose signature key changed, a signature not balanced (every value
    equally often, counterfeits counted) or with fewer than m values. `row` < 0: a
    counterfeit."""
    out = []
    real, was = row >= 0, prev_row >= 0
    top = int(max(row.max(initial=0), prev_row.max(initial=0))) + 1
    before = np.zeros(top, dtype=np.uint64)  # by row id (ids are dense: no sort)
    seen = np.zeros(top, dtype=bool)
    before[prev_row[was]], seen[prev_row[was]] = prev_key[was], True
    both = seen[row[real]]
    moved = before[row[real][both]] != key[real][both]
    if moved.any():
        out.append(f"{int(moved.sum())} surviving tuples changed signature")
    bad = unbalanced(bucket, value, m)
    if bad:
        out.append(f"{bad} buckets not balanced with >= {m} values")
    return out


def unbalanced(bucket: np.ndarray, value: np.ndarray, m: int) -> int:
    """The buckets that do not hold each value of their signature equally often, or
    hold fewer than m values (by counting: one bincount of the (bucket, value) cells)."""
    bucket, value = np.asarray(bucket, dtype=np.int64), np.asarray(value, dtype=np.int64)
    b = dense_ids(bucket - bucket.min(initial=0))[1]
    width = int(value.max(initial=0)) + 1
    count = np.bincount(b * width + value, minlength=(int(b.max(initial=-1)) + 1) * width)
    count = count.reshape(-1, width)
    present = count > 0
    low = np.where(present, count, np.iinfo(np.int64).max).min(axis=1)
    return int(((low != count.max(axis=1)) | (present.sum(axis=1) < m)).sum())
