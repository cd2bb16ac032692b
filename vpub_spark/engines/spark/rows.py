"""Rows as the Spark engine moves them: numbered among rows of equal QI by a window over
packed bigints (`numbered_rows`), and shipped to the partition tasks packed into one
bigint a row (`shuffled_rows`), where the codes' domains fit in 62 bits
(docs/explanation/performance.md)."""

from __future__ import annotations

import math

import numpy as np

from ..base import LoadedTable


def numbered_rows(data, columns, sizes=None, cache: bool = False):
    """`data` with OCCURRENCE: the window the in-process engine's `with_occurrence`
    mirrors (rows equal in `columns`, None: every column, numbered in the order of every
    column; kernels/sampling.py). With the codes' domain `sizes`, where the key columns
    and the others each pack into one bigint (62 bits), the window shuffles and sorts
    those two words only (the same order: codes are below their sizes), and the columns
    are unpacked from them after it: on 10M `sal` rows 14.6 s against 19.2 s for the
    window carrying every column (`scripts/spark_floor.py`; docs/explanation/performance.md).

    Returns:
        The numbered rows, and the frame cached for them with `cache` (the two words and
        OCCURRENCE where they pack: three bigints a row), else None.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from ...kernels.sampling import OCCURRENCE

    every = list(data.columns)
    key = every if columns is None else list(columns)
    rest = [c for c in every if c not in key]
    if key and sizes is not None and _packs(key, sizes) and _packs(rest, sizes):
        words = data.select(_packed(key, sizes).alias("__k"), _packed(rest, sizes).alias("__r"))
        row = F.row_number().over(Window.partitionBy("__k").orderBy("__r"))
        numbered = words.withColumn(OCCURRENCE, (row - 1).cast("long"))
        kept = persisted(numbered) if cache else None
        unpacked = _unpacked("__k", key, sizes) | _unpacked("__r", rest, sizes)
        made = kept if kept is not None else numbered
        return made.select(*[unpacked[c] for c in every], OCCURRENCE), kept
    if key:
        window = Window.partitionBy(*key).orderBy(*every)
    else:
        window = Window.orderBy(*every)
    numbered = data.withColumn(OCCURRENCE, (F.row_number().over(window) - 1).cast("long"))
    if cache:
        numbered = persisted(numbered)
    return numbered, numbered if cache else None


def persisted(frame):
    """`frame`, kept in memory (spilled to disk) once an action computes it."""
    from pyspark import StorageLevel

    return frame.persist(StorageLevel.MEMORY_AND_DISK)


def _packs(columns, sizes) -> bool:
    """Whether `columns`' codes pack into one bigint (`_packed`) with no overflow."""
    if not all(c in sizes for c in columns):
        return False
    return math.prod(max(int(sizes[c]), 1) for c in columns) < 1 << 62


def _packed(columns, sizes):
    """The codes of `columns` as one bigint, in their lexicographic order."""
    from pyspark.sql import functions as F

    x = F.lit(0).cast("long")
    for c in columns:
        x = x * F.lit(max(int(sizes[c]), 1)) + F.col(c).cast("long")
    return x


def _unpacked(word: str, columns, sizes) -> dict:
    """Each of `columns`' int codes from the bigint column `word` that `_packed` made."""
    from pyspark.sql import functions as F

    out, stride = {}, 1
    for c in reversed(list(columns)):
        size = max(int(sizes[c]), 1)
        out[c] = F.expr(f"CAST((`{word}` div {stride}) % {size} AS INT)").alias(c)
        stride *= size
    return out


def shuffled_rows(loaded: LoadedTable, data, key):
    """The rows of `data` as a partition pass shuffles them, with their partition `key`
    as `__part`, and how a task makes its pandas frame of codes from them: each row's
    codes packed into one bigint where the domains fit in 62 bits (`kl.packed_key`,
    unpacked by NumPy in the task), else the code columns. On 10M `sal` rows a shuffle
    and a Python pass took 8.8 s against 14.0 s for the 8 columns
    (`scripts/spark_floor.py`). The frame's columns and types are the codes'."""
    import pandas as pd

    from .kl import KEY, packed_key, packing_of, unpacked

    columns = list(loaded.data.columns)
    packing = packing_of(loaded)
    if packing is None:
        rows = data.select(*columns, key.alias("__part"))
        return rows, lambda table: table.select(columns).to_pandas()

    def frame_of(table) -> pd.DataFrame:
        codes = unpacked(table.column(KEY).to_numpy(), packing)
        return pd.DataFrame({c: codes[c].astype(np.int32) for c in columns})

    return data.select(packed_key(packing).alias(KEY), key.alias("__part")), frame_of
