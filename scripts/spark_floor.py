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
- the shard counts over the numbered rows, cached: each row exploded into a cell per
  sensitive attribute (the last column) and one for the row, or counted once per
  (shard, sensitive value) cell, as `engines/spark/shards.py` counts them;
- a partition pass over the cached codes (a JVM key, a shuffle into 64 tasks, a Python
  pass each) with the 8 columns, with each row packed into one bigint beside its key,
  and with the key computed from the bigint before the shuffle, so that the bigint is
  all a row carries, as the partition tasks get their rows (`shuffled_rows`)
  (docs/benchmarks/performance.md).

Usage: python scripts/spark_floor.py SOURCE
"""

import statistics
import sys
import time

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from vpub_spark.engines.settings import SparkSettings
from vpub_spark.engines.spark.session import get_session

PARTS = 64


def _tag(batches):
    for b in batches:
        key = (b.column(0).to_numpy() * 31 + b.column(1).to_numpy()) % PARTS
        yield b.append_column("__p", pa.array(key.astype(np.int32)))


def _summary(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"n": [len(frame)]})


def _numbering(data) -> dict:
    """The numbering plans over `data` (cached codes; their sizes from the maxima)."""
    from pyspark.sql import Window

    cols = data.columns
    sizes = data.agg(*[(F.max(c) + 1).alias(c) for c in cols]).first().asDict()

    def packed(names):
        x = F.lit(0).cast("long")
        for c in names:
            x = x * F.lit(int(sizes[c])) + F.col(c).cast("long")
        return x

    qi, rest = packed(cols[:-1]), packed(cols[-1:])

    def cached(frame):
        def run():
            made = frame().persist()
            made.count()
            made.unpersist(blocking=True)

        return run

    window = Window.partitionBy(qi).orderBy(rest)
    words = data.select(qi.alias("k"), rest.alias("r"))
    on_words = Window.partitionBy("k").orderBy("r")
    every = packed(cols)
    return {
        "numbering: shuffle by the QI": cached(lambda: data.repartition(qi)),
        "numbering: shuffle + sort": cached(
            lambda: data.repartition(qi).sortWithinPartitions(qi, rest)
        ),
        "numbering: window": cached(lambda: data.withColumn("n", F.row_number().over(window))),
        "numbering: window on the two words": cached(
            lambda: words.withColumn("n", F.row_number().over(on_words))
        ),
        "cached codes + JVM key + shuffle + Python pass": lambda: _partition_pass(data),
        "the same, each row packed into one bigint beside its key": lambda: _partition_pass(
            data.select(every.alias("row"))
        ),
        "the same, the key computed from the bigint": lambda: _partition_pass(
            data.select(every.alias("row")), keyed=False
        ),
    }


def _shard_counts(data) -> dict:
    """The shard counts of the numbered rows, exploded per attribute and by cells."""
    from pyspark.sql import Window

    from vpub_spark.engines.spark.shards import shard_count_frame
    from vpub_spark.kernels.partitioning import ContentShards
    from vpub_spark.kernels.sampling import OCCURRENCE

    cols = data.columns
    window = Window.partitionBy(*cols[:-1]).orderBy(cols[-1])
    numbered = data.withColumn(OCCURRENCE, (F.row_number().over(window) - 1).cast("long"))
    numbered = numbered.persist()
    numbered.count()
    sharding = ContentShards(7, tuple(cols[:-1]), occurrence=True)
    size = {cols[-1]: data.agg(F.max(cols[-1])).first()[0] + 1}
    return {
        "shard counts: each row exploded per attribute": lambda: shard_count_frame(
            numbered, cols[-1:], sharding
        ),
        "shard counts: by (shard, sensitive value) cells": lambda: shard_count_frame(
            numbered, cols[-1:], sharding, size
        ),
    }


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
    plans |= _numbering(codes) | _shard_counts(codes)
    print(f"{codes.count():,} rows, master {spark.sparkContext.master}")
    for name, plan in plans.items():
        plan()  # warm-up
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            plan()
            runs.append(time.perf_counter() - start)
        print(f"{name}: median {statistics.median(runs):.2f} s, runs", [round(r, 2) for r in runs])


if __name__ == "__main__":
    main(sys.argv[1])
