"""Partitions that are l-eligible for every sensitive attribute at once (DESIGN.md §5).

Every row falls in one of `SHARDS` shards by a seeded hash of its content. Engines
count, per shard, the rows and the values of each sensitive attribute
(`shard_counts`, one small frame per batch); the driver then groups shards into P
partitions, shard s going to partition s mod P, and takes the largest P not above the
target for which every partition holds rows and is l-eligible for every sensitive
attribute (`plan_partitions`). P = 1 is the whole table, eligible whenever the rules
passed the eligibility check, so a plan always exists. One partitioning serves every
anatomized table of the release, hence one shuffle per release.

Decision: the hash is of content only, so identical rows share a shard. The plan is
then a function of the data and the seed alone, the same on both engines and on a
retried task; the price is that heavy duplicates make shards uneven, which the
eligibility check above absorbs by choosing fewer partitions.

The same pass sums a seed-free 64-bit hash of every row (in two 32-bit halves, so no
sum overflows): an order-free fingerprint of the table's content for the manifest.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import PrivacyError
from .hashing import content_hash

SHARDS = 1024
ROWS_PER_PARTITION = 131_072  # `partitions: auto` = ceil(rows / this)
ROWS, FINGERPRINT = -1, -2  # `attr` markers in shard_counts' output
COUNT_COLUMNS = ("attr", "shard", "value", "count")
COUNT_SCHEMA = pa.schema(
    [("attr", pa.int32()), ("shard", pa.int32()), ("value", pa.int32()), ("count", pa.int64())]
)


def _mix(h: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 finalizer of h + seed: decorrelates the shard from the fingerprint hash."""
    with np.errstate(over="ignore"):
        z = h + np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _shards(h: np.ndarray, seed: int) -> np.ndarray:
    return (_mix(h, seed) % np.uint64(SHARDS)).astype(np.int32)


def shard_of(frame: pd.DataFrame, seed: int) -> np.ndarray:
    """Each row's shard in [0, SHARDS), from its content and the release seed."""
    return _shards(content_hash(frame, 0), seed)


@dataclass(frozen=True)
class ContentShards:
    """Random shards: a seeded hash of the row's content (anatomy's partitions)."""

    seed: int

    def of(self, frame: pd.DataFrame, h: np.ndarray | None = None) -> np.ndarray:
        return _shards(content_hash(frame, 0) if h is None else h, self.seed)


@dataclass(frozen=True)
class QiShards:
    """QI-local shards: the row's lexicographic position in the QI domain (attributes in
    the given order, each code scaled by its domain size) cut into SHARDS equal ranges,
    so consecutive shards hold QI-close rows (multi-SA's partitioned mode)."""

    qi: tuple[str, ...]
    sizes: tuple[int, ...]

    def of(self, frame: pd.DataFrame, h: np.ndarray | None = None) -> np.ndarray:
        pos, scale = np.zeros(len(frame)), 1.0
        for a, d in zip(self.qi, self.sizes, strict=True):
            scale /= d
            pos += frame[a].to_numpy() * scale
        return np.minimum((pos * SHARDS).astype(np.int32), SHARDS - 1)


Sharding = ContentShards | QiShards


def shard_counts(frame: pd.DataFrame, sensitive: Sequence[str], sharding: Sharding) -> pd.DataFrame:
    """Partial counts of one batch: rows per shard (attr = ROWS), values of each sensitive
    attribute per shard (attr = its index in `sensitive`), and the fingerprint halves
    (attr = FINGERPRINT, value 0 and 1). Engines sum `count` by (attr, shard, value)."""
    h = content_hash(frame, 0)
    shard = sharding.of(frame, h).astype(np.int64)
    parts = [_tally(ROWS, shard, np.zeros_like(shard), 1)]
    for i, s in enumerate(sensitive):
        codes = frame[s].to_numpy().astype(np.int64)
        parts.append(_tally(i, shard, codes, int(codes.max()) + 1 if len(codes) else 1))
    halves = [
        int((h & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64)),
        int((h >> np.uint64(32)).sum(dtype=np.uint64)),
    ]
    parts.append(pd.DataFrame({"attr": FINGERPRINT, "shard": 0, "value": [0, 1], "count": halves}))
    out = pd.concat(parts, ignore_index=True)
    return out.astype({"attr": "int32", "shard": "int32", "value": "int32", "count": "int64"})[
        list(COUNT_COLUMNS)
    ]


def _tally(attr: int, shard: np.ndarray, value: np.ndarray, width: int) -> pd.DataFrame:
    counts = np.bincount(shard * width + value, minlength=SHARDS * width)
    nz = np.flatnonzero(counts)
    return pd.DataFrame(
        {"attr": attr, "shard": nz // width, "value": nz % width, "count": counts[nz]}
    )


@dataclass(frozen=True)
class ShardCounts:
    rows: np.ndarray  # [SHARDS]
    values: dict[str, np.ndarray]  # sensitive attribute -> [SHARDS, domain]
    hash_sum: int  # sum of the rows' seed-free hashes, mod 2**64

    @property
    def total(self) -> int:
        return int(self.rows.sum())


def combine_counts(
    partials: pd.DataFrame, sensitive: Sequence[str], domains: Mapping[str, int]
) -> ShardCounts:
    """Sum the engines' partial counts (already summed or not) into arrays."""
    p = partials.groupby(["attr", "shard", "value"], sort=False)["count"].sum().reset_index()
    rows = np.zeros(SHARDS, dtype=np.int64)
    r = p[p["attr"] == ROWS]
    rows[r["shard"].to_numpy()] = r["count"].to_numpy()
    values = {}
    for i, s in enumerate(sensitive):
        v = p[p["attr"] == i]
        arr = np.zeros((SHARDS, domains[s]), dtype=np.int64)
        arr[v["shard"].to_numpy(), v["value"].to_numpy()] = v["count"].to_numpy()
        values[s] = arr
    f = p[p["attr"] == FINGERPRINT].set_index("value")["count"]
    lo, hi = int(f.get(0, 0)), int(f.get(1, 0))
    return ShardCounts(rows, values, (lo + (hi << 32)) % (1 << 64))


@dataclass(frozen=True)
class PartitionPlan:
    """Shard -> partition, the rows of each partition, and each partition's first group id
    (anatomy makes rows // l groups per partition; ids run on across partitions)."""

    shard_part: np.ndarray  # [SHARDS] int32
    rows: np.ndarray  # [P]
    first_group: np.ndarray  # [P]

    @property
    def parts(self) -> int:
        return len(self.rows)

    def part_of(self, shards: np.ndarray) -> np.ndarray:
        return self.shard_part[shards]


def auto_partitions(rows: int) -> int:
    return max(1, min(SHARDS, math.ceil(rows / ROWS_PER_PARTITION)))


def plan_partitions(counts: ShardCounts, l: int, target: int | None = None) -> PartitionPlan:
    """The largest P <= target (default `auto_partitions`) for which `assign_shards`
    finds partitions that are all non-empty and l-eligible for every sensitive attribute."""
    target = auto_partitions(counts.total) if target is None else target
    if target < 1:
        raise PrivacyError(f"partitions must be >= 1, not {target}")
    slack = _slack(counts, l)
    for p in range(min(target, int((counts.rows > 0).sum())), 0, -1):
        part = assign_shards(counts.rows, slack, p)
        rows = np.bincount(part, weights=counts.rows, minlength=p).astype(np.int64)
        sums = np.zeros((p, slack.shape[1]))
        np.add.at(sums, part, slack)
        if (rows > 0).all() and (sums >= 0).all():
            first = np.concatenate([[0], np.cumsum(rows // l)[:-1]]).astype(np.int64)
            return PartitionPlan(part.astype(np.int32), rows, first)
    raise PrivacyError(
        f"the table is not {l}-eligible for every sensitive attribute; no partitioning exists"
    )


def plan_chunks(counts: ShardCounts, l: int, chunk_rows: int) -> PartitionPlan:
    """Contiguous runs of shards (QI-local with `QiShards`) of at least `chunk_rows` rows,
    each l-eligible for every sensitive attribute on its own: a run closes once it is
    both; a tail that is not eligible merges backwards. The whole table is one eligible
    run, so a plan always exists. Group ids: a chunk's first row's index (a chunk never
    makes more groups than rows)."""
    if chunk_rows < 1:
        raise PrivacyError(f"chunk_rows must be >= 1, not {chunk_rows}")
    slack = _slack(counts, l)
    rows = np.cumsum(counts.rows)
    acc = np.cumsum(slack, axis=0)
    ends: list[int] = []
    begin_rows, begin_slack = 0, np.zeros(slack.shape[1])
    for s in range(SHARDS):
        if rows[s] - begin_rows >= chunk_rows and (acc[s] - begin_slack >= 0).all():
            ends.append(s)
            begin_rows, begin_slack = rows[s], acc[s]
    if not ends or ends[-1] != SHARDS - 1:
        ends.append(SHARDS - 1)
    while len(ends) > 1:  # the tail (and what it merges into) must be eligible
        before = ends[-2]
        if rows[-1] - rows[before] > 0 and (acc[-1] - acc[before] >= 0).all():
            break
        ends.pop(-2)
    part = np.searchsorted(np.asarray(ends), np.arange(SHARDS)).astype(np.int32)
    sizes = np.bincount(part, weights=counts.rows, minlength=len(ends)).astype(np.int64)
    return PartitionPlan(part, sizes, np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))


def _slack(counts: ShardCounts, l: int) -> np.ndarray:
    """[SHARDS, D]: per shard, rows - l * count of each sensitive value. A partition is
    l-eligible for every sensitive attribute iff its shards' slacks sum to >= 0."""
    cols = [counts.rows[:, None] - l * v for v in counts.values.values()]
    return (
        np.concatenate(cols, axis=1).astype(np.float64)
        if cols
        else counts.rows[:, None].astype(np.float64)
    )


def assign_shards(rows: np.ndarray, slack: np.ndarray, p: int, repairs: int = 500) -> np.ndarray:
    """Shard -> partition, balancing sizes and the tightest sensitive values.

    Decision (the papers partition no data; DESIGN.md §5 asks for l-eligible partitions):
    shards are sorted by their slack ratio in the globally tightest component and dealt
    to partitions in serpentine order (0..P-1, P-1..0, ...), which evens out both sizes
    and that value's share. Then, while some partition has a negative slack, the best
    move or swap of one shard between it and the partition with the most slack in the
    offending component is applied (deterministic; stops when nothing improves). A
    value near the 1/l limit (race at 19.9% with l = 5) thus still gets P partitions,
    where a random split would fail and fall back to one."""
    shards = len(rows)
    ratio_all = slack.sum(0) / max(int(rows.sum()), 1)
    tight = int(np.argmin(ratio_all))
    ratio = slack[:, tight] / np.maximum(rows, 1)
    order = np.lexsort((np.arange(shards), -rows, ratio))
    idx = np.arange(shards)
    dealt = np.where((idx // p) % 2 == 0, idx % p, p - 1 - idx % p)
    part = np.empty(shards, dtype=np.int64)
    part[order] = dealt
    sums = np.zeros((p, slack.shape[1]))
    np.add.at(sums, part, slack)
    for _ in range(repairs if p > 1 else 0):
        worst = sums.min(axis=1)
        a = int(np.argmin(worst))
        if worst[a] >= 0:
            break
        j = int(np.argmin(sums[a]))
        b = int(np.argmax(np.where(np.arange(p) == a, -np.inf, sums[:, j])))
        in_a = np.flatnonzero((part == a) & (rows > 0))
        in_b = np.concatenate(
            [[-1], np.flatnonzero((part == b) & (rows > 0))]
        )  # -1: a move, no swap back
        wa = slack[in_a][:, None, :]
        wb = np.where(in_b[:, None] >= 0, slack[np.maximum(in_b, 0)], 0.0)[None, :, :]
        new_a, new_b = sums[a] - wa + wb, sums[b] + wa - wb
        score = np.minimum(new_a.min(axis=2), new_b.min(axis=2))
        rows_b = np.where(in_b >= 0, rows[np.maximum(in_b, 0)], 0)
        rows_a = rows[part == a].sum() - rows[in_a][:, None] + rows_b[None, :]
        score = np.where(rows_a > 0, score, -np.inf)  # a partition never empties
        i, k = np.unravel_index(int(np.argmax(score)), score.shape)
        if score[i, k] <= min(worst[a], sums[b].min()):
            break
        part[in_a[i]] = b
        if in_b[k] >= 0:
            part[in_b[k]] = a
        sums[a], sums[b] = new_a[i, k], new_b[i, k]
    return part


def partition_seed(seed: int, table: int, part: int) -> int:
    """The seed of one table's anatomy in one partition: fixed by (release seed, table,
    partition), so a retried task recomputes the same groups."""
    return int(
        np.random.SeedSequence([seed, table, part]).generate_state(1, np.uint64)[0] >> np.uint64(1)
    )


def fingerprint(counts: ShardCounts, labels: Mapping[str, Sequence[str]]) -> str:
    """sha256 of the row count, the content hash sum and the dictionaries."""
    h = hashlib.sha256(f"{counts.total}:{counts.hash_sum}".encode())
    for a in sorted(labels):
        h.update(("\x1f" + a + "\x1e" + "\x1e".join(labels[a])).encode())
    return "sha256:" + h.hexdigest()
