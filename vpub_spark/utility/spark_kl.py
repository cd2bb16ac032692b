"""KL divergence of a release on Spark (000 §5.1): the decomposition of
`utility/kl.py` computed with Spark joins and aggregates. Each term is the source
projected on a table's (or separator's) attributes, joined with that table's estimate
at the projected keys; anatomy estimates are `sum_g n_g(x_Q) * c_g(s) / |g|` from the
QIT and ST files. Release labels are encoded into the source's codes by the shared
pyarrow kernel; only per-term sums reach the driver."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from ..release.layout import COUNT, GROUP
from ..release.reader import Release
from .junction import junction_tree

EST = "__est"


def _encoded(spark, rel: Release, table: str, part: str, dictionaries):
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
    def __init__(self, spark, rel: Release, entry: dict, dictionaries):
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


def spark_kl(engine, release: Release, loaded) -> float:
    """KL of `release` against `loaded` (a Spark LoadedTable of the same source): in one
    pass (`one_pass.py`) when it applies, else one aggregate per term."""
    from .spark_kl_one_pass import one_pass_kl, one_pass_terms

    terms = one_pass_terms(release, loaded)
    if terms is not None:
        return one_pass_kl(engine, release, loaded, terms)
    return per_term_kl(engine, release, loaded)


def per_term_kl(engine, release: Release, loaded) -> float:
    """KL with one Spark aggregate (and join) per term of the decomposition."""
    from pyspark.sql import functions as F

    spark, n = engine.spark, float(loaded.rows)
    data = loaded.data.persist()  # the source is projected once per term

    def expected_log(cols: list[str], table: _Table | None) -> float:
        proj = data.groupBy(*cols).agg(F.count(F.lit(1)).alias("__c"))
        if table is None:  # the entropy term: p log p over distinct rows
            term = F.col("__c") / n * F.log(F.col("__c") / n)
        else:
            proj = table.marginal(proj, cols)
            term = F.col("__c") / n * F.log(F.col(EST) / n)
        return float(proj.agg(F.sum(term)).collect()[0][0] or 0.0)

    tables = [_Table(spark, release, e, loaded.dictionaries) for e in release.tables]

    kl = expected_log(list(loaded.names), None)
    covered: set[str] = set()
    for i, _, sep in junction_tree([t.attributes for t in tables]):
        kl -= expected_log(tables[i].attributes, tables[i])
        if sep:
            kl += expected_log(list(sep), tables[i])
        covered |= set(tables[i].attributes)
    data.unpersist()
    for t in tables:
        for df in t.parts.values():
            df.unpersist()
    return kl + sum(math.log(loaded.dictionaries[a].size) for a in loaded.names if a not in covered)


def release_kl_on_spark(engine, release: str, source: str) -> float:
    """`vpub utility --engine spark`: KL of the release at `release` against `source`,
    read with the table spec its manifest records."""
    from ..release.reader import open_release
    from ..tablespec import table_spec_from_dict

    rel = open_release(release)
    loaded = engine.load(source, table_spec_from_dict(rel.manifest["source"]["table_spec"]))
    return spark_kl(engine, rel, loaded)
