"""Partitions and chunks that are l-eligible for every sensitive attribute at once, planned
from one counting pass over `SHARDS` shards and never from where sensitive values lie:
000's partitions (`plan_partitions`) and 002's chunks (`plan_chunks`).

What a plan shows, and why that is safe: docs/explanation/threat-model.md, "What a plan
shows".
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
from .hashing import SPARK_SEED, hash_long, spark_xxhash64
from .sampling import OCCURRENCE

SHARDS = 1024
ROWS_PER_PARTITION = 131_072  # `partitions: auto` = ceil(rows / this)
ROWS, FINGERPRINT = -1, -2  # `attr` markers in shard_counts' output
COUNT_COLUMNS = ("attr", "shard", "value", "count")
COUNT_SCHEMA = pa.schema(
    [("attr", pa.int32()), ("shard", pa.int32()), ("value", pa.int32()), ("count", pa.int64())]
)


def shard_key(seed: int) -> int:
    """The shard hash's 64-bit key: BLAKE2b of the release seed, so that whatever the
    non-cryptographic hash below gives away is not the seed itself."""
    digest = hashlib.blake2b(seed.to_bytes(16, "big"), digest_size=8, person=b"vpub-shards")
    return int.from_bytes(digest.digest(), "big")


def code_hash(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Spark's `xxhash64` of `columns` of encoded rows (codes as int, OCCURRENCE as
    bigint; `spark_xxhash64`), uint64: a JVM expression on Spark, NumPy in process."""
    return spark_xxhash64(
        [
            frame[c].to_numpy().astype(np.int64 if c == OCCURRENCE else np.int32, copy=False)
            for c in columns
        ]
    )


def keyed_shards(h: np.ndarray, seed: int) -> np.ndarray:
    """Each hash's shard under the release seed: Spark's `pmod(xxhash64(key, h),
    SHARDS)`, the key `shard_key(seed)` as a bigint."""
    key = np.array([shard_key(seed)], dtype=np.uint64)
    keyed = hash_long(h, hash_long(key, np.uint64(SPARK_SEED))[0])
    return (keyed & np.uint64(SHARDS - 1)).astype(np.int32)


def content_columns(frame_columns: Sequence[str]) -> list[str]:
    """The columns a row's content hash reads: every one but OCCURRENCE, in order."""
    return [c for c in frame_columns if c != OCCURRENCE]


def shard_of(frame: pd.DataFrame, seed: int, columns: Sequence[str] | None = None) -> np.ndarray:
    """Each row's shard in [0, SHARDS), from its content (of `columns`; default: all)
    and the release seed."""
    return ContentShards(seed, None if columns is None else tuple(columns)).of(frame)


@dataclass(frozen=True)
class ContentShards:
    """Random shards: a keyed hash of the row's content in `columns` (None: every
    column). With `occurrence`, the hash also reads the row's OCCURRENCE among the rows
    of equal content (`sampling.with_occurrence`; the frames must carry it), so that equal rows
    get independent shards: anatomy's partitions, where P shows
    (docs/explanation/threat-model.md)."""

    seed: int
    columns: tuple[str, ...] | None = None
    occurrence: bool = False

    def hashed(self, frame_columns: Sequence[str]) -> list[str]:
        """The columns the shard hash reads, in order, of a frame of `frame_columns`."""
        cols = list(self.columns or content_columns(frame_columns))
        return [*cols, OCCURRENCE] if self.occurrence else cols

    def of(self, frame: pd.DataFrame, h: np.ndarray | None = None) -> np.ndarray:
        """Each row's shard; `h`, the rows' content hash (`code_hash` of every column
        but OCCURRENCE) where the caller has it and the shard reads the same columns."""
        if h is None or self.occurrence or self.columns is not None:
            h = code_hash(frame, self.hashed(list(frame.columns)))
        return keyed_shards(h, self.seed)


def numbers_rows(sharding: object) -> bool:
    """Whether a sharding reads OCCURRENCE: engines add it (`sampling.with_occurrence`, over
    `sharding.columns`) before counting or partitioning."""
    return isinstance(sharding, ContentShards) and sharding.occurrence


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
    return counted_shards(frame, sensitive, sharding)[0]


def counted_shards(
    frame: pd.DataFrame, sensitive: Sequence[str], sharding: Sharding
) -> tuple[pd.DataFrame, np.ndarray]:
    """`shard_counts`, and each row's shard (`sharding.of`), for an engine that keeps
    them for the partitions."""
    h = code_hash(frame, content_columns(list(frame.columns)))
    shards = sharding.of(frame, h)
    shard = shards.astype(np.int64)
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
    types = {"attr": "int32", "shard": "int32", "value": "int32", "count": "int64"}
    return out.astype(types)[list(COUNT_COLUMNS)], shards


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
    """The largest P <= target (default `auto_partitions`) for which shard s -> partition
    s mod P gives partitions that are all non-empty and l-eligible for every sensitive
    attribute (the shards are already a keyed random function of the QI content; see
    docs/explanation/threat-model.md for what P shows)."""
    target = auto_partitions(counts.total) if target is None else target
    if target < 1:
        raise PrivacyError(f"partitions must be >= 1, not {target}")
    slack = _slack(counts, l)
    for p in range(min(target, int((counts.rows > 0).sum())), 0, -1):
        part = np.arange(SHARDS) % p
        rows, eligible = _eligible(counts.rows, slack, part, p)
        if (rows > 0).all() and eligible:
            first = np.concatenate([[0], np.cumsum(rows // l)[:-1]]).astype(np.int64)
            return PartitionPlan(part.astype(np.int32), rows, first)
    raise PrivacyError(
        f"the table is not {l}-eligible for every sensitive attribute; no partitioning exists"
    )


def plan_chunks(counts: ShardCounts, l: int, chunk_rows: int) -> PartitionPlan:
    """Runs of consecutive shards (QI-local with `QiShards`) of at least `chunk_rows`
    rows, each l-eligible for every sensitive attribute, cut top-down (`_safe_ranges`);
    docs/explanation/threat-model.md says why they show nothing. Group ids: a chunk's first row's
    index (a chunk never makes more groups than rows)."""
    if chunk_rows < 1:
        raise PrivacyError(f"chunk_rows must be >= 1, not {chunk_rows}")
    slack = _slack(counts, l)
    if (slack.sum(axis=0) < 0).any():
        raise PrivacyError(
            f"the table is not {l}-eligible for every sensitive attribute; no chunking exists"
        )
    hist = (
        np.concatenate(list(counts.values.values()), axis=1)
        if counts.values
        else np.zeros((SHARDS, 1))
    )
    part = np.zeros(SHARDS, dtype=np.int64)
    for chunk, (lo, hi) in enumerate(_safe_ranges(counts.rows, hist, l, chunk_rows)):
        part[lo:hi] = chunk
    rows, eligible = _eligible(counts.rows, slack, part, int(part.max()) + 1)
    assert eligible, "a chunk is not eligible"
    return PartitionPlan(
        part.astype(np.int32), rows, np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
    )


def _safe_ranges(
    rows: np.ndarray, hist: np.ndarray, l: int, min_rows: int
) -> list[tuple[int, int]]:
    """Shard ranges cut top-down from the whole table: a range of m rows whose most
    frequent sensitive value (of any attribute) occurs c times is cut at row counts into
    the most runs (k <= m // (l c), m // min_rows) that each hold at least max(l c,
    min_rows) rows, each run then cut the same way. Every run is l-eligible however
    the range's values are arranged; the cuts read the QI counts and each range's
    multiset, which the release publishes (a range is a union of groups)."""
    cum = np.concatenate([[0], np.cumsum(rows)])
    chist = np.vstack([np.zeros((1, hist.shape[1])), np.cumsum(hist, axis=0)])
    out, todo = [], [(0, len(rows))]
    while todo:
        lo, hi = todo.pop()
        m, c = int(cum[hi] - cum[lo]), int((chist[hi] - chist[lo]).max())
        need = max(l * c, min_rows, 1)
        cuts = next(
            (
                b
                for k in range(m // need, 1, -1)
                if len(b := _cut_at(cum, lo, hi, k)) > 2 and (np.diff(cum[b]) >= need).all()
            ),
            None,
        )
        if cuts is None:
            out.append((lo, hi))
        else:
            todo += [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    return sorted(out)


def _cut_at(cum: np.ndarray, lo: int, hi: int, k: int) -> np.ndarray:
    """The shard boundaries nearest k equal shares of the rows of shards [lo, hi)."""
    targets = cum[lo] + (cum[hi] - cum[lo]) * np.arange(1, k) // k
    at = np.searchsorted(cum, targets, side="left")
    return np.unique(np.clip(np.concatenate([[lo], at, [hi]]), lo, hi))


def _eligible(
    rows: np.ndarray, slack: np.ndarray, part: np.ndarray, p: int
) -> tuple[np.ndarray, bool]:
    """(rows per partition, whether every partition is l-eligible for every attribute)."""
    per = np.bincount(part, weights=rows, minlength=p).astype(np.int64)
    sums = np.zeros((p, slack.shape[1]))
    np.add.at(sums, part, slack)
    return per, bool((sums >= 0).all())


def _slack(counts: ShardCounts, l: int) -> np.ndarray:
    """[SHARDS, D]: per shard, rows - l * count of each sensitive value. A partition is
    l-eligible for every sensitive attribute iff its shards' slacks sum to >= 0."""
    cols = [counts.rows[:, None] - l * v for v in counts.values.values()]
    return (
        np.concatenate(cols, axis=1).astype(np.float64)
        if cols
        else counts.rows[:, None].astype(np.float64)
    )


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
