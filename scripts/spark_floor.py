"""The floor of a Spark publish's data movement on this machine: what Spark costs to
move a source's rows through the steps a publish needs, with no work done on them.

For a Parquet source (e.g. `out/bench-10m/sal-10000000/data`, made by
`make bench-publish-10m`), in one warm local session (`SparkSettings()` defaults), the
median of 3 runs of each plan after one warm-up run:

- `read + Python pass + shuffle + Python pass`: every row to a Python worker, tagged
  with a partition key (`mapInArrow`), back, shuffled, and to a Python worker again per
  partition (`applyInPandas`), which returns one summary row;
- `read + JVM key + shuffle + Python pass`: the same with the key a JVM expression;
- `read + Python pass`: every row to a Python worker and counted;
- the numbering of rows of equal QI (every column but the last, packed into one bigint,
  as `engines/spark/rows.py`'s `numbered_rows` packs them), each result cached and
  counted: `shuffle by the QI`, `shuffle + sort` (the QI, then the last column), and
  `window` (`row_number` over the QI, ordered by the last column) carrying every
  column, and `window on the two words` (the QI's bigint and the last column's only,
  as `numbered_rows` shuffles them): what UAD's plan must pay on Spark for its shards;
- a lower bound of a numbering without a window: the rows counted per distinct (QI,
  last column) by an aggregate and each count exploded into indices (among equal rows
  only: the index among rows of equal QI needs a running sum over each QI's distinct
  rows, a window again);
- the shard counts over the numbered rows, cached: each row exploded into a cell per
  sensitive attribute (the last column) and one for the row, or counted once per
  (shard, sensitive value) cell, as `engines/spark/shards.py` counts them;
- anatomy (l = 10, the last column sensitive) over the numbered rows in `PARTS`
  partitions (each row's shard mod `PARTS`): in Python, each row one bigint, the
  kernel (`kernels.anatomy.anatomize`) and its QIT and ST written as Parquet by the
  task, as a publish runs it; and in the JVM, each partition's rows dealt by a window
  (ordered by their value's rank in the partition, then a keyed hash) into their
  groups, nothing sorted for the QIT and nothing written (a lower bound of that
  design), then with its QIT sorted and written and its ST counted and written;
- a partition pass over the cached codes (a JVM key, a shuffle into 64 tasks, a Python
  pass each) with the 8 columns, with each row packed into one bigint beside its key,
  and with the key computed from the bigint before the shuffle, so that the bigint is
  all a row carries, as the partition tasks get their rows (`shuffled_rows`)
  (docs/benchmarks/performance.md).

Usage: python scripts/spark_floor.py SOURCE
"""

import statistics
import sys
import tempfile
import time
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql import types as T

from vpub_spark.engines.settings import SparkSettings
from vpub_spark.engines.spark.kl import packed_key, packing_over, unpacked
from vpub_spark.engines.spark.session import get_session
from vpub_spark.engines.spark.shards import bigint_array
from vpub_spark.kernels.sampling import OCCURRENCE

PARTS = 64
L = 10


def _tag(batches):
    for b in batches:
        key = (b.column(0).to_numpy() * 31 + b.column(1).to_numpy()) % PARTS
        yield b.append_column("__p", pa.array(key.astype(np.int32)))


def _summary(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"n": [len(frame)]})


def _sizes(data) -> dict[str, int]:
    """Each column's domain size, from its largest code."""
    return data.agg(*[(F.max(c) + 1).alias(c) for c in data.columns]).first().asDict()


def _packed(cols, sizes):
    """The codes of `cols` packed into one bigint, as the engine packs them
    (`kl.packing_over`, `kl.packed_key`), and the packing."""
    packing = packing_over(list(cols), sizes)
    if packing is None:
        raise SystemExit(f"the codes of {list(cols)} do not pack into 62 bits")
    return packed_key(packing), packing


def _numbering(data, sizes) -> dict:
    """The numbering plans over `data` (cached codes of domain `sizes`)."""
    from pyspark.sql import Window

    cols = data.columns
    (qi, _), (rest, _) = _packed(cols[:-1], sizes), _packed(cols[-1:], sizes)

    def cached(frame):
        def run():
            made = frame().persist()
            made.count()
            made.unpersist(blocking=True)

        return run

    window = Window.partitionBy(qi).orderBy(rest)
    words = data.select(qi.alias("k"), rest.alias("r"))
    on_words = Window.partitionBy("k").orderBy("r")
    every = _packed(cols, sizes)[0]
    counted = words.groupBy("k", "r").count()
    return {
        "numbering: shuffle by the QI": cached(lambda: data.repartition(qi)),
        "numbering: shuffle + sort": cached(
            lambda: data.repartition(qi).sortWithinPartitions(qi, rest)
        ),
        "numbering: window": cached(lambda: data.withColumn("n", F.row_number().over(window))),
        "numbering: window on the two words": cached(
            lambda: words.withColumn("n", F.row_number().over(on_words))
        ),
        "numbering: an aggregate per distinct row, exploded": cached(
            lambda: counted.select("k", "r", F.explode(F.sequence(F.lit(0), F.col("count") - 1)))
        ),
        "cached codes + JVM key + shuffle + Python pass": lambda: _partition_pass(data),
        "the same, each row packed into one bigint beside its key": lambda: _partition_pass(
            data.select(every.alias("row"))
        ),
        "the same, the key computed from the bigint": lambda: _partition_pass(
            data.select(every.alias("row")), keyed=False
        ),
    }


def _shard_counts(data, sizes, out: str) -> dict:
    """The shard counts of the numbered rows, exploded per attribute and by cells."""
    from pyspark.sql import Window

    from vpub_spark.engines.spark.shards import shard_count_frame
    from vpub_spark.kernels.partitioning import ContentShards

    cols = data.columns
    window = Window.partitionBy(*cols[:-1]).orderBy(cols[-1])
    numbered = data.withColumn(OCCURRENCE, (F.row_number().over(window) - 1).cast("long"))
    numbered = numbered.persist()
    numbered.count()
    sharding = ContentShards(7, tuple(cols[:-1]), occurrence=True)
    size = {cols[-1]: sizes[cols[-1]]}
    return {
        "shard counts: each row exploded per attribute": lambda: shard_count_frame(
            numbered, cols[-1:], sharding
        ),
        "shard counts: by (shard, sensitive value) cells": lambda: shard_count_frame(
            numbered, cols[-1:], sharding, size
        ),
    } | _anatomy(numbered, sharding, sizes, out)


def _anatomy(numbered, sharding, sizes, out: str) -> dict:
    """Anatomy of the numbered rows' `PARTS` partitions: in Python (each row one bigint,
    the kernel, its tables written by the task into `out`) and dealt by a JVM window."""
    from vpub_spark.engines.spark.shards import shard_column

    every = numbered.columns
    occurrences = numbered.agg(F.max(OCCURRENCE) + 1).first()[0]
    word, packing = _packed(every, sizes | {OCCURRENCE: occurrences})
    part = F.pmod(shard_column(sharding, every), F.lit(PARTS)).cast("int")
    task = partial(_anatomy_task, packing=packing, out=out)
    schema = T.StructType([T.StructField("n", T.LongType())])
    in_python = numbered.select(word.alias("w")).repartition(PARTS, part).mapInArrow(task, schema)
    dealt = _jvm_dealt(numbered, part, word, packing.sizes[-2])
    return {
        "anatomy in Python: one bigint a row, the kernel, Parquet written": lambda: in_python.agg(
            F.sum("n")
        ).collect(),
        "anatomy in the JVM: a window dealing each partition, nothing written": lambda: (
            dealt.write.format("noop").mode("overwrite").save()
        ),
        "the same, its QIT sorted and written, its ST counted and written": partial(
            _jvm_tables, dealt, packing, out
        ),
    }


def _anatomy_task(batches, packing, out):
    """A partition's anatomy (the last code column sensitive), its tables written."""
    from pyspark import TaskContext

    from vpub_spark.kernels.anatomy import anatomize

    got = [b.column(0).to_numpy() for b in batches]
    if not got:
        return
    columns, codes = packing.cols, unpacked(np.concatenate(got), packing)
    frame = pd.DataFrame({c: codes[c].astype(np.int32) for c in columns[:-1]})
    qit, st = anatomize(frame, columns[-2], L, 7, columns[:-2])
    part = TaskContext.get().partitionId()
    for name, table in (("qit", qit), ("st", st)):
        pq.write_table(
            pa.Table.from_pandas(table, preserve_index=False), f"{out}/{name}-{part}.parquet"
        )
    yield pa.RecordBatch.from_pydict({"n": [len(frame)]})


def _jvm_dealt(numbered, part, word, values: int):
    """Each partition's rows dealt into groups of `L` by a window: ordered by their
    value's rank in the partition (by count; the plan's counts, found first) and a
    keyed hash, row i to group i mod (rows // L), as `kernels/anatomy.py` deals.
    Returns the frame of (group_id, w: the row's bigint); the counts are found now."""
    from pyspark.sql import Window

    s = numbered.columns[-2]
    counts = numbered.groupBy(part.alias("p"), F.col(s).alias("s")).count().toPandas()
    rank = np.zeros(PARTS * values, dtype=np.int64)
    for p, per in counts.groupby("p"):
        order = per.sort_values(["count", "s"], ascending=[False, True])["s"].to_numpy()
        rank[int(p) * values + order] = np.arange(len(order))
    rows = counts.groupby("p")["count"].sum().reindex(range(PARTS), fill_value=0).to_numpy()
    groups = np.maximum(rows // L, 1)
    first = np.r_[0, np.cumsum(groups)[:-1]]
    value_rank = F.element_at(bigint_array(rank), part * F.lit(values) + F.col(s) + F.lit(1))
    hashed = F.xxhash64(F.lit(777), *numbered.columns).bitwiseAND(F.lit((1 << 40) - 1))
    key = F.shiftleft(value_rank, 40).bitwiseOR(hashed)
    dealt = numbered.select(part.alias("p"), key.alias("k"), word.alias("w"))
    at = F.row_number().over(Window.partitionBy("p").orderBy("k")) - F.lit(1)
    group = at % F.element_at(bigint_array(groups), F.col("p") + 1) + F.element_at(
        bigint_array(first), F.col("p") + 1
    )
    return dealt.repartition(PARTS, "p").select(group.alias("group_id"), "w")


def _jvm_tables(dealt, packing, out: str) -> None:
    """The dealt rows' QIT (group and QI codes, sorted by group then codes) and ST
    (rows per group and sensitive code), each written as Parquet from one cache."""
    columns = packing.cols
    code = {
        c: F.expr(f"CAST((w div {stride}) % {size} AS INT)").alias(c)
        for c, stride, size in zip(columns, packing.strides, packing.sizes, strict=True)
    }
    kept = dealt.persist()
    qit = kept.sortWithinPartitions("group_id", "w")  # the bigint's order: the QI's first
    qit.select("group_id", *[code[c] for c in columns[:-2]]).write.mode("overwrite").parquet(
        f"{out}/jvm-qit"
    )
    st = kept.groupBy("group_id", code[columns[-2]]).count()
    st.write.mode("overwrite").parquet(f"{out}/jvm-st")
    kept.unpersist()


def _partition_pass(frame, keyed: bool = True) -> None:
    """`frame` shuffled by a JVM hash of its columns into PARTS tasks, each a Python
    pass; the hash a column of the shuffled rows (`keyed`), or an expression of them."""
    out = T.StructType([T.StructField("n", T.LongType())])
    key = F.pmod(F.xxhash64(*frame.columns), F.lit(PARTS))
    rows = (
        frame.withColumn("__p", key).repartition(PARTS, "__p")
        if keyed
        else frame.repartition(PARTS, key)
    )
    rows.mapInArrow(_rows_seen, out).agg(F.sum("n")).collect()


def _rows_seen(batches):
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def main(source: str) -> None:
    spark = get_session(SparkSettings())
    read = spark.read.parquet(source)
    first, second = read.columns[:2]
    tagged = T.StructType(read.schema.fields + [T.StructField("__p", T.IntegerType())])
    plans = {
        "read + Python pass + shuffle + Python pass": lambda: (
            spark.read.parquet(source)
            .mapInArrow(_tag, tagged)
            .groupBy("__p")
            .applyInPandas(_summary, "n long")
            .collect()
        ),
        "read + JVM key + shuffle + Python pass": lambda: (
            spark.read.parquet(source)
            .withColumn("__p", F.pmod(F.col(first) * 31 + F.col(second), F.lit(PARTS)))
            .groupBy("__p")
            .applyInPandas(_summary, "n long")
            .collect()
        ),
        "read + Python pass": lambda: (
            spark.read.parquet(source).mapInArrow(_tag, tagged).agg(F.count("*")).collect()
        ),
    }
    codes = spark.read.parquet(source).persist()
    out = tempfile.TemporaryDirectory(prefix="vpub-floor-")
    sizes = _sizes(codes)
    plans |= _numbering(codes, sizes) | _shard_counts(codes, sizes, out.name)
    print(f"{codes.count():,} rows, master {spark.sparkContext.master}")
    for name, plan in plans.items():
        plan()  # warm-up
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            plan()
            runs.append(time.perf_counter() - start)
        print(f"{name}: median {statistics.median(runs):.2f} s, runs", [round(r, 2) for r in runs])
    out.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
