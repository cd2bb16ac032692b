"""The KL divergence (000 §5.1) on Spark in one shuffle.

Every term of `utility/kl.py`'s decomposition (the source's entropy, each junction-tree
clique, each separator) is a sum over the source's distinct keys of one term's
attributes. So every source row emits, per term, its key packed into one int64 (mixed
radix over the domain sizes), counted per batch in the task; every file set of every
release table emits, per term it serves, that table's estimate at the keys it holds
(anatomy: sum_g n_g(x_Q) c_g(s) / |g|, within the file set since no group spans two
files; projections: their counts). One `groupBy(term, key)` adds both up, a second sums
p log p~ per term, and a few numbers reach the driver. It applies to releases whose
tables give estimates per file set (`ReleaseFiles.estimates`: anatomy and projection
tables) and whose keys fit in 62 bits; otherwise `spark_kl` takes one aggregate per term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..base import ReleaseFiles
from .errors import spark_errors
from .schema import struct_type

SCHEMA = pa.schema(
    [("term", pa.int32()), ("key", pa.int64()), ("src", pa.int64()), ("est", pa.float64())]
)


@dataclass(frozen=True)
class Term:
    """sign x sum over keys of p log(x / n): x is the source's own count (`table` None,
    the entropy) or `table`'s estimate; `strides` pack `cols` into one key."""

    sign: int
    cols: tuple[str, ...]
    strides: tuple[int, ...]
    table: int | None


def term_of(sign: int, cols, table: int | None, sizes: dict[str, int]) -> Term | None:
    """The term over `cols` with its packing strides (mixed radix over `sizes`), or None
    when its keys do not fit in 62 bits."""
    strides, width = [], 1
    for c in reversed(cols):
        strides.append(width)
        width *= max(sizes[c], 1)
    if width >= 1 << 62:
        return None
    return Term(sign, tuple(cols), tuple(reversed(strides)), table)


def one_pass_terms(release: ReleaseFiles, loaded) -> list[Term] | None:
    """The terms, or None when the one-pass form does not apply (see the docstring)."""
    if release.estimates is None:
        return None
    sizes = {a: loaded.dictionaries[a].size for a in loaded.names}
    attrs = [list(t["attributes"]) for t in release.tables]
    if any(a not in sizes for cols in attrs for a in cols):
        return None
    maybe = [term_of(1, list(loaded.names), None, sizes)]
    for i, cols, sign in release.terms:  # KL subtracts each term of log p~
        maybe.append(term_of(int(-sign), cols, i, sizes))
    terms = [t for t in maybe if t is not None]
    return terms if len(terms) == len(maybe) else None


def _keys(frame: pd.DataFrame, term: Term) -> np.ndarray:
    key = np.zeros(len(frame), dtype=np.int64)
    for c, stride in zip(term.cols, term.strides, strict=True):
        key += frame[c].to_numpy(np.int64) * stride
    return key


def _rows(term_id: int, key: np.ndarray, src: np.ndarray, est: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "term": np.full(len(key), term_id, np.int32),
            "key": key,
            "src": src.astype(np.int64),
            "est": est.astype(np.float64),
        }
    )


def source_partials(terms: list[Term]):
    """mapInArrow over the encoded source: per batch and term, the count of every key."""

    def run(batches):
        for b in batches:
            frame = b.to_pandas()
            out = []
            for i, t in enumerate(terms):
                key, count = np.unique(_keys(frame, t), return_counts=True)
                out.append(_rows(i, key, count, np.zeros(len(key))))
            yield pa.RecordBatch.from_pandas(
                pd.concat(out, ignore_index=True), schema=SCHEMA, preserve_index=False
            )

    return run


def release_partials(release: ReleaseFiles, terms: list[Term]):
    """A task of (table, file) units (`item_frame`): each file set's estimates per term,
    by the table kind's own estimate model on that file set's parts (`release.estimates`)."""
    estimates = release.estimates
    assert estimates is not None

    def run(batches):
        for todo in batches:
            out = [SCHEMA.empty_table().to_pandas()]
            for table, file in zip(
                todo.column("table").to_pylist(), todo.column("file").to_pylist(), strict=True
            ):
                mine = [(i, t) for i, t in enumerate(terms) if t.table == table]
                got = estimates(table, file, [list(t.cols) for _, t in mine])
                for (i, t), (keys, est) in zip(mine, got, strict=True):
                    out.append(_rows(i, _keys(keys, t), np.zeros(len(keys)), est))
            frame = pd.concat([o for o in out if len(o)] or out[:1], ignore_index=True)
            yield pa.RecordBatch.from_pandas(frame, schema=SCHEMA, preserve_index=False)

    return run


def _units(release: ReleaseFiles) -> list[tuple[int, str]]:
    units = []
    for i, entry in enumerate(release.tables):
        first = next(iter(entry["parts"]))
        units += [
            (i, f.name) for f in sorted(release.part_dir(entry["name"], first).glob("*.parquet"))
        ]
    return units


def one_pass_kl(engine, release: ReleaseFiles, loaded, terms: list[Term]) -> float:
    """The KL divergence in one shuffle (see the module docstring)."""
    from pyspark.sql import functions as F

    from .direct import item_frame

    spark, n = engine.spark, float(loaded.rows)
    units = _units(release)
    shape = struct_type(SCHEMA)
    estimates = item_frame(spark, units, ("table", "file"), release_partials(release, terms), shape)
    rows = loaded.data.mapInArrow(source_partials(terms), shape).unionByName(estimates)
    per_key = rows.groupBy("term", "key").agg(F.sum("src").alias("src"), F.sum("est").alias("est"))
    entropy = F.col("term") == 0
    x = F.when(entropy, F.col("src")).otherwise(F.col("est"))
    value = F.col("src") / n * F.log(x / n)
    with spark_errors("KL divergence"):
        sums = (
            per_key.where(F.col("src") > 0).groupBy("term").agg(F.sum(value).alias("v")).collect()
        )
    got = {int(r["term"]): float(r["v"] or 0.0) for r in sums}
    kl = sum(t.sign * got.get(i, 0.0) for i, t in enumerate(terms))
    covered = {a for entry in release.tables for a in entry["attributes"]}
    return kl + sum(math.log(loaded.dictionaries[a].size) for a in loaded.names if a not in covered)
