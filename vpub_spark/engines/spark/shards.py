"""The plan's shards and counts as JVM expressions and aggregates: the shard of a row
(`kernels/partitioning.py`'s `ContentShards` and `QiShards`) as Spark SQL, so no row
travels to a Python worker to be tagged or counted. The expressions are the kernels'
NumPy arithmetic (Spark's `xxhash64`, `spark_xxhash64`); a test checks them equal."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ...kernels.partitioning import (
    COUNT_COLUMNS,
    FINGERPRINT,
    ROWS,
    SHARDS,
    QiShards,
    Sharding,
    content_columns,
    shard_key,
)
from ...kernels.sampling import OCCURRENCE


def code_hash_column(columns: Sequence[str], source: Mapping | None = None):
    """Spark's `xxhash64` of encoded columns (each the frame's column, or its expression
    in `source`): `kernels.partitioning.code_hash`."""
    from pyspark.sql import functions as F

    return F.xxhash64(
        *[_code(c, source).cast("long" if c == OCCURRENCE else "int") for c in columns]
    )


def _code(column: str, source: Mapping | None):
    """The frame's `column`, or its expression in `source`."""
    from pyspark.sql import functions as F

    return source[column] if source is not None else F.col(column)


def shard_column(
    sharding: Sharding, columns: Sequence[str], content_hash=None, source: Mapping | None = None
):
    """The shard of each row of a frame of `columns` (its content hash `content_hash`
    where the shard reads every content column), as `sharding.of` computes it.

    Args:
        sharding: the plan's sharding.
        columns: the frame's columns (with OCCURRENCE where the sharding reads it).
        content_hash: `code_hash_column` of the content columns, if already made.
        source: each column as an expression (e.g. unpacked from a bigint), if not
            the frame's own.

    Returns:
        A pyspark Column of int shards in [0, SHARDS).
    """
    from pyspark.sql import functions as F

    if isinstance(sharding, QiShards):
        pos, scale = F.lit(0.0), 1.0
        for a, d in zip(sharding.qi, sharding.sizes, strict=True):
            scale /= d
            pos = pos + _code(a, source).cast("double") * F.lit(scale)
        return F.least((pos * F.lit(float(SHARDS))).cast("int"), F.lit(SHARDS - 1))
    if content_hash is None or sharding.occurrence or sharding.columns is not None:
        content_hash = code_hash_column(sharding.hashed(list(columns)), source)
    key = F.lit(_wrapped(shard_key(sharding.seed)))  # the key as a bigint
    return F.pmod(F.xxhash64(key, content_hash), F.lit(SHARDS)).cast("int")


CELLS = 1 << 20
"""The most (shard, sensitive values) cells counted by one aggregate over the cells
themselves (`shard_count_frame`); beyond it each row is counted once per attribute."""


def shard_count_frame(
    data, sensitive: Sequence[str], sharding: Sharding, sizes: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """`kernels.partitioning.shard_counts` of the whole of `data` (a Spark DataFrame
    of codes, with OCCURRENCE where the sharding reads it), summed in one JVM
    aggregate, with each row's content hash summed in four 16-bit quarters (no sum
    overflows below 2**47 rows) for the fingerprint's two halves. Where the sensitive
    attributes' domains (`sizes`) give at most `CELLS` cells, the aggregate counts rows
    per shard and sensitive values, and the driver sums those into the kernel's counts
    (on 10M `sal` rows 3.4 s against 4.9 s for the per-attribute aggregate, warm:
    docs/explanation/performance.md); else each row is exploded into one cell per
    sensitive attribute and one for the row.

    Args:
        data: the rows.
        sensitive: the sensitive attributes counted per shard.
        sharding: the plan's sharding.
        sizes: the domain sizes of the sensitive attributes, if known.

    Returns:
        The counts, as `shard_counts` gives them (attr, shard, value, count).
    """
    from pyspark.sql import functions as F

    h = code_hash_column(content_columns(list(data.columns)))
    quarters = [F.shiftrightunsigned(h, 16 * q).bitwiseAND(F.lit(0xFFFF)) for q in range(4)]
    shard = shard_column(sharding, data.columns, h).alias("shard")
    cells = SHARDS * math.prod(max(int(sizes[s]), 1) for s in sensitive) if sizes else CELLS + 1
    if cells <= CELLS:
        counts, q = _cell_counts(data, sensitive, shard, quarters)
    else:
        counts, q = _exploded_counts(data, sensitive, shard, quarters)
    halves = [_wrapped(q[0] + (q[1] << 16)), _wrapped(q[2] + (q[3] << 16))]
    fingerprint = pd.DataFrame({"attr": FINGERPRINT, "shard": 0, "value": [0, 1], "count": halves})
    out = pd.concat([counts[list(COUNT_COLUMNS)], fingerprint], ignore_index=True)
    types = {"attr": "int32", "shard": "int32", "value": "int32", "count": "int64"}
    return out.astype(types)[list(COUNT_COLUMNS)]


def _sums(quarters):
    from pyspark.sql import functions as F

    return [F.count(F.lit(1)).alias("count")] + [
        F.sum(x).alias(f"q{i}") for i, x in enumerate(quarters)
    ]


def _quarter_sums(counts: pd.DataFrame) -> list[int]:
    return [int(counts[f"q{i}"].sum()) for i in range(4)]  # exact: Python integers


def _cell_counts(data, sensitive, shard, quarters) -> tuple[pd.DataFrame, list[int]]:
    """Rows per (shard, sensitive values), summed by the driver into the kernel's counts
    (attr ROWS, then each attribute's index), and the quarters' sums."""
    from pyspark.sql import functions as F

    values = [F.col(s).cast("int").alias(f"s{i}") for i, s in enumerate(sensitive)]
    cells = data.groupBy(shard, *values).agg(*_sums(quarters)).toPandas()
    parts = [cells.groupby("shard", as_index=False)["count"].sum().assign(attr=ROWS, value=0)]
    for i in range(len(sensitive)):
        per = cells.groupby(["shard", f"s{i}"], as_index=False)["count"].sum()
        parts.append(per.rename(columns={f"s{i}": "value"}).assign(attr=i))
    return pd.concat(parts, ignore_index=True), _quarter_sums(cells)


def _exploded_counts(data, sensitive, shard, quarters) -> tuple[pd.DataFrame, list[int]]:
    """The counts by one aggregate over each row exploded into its cells (one for the
    row, with its quarters, one per sensitive attribute), and the quarters' sums."""
    from pyspark.sql import functions as F

    none = [F.lit(0).cast("long")] * 4
    cells = [_cell(F.lit(ROWS), F.lit(0), quarters)] + [
        _cell(F.lit(i), F.col(s).cast("int"), none) for i, s in enumerate(sensitive)
    ]
    counts = (
        data.select(shard, F.explode(F.array(*cells)).alias("x"))
        .groupBy(F.col("x.attr").alias("attr"), "shard", F.col("x.value").alias("value"))
        .agg(*_sums([F.col(f"x.q{q}") for q in range(4)]))
        .toPandas()
    )
    return counts, _quarter_sums(counts)


def _cell(attr, value, quarters):
    from pyspark.sql import functions as F

    named = [x.alias(f"q{i}") for i, x in enumerate(quarters)]
    return F.struct(attr.alias("attr"), value.alias("value"), *named)


def _wrapped(x: int) -> int:
    """`x` mod 2**64 as a signed 64-bit integer (the in-process sums wrap alike)."""
    x %= 1 << 64
    return x - (1 << 64) if x >= 1 << 63 else x


def part_key_column(
    sharding: Sharding,
    columns: Sequence[str],
    key_of_shard: np.ndarray,
    source: Mapping | None = None,
):
    """Each row's partition key (`key_of_shard` at its shard, `shard_column` of the
    frame's `columns` or their expressions `source`), a JVM expression (the keys one SQL
    array literal: a column per key cost the driver a second at 1,024)."""
    from pyspark.sql import functions as F

    shard = shard_column(sharding, columns, source=source)
    return F.element_at(bigint_array(key_of_shard), shard + F.lit(1)).cast("long")


def bigint_array(values: Sequence[int] | np.ndarray):
    """`values` as one SQL array literal of bigints (a JVM expression)."""
    from pyspark.sql import functions as F

    return F.expr(f"array({', '.join(f'{int(v)}L' for v in values)})")
