"""The KL divergence (000 §5.1) on Spark in one shuffle.

Every term of `utility/kl.py`'s decomposition (the source's entropy, each junction-tree
clique, each separator) is a sum over the source's distinct keys of one term's
attributes. So every source row emits, per term, its key packed into one int64 (mixed
radix over the domain sizes), counted per batch in the task; every file set of every
release table emits, per term it serves, that table's estimate at the keys it holds
(anatomy: sum_g n_g(x_Q) c_g(s) / |g|, within the file set since no group spans two
files; projections: their counts). One `groupBy(term, key)` adds both up, a second sums
p log p~ per term, and a few numbers reach the driver. It applies to releases of
anatomy and projection tables whose keys fit in 62 bits; otherwise `spark_kl` takes one
aggregate per term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..estimate.codes import EST
from ..estimate.models import AnatomyModel, ProjectionModel
from ..release.kinds import table_kind
from ..release.reader import Release
from .junction import log_terms

SCHEMA = pa.schema([("term", pa.int32()), ("key", pa.int64()), ("src", pa.int64()), ("est", pa.float64())])  # fmt: skip
KINDS = ("anatomy", "projection")


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


def one_pass_terms(release: Release, loaded) -> list[Term] | None:
    """The terms, or None when the one-pass form does not apply (see the docstring)."""
    if any(t.get("kind") not in KINDS for t in release.tables):
        return None
    sizes = {a: loaded.dictionaries[a].size for a in loaded.names}
    attrs = [list(t["attributes"]) for t in release.tables]
    if any(a not in sizes for cols in attrs for a in cols):
        return None
    maybe = [term_of(1, list(loaded.names), None, sizes)]
    for i, cols, sign in log_terms(attrs):  # KL subtracts each term of log p~
        maybe.append(term_of(int(-sign), cols, i, sizes))
    terms = [t for t in maybe if t is not None]
    return terms if len(terms) == len(maybe) else None


def _keys(frame: pd.DataFrame, term: Term) -> np.ndarray:
    key = np.zeros(len(frame), dtype=np.int64)
    for c, stride in zip(term.cols, term.strides, strict=True):
        key += frame[c].to_numpy(np.int64) * stride
    return key


def _rows(term_id: int, key: np.ndarray, src: np.ndarray, est: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"term": np.full(len(key), term_id, np.int32), "key": key, "src": src.astype(np.int64), "est": est.astype(np.float64)})  # fmt: skip


def source_partials(terms: list[Term]):
    """mapInArrow over the encoded source: per batch and term, the count of every key."""

    def run(batches):
        for b in batches:
            frame = b.to_pandas()
            out = []
            for i, t in enumerate(terms):
                key, count = np.unique(_keys(frame, t), return_counts=True)
                out.append(_rows(i, key, count, np.zeros(len(key))))
            yield pa.RecordBatch.from_pandas(pd.concat(out, ignore_index=True), schema=SCHEMA, preserve_index=False)  # fmt: skip

    return run


def release_partials(path: str, terms: list[Term], labels: dict[str, list[str]]):
    """A task of (table, file) units (`item_frame`): each file set's estimates per term,
    by the table kind's own estimate model (`estimates`) on that file set's parts."""
    from ..release.reader import open_release

    def run(batches):
        rel = open_release(path)
        for todo in batches:
            out = [SCHEMA.empty_table().to_pandas()]
            for table, file in zip(todo.column("table").to_pylist(), todo.column("file").to_pylist(), strict=True):  # fmt: skip
                entry = rel.tables[table]
                parts = {p: pq.read_table(rel.part_dir(entry["name"], p) / file).to_pandas() for p in entry["parts"]}  # fmt: skip
                model = table_kind(entry["kind"]).model(entry, parts, labels)  # in source codes
                assert isinstance(model, AnatomyModel | ProjectionModel)  # KINDS
                for i, t in enumerate(terms):
                    if t.table == table:
                        est = model.estimates(list(t.cols))
                        out.append(_rows(i, _keys(est, t), np.zeros(len(est)), est[EST].to_numpy(np.float64)))  # fmt: skip
            frame = pd.concat([o for o in out if len(o)] or out[:1], ignore_index=True)
            yield pa.RecordBatch.from_pandas(frame, schema=SCHEMA, preserve_index=False)

    return run


def _units(release: Release) -> list[tuple[int, str]]:
    units = []
    for i, entry in enumerate(release.tables):
        first = next(iter(entry["parts"]))
        units += [(i, f.name) for f in sorted(release.part_dir(entry["name"], first).glob("*.parquet"))]  # fmt: skip
    return units


def one_pass_kl(engine, release: Release, loaded, terms: list[Term]) -> float:
    """The KL divergence in one shuffle (see the module docstring)."""
    from pyspark.sql import functions as F

    from ..engines.spark.direct import item_frame
    from ..engines.spark.engine import spark_errors
    from ..engines.spark.schema import struct_type

    spark, n = engine.spark, float(loaded.rows)
    labels = {a: list(loaded.dictionaries[a].labels) for a in loaded.names}
    units = _units(release)
    shape = struct_type(SCHEMA)
    estimates = item_frame(spark, units, ("table", "file"), release_partials(str(release.path), terms, labels), shape)  # fmt: skip
    rows = loaded.data.mapInArrow(source_partials(terms), shape).unionByName(estimates)
    per_key = rows.groupBy("term", "key").agg(F.sum("src").alias("src"), F.sum("est").alias("est"))
    entropy = F.col("term") == 0
    x = F.when(entropy, F.col("src")).otherwise(F.col("est"))
    value = F.col("src") / n * F.log(x / n)
    with spark_errors("KL divergence"):
        sums = per_key.where(F.col("src") > 0).groupBy("term").agg(F.sum(value).alias("v")).collect()  # fmt: skip
    got = {int(r["term"]): float(r["v"] or 0.0) for r in sums}
    kl = sum(t.sign * got.get(i, 0.0) for i, t in enumerate(terms))
    covered = {a for entry in release.tables for a in entry["attributes"]}
    return kl + sum(math.log(loaded.dictionaries[a].size) for a in loaded.names if a not in covered)
