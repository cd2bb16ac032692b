"""Rows as the Spark engine moves them: numbered among rows of equal QI by a window over
packed bigints (`numbered_rows`), and shipped to the partition tasks packed into one
bigint a row, codes and index, their partition key computed from it (`shuffled_rows`),
where the domains fit in 62 bits (docs/explanation/performance.md)."""

from __future__ import annotations

from functools import partial

import numpy as np

from ...kernels.sampling import OCCURRENCE
from ..base import LoadedTable

WORDS = ("__k", "__r")
"""The numbering window's two words: the key columns' codes packed, the others'."""


def numbered_rows(data, columns, sizes=None, cache: bool = False, direct=None):
    """`data` with OCCURRENCE: the window the in-process engine's `with_occurrence`
    mirrors (rows equal in `columns`, None: every column, numbered in the order of every
    column; kernels/sampling.py). With the codes' domain `sizes`, where the key columns
    and the others each pack into one bigint (62 bits), the window shuffles and sorts
    those two words only (the same order: codes are below their sizes), and the columns
    are unpacked from them after it: on 10M `sal` rows 13.0 s against 16.6 s for the
    window carrying every column (`scripts/spark_floor.py`; docs/explanation/performance.md).
    With `direct` (the `DirectSource` whose encoded rows `data` is), the tasks that
    read the source pack the two words themselves (`word_batches`), so two bigints a
    row, not every code, cross from Python to the JVM.

    Returns:
        The numbered rows, and the frame cached for them with `cache` (the two words and
        OCCURRENCE where they pack: three bigints a row), else None.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from .kl import packed_key, packing_over

    every = list(data.columns)
    key = every if columns is None else list(columns)
    rest = [c for c in every if c not in key]
    by_key, by_rest = (
        (packing_over(key, sizes), packing_over(rest, sizes)) if sizes else (None, None)
    )
    if key and by_key is not None and by_rest is not None:
        packings = (by_key, by_rest)
        words = (
            _direct_words(data.sparkSession, direct, packings)
            if direct is not None
            else data.select(
                *[packed_key(p).alias(w) for p, w in zip(packings, WORDS, strict=True)]
            )
        )
        row = F.row_number().over(Window.partitionBy(WORDS[0]).orderBy(WORDS[1]))
        numbered = words.withColumn(OCCURRENCE, (row - 1).cast("long"))
        kept = persisted(numbered) if cache else None
        unpacked = _unpacked(WORDS[0], by_key) | _unpacked(WORDS[1], by_rest)
        made = kept if kept is not None else numbered
        return made.select(*[unpacked[c].alias(c) for c in every], OCCURRENCE), kept
    if key:
        window = Window.partitionBy(*key).orderBy(*every)
    else:
        window = Window.orderBy(*every)
    numbered = data.withColumn(OCCURRENCE, (F.row_number().over(window) - 1).cast("long"))
    if cache:
        numbered = persisted(numbered)
    return numbered, numbered if cache else None


def _direct_words(spark, direct, packings):
    """The window's two words made by the tasks that read `direct`'s files."""
    import pyarrow as pa

    from .direct import direct_frame
    from .schema import struct_type

    schema = struct_type(pa.schema([(w, pa.int64()) for w in WORDS]))
    return direct_frame(spark, direct, partial(word_batches, packings=packings), schema)


def word_batches(batches, packings):
    """In a task: each encoded batch as the window's two words, packed by `packings`
    as the JVM's `kl.packed_key` packs them (`kl.packed`: the same mixed radix)."""
    import pyarrow as pa

    from .kl import packed

    for b in batches:
        words = [pa.array(packed(b, p)) for p in packings]
        yield pa.RecordBatch.from_arrays(words, names=list(WORDS))


def persisted(frame):
    """`frame`, kept in memory (spilled to disk) once an action computes it."""
    from pyspark import StorageLevel

    return frame.persist(StorageLevel.MEMORY_AND_DISK)


def _unpacked(word: str, packing) -> dict:
    """Each of `packing`'s columns' codes (int; OCCURRENCE bigint) from the bigint
    column `word` that `kl.packed_key` made with it, as unnamed expressions."""
    from pyspark.sql import functions as F

    out = {}
    for c, stride, size in zip(packing.cols, packing.strides, packing.sizes, strict=True):
        kind = "BIGINT" if c == OCCURRENCE else "INT"
        out[c] = F.expr(f"CAST((`{word}` div {stride}) % {size} AS {kind})")
    return out


def shuffled_rows(loaded: LoadedTable, data, sharding, keys, shard_part):
    """The rows of `data` as a partition pass shuffles them into `len(keys)` partitions
    by their partition key (`keys[p]` for the rows of partition p, `shard_part` mapping
    shards to partitions; `shards.part_key_column`), and how a task makes (its pandas
    frame of codes, in the codes' columns and types, and its partition) from its rows:
    - where each row's codes and OCCURRENCE pack into one bigint (62 bits; OCCURRENCE
      below the rows), that bigint is all a row carries: its key is computed from it
      before the shuffle, and a task finds its partition from its first row's shard
      (`sharding.of`, the kernel the JVM expression equals);
    - else the codes packed into one bigint where they fit (`kl.packed_key`), else the
      code columns, with the key beside them.
    On 10M `sal` rows a shuffle and a Python pass took 7.7 s, against 8.1 s with the key
    beside the bigint and 13.2 s with the 8 columns (`scripts/spark_floor.py`,
    docs/explanation/performance.md).
    """
    from .kl import packing_of

    packing = packing_of(loaded)
    word = _word_packing(packing, data.columns, loaded.rows) if packing is not None else None
    if word is not None:
        return _one_word(loaded, data, sharding, keys, shard_part, word)
    return _with_key(loaded, data, sharding, keys, shard_part, packing)


def _word_packing(packing, columns, rows: int):
    """`packing` with OCCURRENCE as its last digit (below `rows`) where `columns` hold
    it, if the whole still fits in 62 bits; else None."""
    from .kl import packing_over

    if OCCURRENCE not in columns:
        return packing
    sizes = dict(zip(packing.cols, packing.sizes, strict=True)) | {OCCURRENCE: rows}
    return packing_over([*packing.cols, OCCURRENCE], sizes)


def _codes_frame(key: np.ndarray, packing, columns):
    """The codes of `columns` (int32) from packed keys, and every packed column."""
    import pandas as pd

    from .kl import unpacked

    codes = unpacked(key, packing)
    return pd.DataFrame({c: codes[c].astype(np.int32) for c in columns}), codes


def _one_word(loaded: LoadedTable, data, sharding, keys, shard_part, word):
    """`shuffled_rows` where a row is one bigint, its key computed from it. A row whose
    OCCURRENCE is not below the rows (it would carry into its codes) fails the job."""
    import pandas as pd
    from pyspark.sql import functions as F

    from .kl import KEY, packed_key
    from .shards import part_key_column

    columns, order = list(loaded.data.columns), list(data.columns)
    source = _unpacked(KEY, word)
    bigint = packed_key(word)
    if word.cols[-1] == OCCURRENCE:
        size = word.sizes[-1]
        failed = F.raise_error(F.lit(f"a row's index among equal rows is not below {size}"))
        bigint = F.when(F.col(OCCURRENCE) < F.lit(size), bigint).otherwise(failed)
    key = part_key_column(sharding, order, np.asarray(keys)[shard_part], source)

    def made(table):
        frame, codes = _codes_frame(table.column(KEY).to_numpy(), word, columns)
        first = pd.DataFrame({c: codes[c][:1] for c in order})
        return frame, int(shard_part[sharding.of(first)[0]])

    return data.select(bigint.alias(KEY)).repartition(len(keys), key), made


def _with_key(loaded: LoadedTable, data, sharding, keys, shard_part, packing):
    """`shuffled_rows` where a row carries its partition key beside its codes (packed
    into one bigint by `packing`, or the code columns where it is None)."""
    from .kl import KEY, packed_key
    from .shards import part_key_column

    columns = list(loaded.data.columns)
    key = part_key_column(sharding, data.columns, np.asarray(keys)[shard_part]).alias("__part")
    part_of_key = {int(k): p for p, k in enumerate(keys)}

    def made(table):
        part = part_of_key[table.column("__part")[0].as_py()]
        if packing is None:
            return table.select(columns).to_pandas(), part
        return _codes_frame(table.column(KEY).to_numpy(), packing, columns)[0], part

    rows = (
        data.select(*columns, key)
        if packing is None
        else data.select(packed_key(packing).alias(KEY), key)
    )
    return rows.repartition(len(keys), "__part"), made
