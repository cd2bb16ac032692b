"""KL divergence of a release on Spark (000 §5.1), `SparkEngine.release_kl`: the
decomposition of `utility/kl.py` computed with Spark joins and aggregates. The release
comes as `ReleaseFiles` (engines/base.py): its files, its terms and its models, built
by the layer that knows the release format. Each term is the source
projected on a table's (or separator's) attributes, joined with that table's estimate
at the projected keys; anatomy estimates are `sum_g n_g(x_Q) * c_g(s) / |g|` from the
QIT and ST files. Release labels are encoded into the source's codes by the shared
pyarrow kernel; only per-term sums reach the driver."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import SpecError
from ...kernels.anatomy import COUNT, GROUP
from ...kernels.arrays import pack_codes, pack_counts, pack_sorted, unpack_counts, unpack_sorted
from ..base import ReleaseFiles
from ..kl_sums import kl_sums
from .errors import spark_errors
from .schema import struct_type
from .session import default_parallelism

EST = "__est"
KEY = "__key"
SUMS = pa.schema([("entropy", pa.float64()), ("log_p", pa.float64())])


def _encoded(spark, rel: ReleaseFiles, table: str, part: str, dictionaries):
    """A release part with its label columns replaced by the source's int32 codes."""
    from pyspark.sql import types as T

    df = spark.read.parquet(str(rel.part_dir(table, part)))
    labels = {c: list(dictionaries[c].labels) for c in df.columns if c in dictionaries}

    def encode(batches):
        for b in batches:
            cols = [
                pc.index_in(b.column(n), value_set=pa.array(labels[n], pa.string())).cast(
                    pa.int32()
                )
                if n in labels
                else b.column(n)
                for n in b.schema.names
            ]
            yield pa.RecordBatch.from_arrays(cols, names=b.schema.names)

    schema = T.StructType(
        [
            T.StructField(f.name, T.IntegerType() if f.name in labels else f.dataType)
            for f in df.schema.fields
        ]
    )
    return df.mapInArrow(encode, schema).persist()  # read by one or two terms


class _Table:
    def __init__(self, spark, rel: ReleaseFiles, entry: dict, dictionaries):
        from pyspark.sql import functions as F

        self.attributes, self.sensitive = list(entry["attributes"]), entry["sensitive"]
        self.parts = {
            p: _encoded(spark, rel, entry["name"], p, dictionaries) for p in entry["parts"]
        }
        if self.sensitive is None:
            self.counts = self.parts["counts"]
            return
        self.qit, st = self.parts["qit"], self.parts["st"]
        size = st.groupBy(GROUP).agg(F.sum(COUNT).alias("__size"))
        self.share = st.join(size, GROUP).select(
            GROUP, self.sensitive, (F.col(COUNT) / F.col("__size")).alias("__w")
        )

    def marginal(self, keys, cols: list[str]):
        """`keys` (distinct values of `cols`) with their estimated count EST."""
        from pyspark.sql import functions as F

        if self.sensitive is None:
            est = self.counts.groupBy(*cols).agg(F.sum(COUNT).alias(EST))
            return keys.join(est, cols, "left")
        q = [c for c in cols if c != self.sensitive]
        per_q = self.qit.groupBy(GROUP, *q).agg(F.count(F.lit(1)).alias("__n"))
        if self.sensitive not in cols:
            return keys.join(per_q.groupBy(*q).agg(F.sum("__n").alias(EST)), q, "left")
        joined = (keys.join(per_q, q) if q else keys.crossJoin(per_q)).join(
            self.share, [GROUP, self.sensitive]
        )
        est = joined.groupBy(*cols).agg(F.sum(F.col("__n") * F.col("__w")).alias(EST))
        return keys.join(est, cols, "left")


BROADCAST_BYTES = 64 << 20
"""A release whose Parquet files total at most this many bytes is loaded whole into every
task (`broadcast_kl`), as Spark broadcasts a small join side; 64 MiB of Parquet holds
about 15M anatomy rows and builds a model of a few hundred MB."""


def spark_kl(engine, release: ReleaseFiles, loaded, form: str | None = None) -> float:
    """KL of `release` against `loaded` (a Spark LoadedTable of the same source): with the
    release in every task when it is small (`BROADCAST_BYTES`), else in one shuffle
    (`kl_one_pass.py`) when it applies, else one aggregate per term. `form` forces one
    of `FORMS` (a benchmark's, a test's)."""
    from .kl_one_pass import one_pass_kl, one_pass_terms

    if form is not None:
        if form not in FORMS:
            raise SpecError(f"unknown KL form {form!r}; known: {', '.join(FORMS)}")
        return FORMS[form](engine, release, loaded)
    if release.size <= BROADCAST_BYTES:
        return broadcast_kl(engine, release, loaded)
    terms = one_pass_terms(release, loaded)
    if terms is not None:
        return one_pass_kl(engine, release, loaded, terms)
    return per_term_kl(engine, release, loaded)


def per_term_kl(engine, release: ReleaseFiles, loaded) -> float:
    """KL with one Spark aggregate (and join) per term of the decomposition."""
    from pyspark.sql import functions as F

    spark, n = engine.spark, float(loaded.rows)
    data = loaded.data.persist()  # the source is projected once per term

    def expected_log(cols: list[str], table: _Table) -> float:
        proj = table.marginal(data.groupBy(*cols).agg(F.count(F.lit(1)).alias("__c")), cols)
        term = F.col("__c") / n * F.log(F.col(EST) / n)
        return float(proj.agg(F.sum(term)).collect()[0][0] or 0.0)

    tables = [_Table(spark, release, e, loaded.dictionaries) for e in release.tables]

    kl = source_entropy(loaded)  # on the persisted `data`: the same DataFrame
    for i, cols, sign in release.terms:
        kl -= sign * expected_log(list(cols), tables[i])
    covered = {a for t in tables for a in t.attributes}
    data.unpersist()
    for t in tables:
        for df in t.parts.values():
            df.unpersist()
    return kl + sum(math.log(loaded.dictionaries[a].size) for a in loaded.names if a not in covered)


CHUNK_ROWS = 2_000_000
"""Rows evaluated per call: a model's marginal has a fixed cost (grouping the whole
release table), so Arrow's batches are gathered into chunks of about this many rows."""


def per_core(df):
    """`df` in at most one partition per core of the session (`coalesce`: no shuffle), so
    a task's fixed cost (building the release's models, allocating the cubes) is paid
    once per core, not once per input split (a source of many small files has many
    splits; the benchmark sources here have 2, so it changed nothing there). A task
    then reads its rows in `CHUNK_ROWS` chunks, so its memory does not grow with them."""
    cores = default_parallelism(df.sparkSession)
    return df.coalesce(cores)  # (no-op when it has fewer partitions)


def chunks(batches, rows: int):
    """`batches` gathered into tables of at least `rows` rows (the last one smaller)."""
    held: list = []
    count = 0
    for b in batches:
        held.append(b)
        count += len(b)
        if count >= rows:
            yield pa.Table.from_batches(held)
            held, count = [], 0
    if held:
        yield pa.Table.from_batches(held)


def _distinct_frames(batches, packing: Packing | None, names: list[str]):
    """A task's share of `distinct_rows` as frames of the source's columns and COUNT:
    packed keys counted here at once (np.unique over the task's keys), or Spark's
    grouped rows chunk by chunk."""
    import numpy as np

    if packing is None:
        for chunk in chunks(batches, CHUNK_ROWS):
            yield chunk.to_pandas()
        return
    held = [b.column(0).to_numpy() for b in batches]
    key, count = np.unique(
        np.concatenate(held) if held else np.zeros(0, np.int64), return_counts=True
    )
    yield _keyed_frame(key, count, packing, names)


def _distinct_sums(release: ReleaseFiles, labels: dict[str, list[str]], n: int, frames: Callable):
    """mapInArrow over `distinct_rows` (each distinct source row in one task): per task,
    `kl_sums` over its share. `frames` turns the task's input into frames of the
    source's columns and COUNT (`_distinct_frames`, `_merged_frames`)."""

    def run(batches):
        entropy, log_p = kl_sums(release, labels, n, frames(batches))
        yield pa.RecordBatch.from_pydict({"entropy": [entropy], "log_p": [log_p]}, schema=SUMS)

    return run


def broadcast_kl(engine, release: ReleaseFiles, loaded) -> float:
    """KL = sum_x p log p - (1/n) sum_x c_x log p~(x) (`kl.py`'s decomposition) over the
    source's distinct rows x with counts c_x (`distinct_rows`), one Python pass in which
    every task, holding the whole release, sums both terms over its share of them. On the
    1M `sal` source (998,808 distinct rows of 1M): 4.55 s as two jobs (Spark's entropy,
    then a Python pass over all rows), 2.5 s grouped by Spark's aggregate, less by
    `distinct_rows`' shuffle of packed keys (measured; docs/explanation/performance.md)."""
    labels = {a: list(loaded.dictionaries[a].labels) for a in loaded.names}
    packing, names = packing_of(loaded), list(loaded.names)
    if loaded.direct is not None and packing is not None:
        rows = direct_keys(engine, loaded, packing)
        frames = partial(_merged_frames, packing=packing, names=names)
    else:
        rows, packing = distinct_rows(loaded)
        frames = partial(_distinct_frames, packing=packing, names=names)
    sums = rows.mapInArrow(_distinct_sums(release, labels, loaded.rows, frames), struct_type(SUMS))
    with spark_errors("KL divergence"):
        # one row per task, summed here: Spark's aggregate would run one more job
        parts = sums.collect()
    entropy, log_sum = sum(r.entropy for r in parts), sum(r.log_p for r in parts)
    return float(entropy) - float(log_sum) / float(loaded.rows)


@dataclass(frozen=True)
class Packing:
    """How `distinct_rows` packed a row into KEY: column c is (KEY // stride) % size."""

    cols: tuple[str, ...]
    strides: tuple[int, ...]
    sizes: tuple[int, ...]


KEYS_PER_TASK = 8_000_000
"""At most this many packed keys (64 MB of int64) are counted by one task of
`distinct_rows`: a task holds its keys at once to count them."""


def packing_of(loaded) -> Packing | None:
    """How a source row packs into one bigint (`packing_over` its columns), or None when
    the domains do not fit in 62 bits."""
    return packing_over(list(loaded.names), {a: loaded.dictionaries[a].size for a in loaded.names})


def packing_over(cols, sizes) -> Packing | None:
    """How the codes of `cols` pack into one bigint: the mixed radix over their `sizes`
    (`term_of`'s strides, the last column's 1), or None when a column has no size or
    the codes do not fit in 62 bits. No columns pack into 0."""
    from .kl_one_pass import term_of

    if not all(c in sizes for c in cols):
        return None
    term = term_of(1, list(cols), None, sizes)
    if term is None:
        return None
    return Packing(term.cols, term.strides, tuple(max(int(sizes[c]), 1) for c in term.cols))


def packed_rows(loaded) -> tuple[Any, Packing] | None:
    """The source with each row packed into one bigint KEY (`packing_of`), so a Python
    pass over it moves 8 bytes per row out of the JVM rather than every column
    (measured on the 1M `sal` source: 0.56 s for one int column against 1.03 s for its
    8); None when the domains do not pack into 62 bits."""
    packing = packing_of(loaded)
    if packing is None:
        return None
    return loaded.data.select(packed_key(packing).alias(KEY)), packing


def packed_key(packing: Packing):
    """A row's codes packed into one bigint as `packing` says: a JVM expression."""
    from pyspark.sql import functions as F

    key = F.lit(0).cast("long")
    for c, stride in zip(packing.cols, packing.strides, strict=True):
        key = key + F.col(c).cast("long") * F.lit(stride).cast("long")
    return key


def packed(batch, packing: Packing):
    """An encoded batch's rows packed as `packing` says (NumPy int64): the mixed radix
    of `pack_codes` over the packing's sizes gives exactly its strides."""
    return pack_codes(
        [batch.column(c).to_numpy() for c in packing.cols], packing.sizes, batch.num_rows
    )


def unpacked(key, packing: Packing) -> dict:
    """`packed_rows`' keys (a NumPy int64 array) back to each column's codes: one
    `divmod` per column from the last, the strides being the mixed radix of the sizes
    (`term_of`); on 10M keys of 8 columns 0.5 s against 0.6-1.0 s for a division and a
    remainder per column."""
    out, rest = {}, key
    for c, size in zip(reversed(packing.cols), reversed(packing.sizes), strict=True):
        rest, out[c] = np.divmod(rest, size)
    return {c: out[c] for c in packing.cols}


def distinct_rows(loaded) -> tuple[Any, Packing | None]:
    """Every distinct source row in exactly one task: `packed_rows` hash-partitioned by
    KEY into one partition per core or per `KEYS_PER_TASK` rows, whichever is more (one
    shuffle of 8 bytes per row, counted by the task: measured 0.6 s for the 1M `sal`
    source against 0.9-1.4 s for Spark's aggregate); else, when the domains do not pack,
    Spark's aggregate by the columns with their COUNT, one partition per core."""
    from pyspark.sql import functions as F

    cores = default_parallelism(loaded.data.sparkSession)
    packed = packed_rows(loaded)
    if packed is None:
        grouped = loaded.data.groupBy(*loaded.names).agg(F.count(F.lit(1)).alias(COUNT))
        return grouped.coalesce(cores), None
    keys, packing = packed
    return keys.repartition(max(cores, -(-loaded.rows // KEYS_PER_TASK)), KEY), packing


def source_entropy(loaded) -> float:
    """sum_x p log p over the source's distinct rows, by one Spark aggregate (packed
    into one bigint as in `distinct_rows` when the domains allow, else by the columns).
    Measured on the 1M `sal` source: 1.4-1.9 s packed, 2.0-2.4 s by its 8 columns
    (medians of 3, two rounds)."""
    from pyspark.sql import functions as F

    rows, packing = distinct_rows(loaded)
    if packing is not None:
        rows = rows.groupBy(KEY).agg(F.count(F.lit(1)).alias(COUNT))
    p = F.col(COUNT) / float(loaded.rows)
    return float(rows.agg(F.sum(p * F.log(p))).collect()[0][0] or 0.0)


BLOB = pa.schema([("part", pa.int64()), ("keys", pa.binary()), ("counts", pa.binary())])
BLOB_KEYS = 1 << 20
"""Keys per row of `direct_keys`' shuffle (8 MB of int64 before `pack_sorted`)."""


def direct_keys(engine, loaded, packing: Packing):
    """`distinct_rows` without JVM rows: each task reads its share of the source's files
    (`engines/spark/direct.py`), packs and counts its keys with NumPy, and sends each
    reduce partition its keys and counts as a few binary rows (hash of the key, Spark's
    `partition_keys` so that partition p lands in task p). The shuffle moves a few rows
    of bytes, not a row per key: Spark turns rows into Arrow batches at about a million
    rows a second (measured; docs/explanation/performance.md)."""
    from .direct import direct_frame

    parts = max(default_parallelism(engine.spark), -(-loaded.rows // KEYS_PER_TASK))
    routes = engine.partition_keys(parts)
    blobs = direct_frame(
        engine.spark,
        loaded.direct,
        partial(_key_blobs, packing=packing, routes=routes),
        struct_type(BLOB),
    )
    return blobs.repartition(parts, "part")


def _key_blobs(batches, packing: Packing, routes: list[int]):
    """In a task: its rows' distinct keys and counts, as BLOB rows per reduce partition,
    packed (`pack_sorted`, `pack_counts`): at 1M source rows a map task's 8.0 MB of
    int64 keys and counts shuffle as 1.2 MB."""
    import numpy as np

    held = [packed(b, packing) for b in batches]
    keys, counts = np.unique(
        np.concatenate(held) if held else np.zeros(0, np.int64), return_counts=True
    )
    with np.errstate(over="ignore"):  # a multiplicative hash, wrapping: the top bits mix all
        part = (
            (keys.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
        ) % np.uint64(len(routes))
    order = np.argsort(part, kind="stable")  # one pass, not one per partition; keys stay sorted
    keys, counts = keys[order], counts[order].astype(np.int64)
    bounds = np.searchsorted(part[order], np.arange(len(routes) + 1))
    for p, route in enumerate(routes):
        for start in range(bounds[p], bounds[p + 1], BLOB_KEYS):
            chunk = slice(start, min(start + BLOB_KEYS, bounds[p + 1]))
            yield pa.RecordBatch.from_pydict(
                {
                    "part": [route],
                    "keys": [pack_sorted(keys[chunk])],
                    "counts": [pack_counts(counts[chunk])],
                },
                schema=BLOB,
            )


def _merged_frames(batches, packing: Packing, names: list[str]):
    """A reduce task of `direct_keys`: its partition's keys with their counts summed over
    the map tasks, as one frame of the source's columns and COUNT."""
    import numpy as np

    keys, counts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for b in batches:
        keys += [unpack_sorted(x) for x in b.column("keys").to_pylist()]
        counts += [unpack_counts(x) for x in b.column("counts").to_pylist()]
    key = np.concatenate(keys)
    order = np.argsort(key, kind="stable")  # sorted runs: merged in O(n)
    key, count = key[order], np.concatenate(counts)[order]
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
    key, count = key[start], np.add.reduceat(count, start) if len(start) else count
    yield _keyed_frame(key, count, packing, names)


def _keyed_frame(key, count, packing: Packing, names: list[str]):
    """Packed keys and their counts as a frame of the source's columns and COUNT."""
    import pandas as pd

    cols = unpacked(key, packing)  # in the source's order (no reordering copy), and
    # framed as they are (copy=False: not copied again into one block)
    return pd.DataFrame({n: cols[n] for n in names} | {COUNT: count}, copy=False)


def _one_shuffle(engine, release: ReleaseFiles, loaded) -> float:
    from .kl_one_pass import one_pass_kl, one_pass_terms

    terms = one_pass_terms(release, loaded)
    if terms is None:
        raise SpecError(
            "the one-shuffle KL needs tables estimated file set by file set (anatomy, projection) whose keys pack into 62 bits"
        )
    return one_pass_kl(engine, release, loaded, terms)


FORMS: dict[str, Callable[..., float]] = {
    "every-task": broadcast_kl,
    "one-shuffle": _one_shuffle,
    "per-term": per_term_kl,
}
"""The ways of `spark_kl`, by name: the release in every task, one shuffle, one
aggregate per term."""
