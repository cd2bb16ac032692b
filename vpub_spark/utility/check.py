"""`vpub check` (issue 20): k-anonymity, distinct / entropy / recursive (c, l)-diversity
and t-closeness of any table (CSV or Parquet, from any tool), per equivalence class
(`kernels/classes.py`), on either engine. On Spark the (QI, sensitive) counts are
aggregated and the classes measured in tasks (applyInPandas over shards of the QI
hash); only the summary and the worst classes reach the driver.

Every column is read as a label (no value is treated as missing: a suppressed `*` is
a value like any other); `ordered` reads the sensitive attribute as numbers, in their
order, for the ordered EMD.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import SpecError
from ..kernels.classes import COUNT, MEASURES, class_counts, class_measures
from ..tablespec import table_spec_from_dict

WORST = 5


@dataclass(frozen=True)
class Model:
    """Thresholds to check (None: only measured)."""

    k: int | None = None
    l: int | None = None  # distinct l-diversity
    entropy_l: float | None = None
    c: float | None = None  # recursive (c, l): with `l` (default 2)
    t: float | None = None

    def failing(self, m: pd.DataFrame) -> dict[str, pd.Series]:
        """Per requested model, which classes fail it."""
        out = {}
        if self.k is not None:
            out[f"k-anonymity (k = {self.k})"] = m["k"] < self.k
        if self.l is not None:
            out[f"distinct l-diversity (l = {self.l})"] = m["distinct_l"] < self.l
        if self.entropy_l is not None:
            out[f"entropy l-diversity (l = {self.entropy_l:g})"] = m["entropy_l"] < self.entropy_l - 1e-12  # fmt: skip
        if self.c is not None:
            out[f"recursive (c, l)-diversity (c = {self.c:g}, l = {self.l or 2})"] = ~(m["recursive_c"] < self.c)  # fmt: skip
        if self.t is not None:
            out[f"t-closeness (t = {self.t:g})"] = m["t"] > self.t + 1e-12
        return out


@dataclass
class CheckReport:
    rows: int
    classes: int
    qi: list[str]
    sensitive: str
    measured: dict[str, float]  # the table's level of each measure
    checks: dict[str, dict] = field(default_factory=dict)  # model -> passed, classes, rows
    worst: list[dict] = field(default_factory=list)  # the smallest classes, decoded

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks.values())

    def as_dict(self) -> dict:
        return asdict(self) | {"passed": self.passed}


def spec_for(qi: list[str], sensitive: str, ordered: bool) -> dict:
    if sensitive in qi:
        raise SpecError(f"{sensitive} is both a quasi-identifier and the sensitive attribute")
    attrs = [{"name": a} for a in qi] + [{"name": sensitive} | ({"kind": "numeric"} if ordered else {})]  # fmt: skip
    return {"name": "checked", "attributes": attrs, "missing_values": []}


def _measured(level, l: int) -> dict[str, float]:
    """The table's level of each measure from `level` (the least k, distinct and entropy
    l; the largest recursive c bound and t), as the report names them."""
    return {"k": int(level["k"]), "distinct_l": int(level["distinct_l"]), "entropy_l": float(level["entropy_l"]), f"recursive_c (l = {l})": float(level["recursive_c"]), "t": float(level["t"])}  # fmt: skip


def _summary(m: pd.DataFrame, model: Model, l: int) -> tuple[dict, dict]:
    least, most = m[["k", "distinct_l", "entropy_l"]].min(), m[["recursive_c", "t"]].max()
    measured = _measured(pd.concat([least, most]), l)
    checks = {name: {"passed": not bad.any(), "failing_classes": int(bad.sum()), "rows_in_failing": int(m.loc[bad, "k"].sum())} for name, bad in model.failing(m).items()}  # fmt: skip
    return measured, checks


def check_table(engine, path: str, qi: list[str], sensitive: str, model: Model, ordered: bool = False, worst: int = WORST) -> CheckReport:  # fmt: skip
    """Measure (and check against `model`) the table at `path`."""
    loaded = engine.load(path, table_spec_from_dict(spec_for(qi, sensitive, ordered)))
    counts = loaded.counts[sensitive].astype(float)
    p = pd.Series(counts / counts.sum(), index=np.arange(len(counts)))
    l = model.l or 2
    if engine.name == "spark":
        measured, checks, classes, small = _on_spark(engine, loaded, qi, sensitive, p, l, ordered, model, worst)  # fmt: skip
    else:
        m = class_measures(class_counts(loaded.data, qi, sensitive), qi, sensitive, p, l, ordered)
        (measured, checks), classes = _summary(m, model, l), len(m)
        small = m.nsmallest(worst, ["k", "distinct_l"])
    decoded = small.assign(**{a: [loaded.dictionaries[a].labels[int(c)] for c in small[a]] for a in qi})  # fmt: skip
    return CheckReport(loaded.rows, classes, qi, sensitive, measured, checks, decoded.to_dict("records"))  # fmt: skip


def _measure_shard(qi: list[str], sensitive: str, p: pd.Series, l: int, ordered: bool):
    def run(frame: pd.DataFrame) -> pd.DataFrame:
        return class_measures(frame.drop(columns="__shard"), qi, sensitive, p, l, ordered)

    return run


def _on_spark(engine, loaded, qi, sensitive, p, l, ordered, model: Model, worst: int):
    """The counts and the per-class measures in Spark; a summary back."""
    from pyspark.sql import functions as F

    from ..engines.spark.engine import spark_errors
    from ..engines.spark.schema import struct_type

    parts = max(1, engine.spark.sparkContext.defaultParallelism)
    counts = loaded.data.groupBy(*qi, sensitive).agg(F.count(F.lit(1)).alias(COUNT))
    shards = counts.withColumn("__shard", F.pmod(F.hash(*qi), F.lit(parts)))
    schema = pa.schema([(a, pa.int32()) for a in qi] + [("k", pa.int64()), ("distinct_l", pa.int64())] + [(c, pa.float64()) for c in MEASURES[2:]])  # fmt: skip
    m = shards.groupBy("__shard").applyInPandas(_measure_shard(qi, sensitive, p, l, ordered), struct_type(schema))  # fmt: skip
    with spark_errors(loaded.source):
        m = m.persist()
        agg = [F.count(F.lit(1)).alias("classes"), F.min("k").alias("k"), F.min("distinct_l").alias("distinct_l"), F.min("entropy_l").alias("entropy_l"), F.max("recursive_c").alias("recursive_c"), F.max("t").alias("t")]  # fmt: skip
        fails = model.failing(m)  # Spark columns work with the same comparisons
        agg += [F.sum(bad.cast("int")).alias(f"f{i}") for i, bad in enumerate(fails.values())]
        agg += [F.sum(F.when(bad, F.col("k")).otherwise(0)).alias(f"r{i}") for i, bad in enumerate(fails.values())]  # fmt: skip
        row = m.agg(*agg).collect()[0]
        small = m.orderBy("k", "distinct_l").limit(worst).toPandas()
        m.unpersist()
    measured = _measured(row, l)
    checks = {name: {"passed": int(row[f"f{i}"]) == 0, "failing_classes": int(row[f"f{i}"]), "rows_in_failing": int(row[f"r{i}"])} for i, name in enumerate(fails)}  # fmt: skip
    return measured, checks, int(row["classes"]), small
