"""`Engine.class_summary` on Spark (`vpub check`): the (QI, sensitive) counts aggregated
(or weighed in tasks, then aggregated), the classes measured in tasks
(applyInPandas over shards of the QI hash, `kernels/classes.py`); only the summary and
the smallest classes reach the driver."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F

from ...kernels.classes import COUNT, MEASURES, ClassJob, ClassSummary, class_measures, distribution
from .errors import spark_errors
from .schema import struct_type
from .session import default_parallelism


def _counts(loaded, job: ClassJob):
    """The (QI, sensitive) counts as a Spark frame: counted, or weighed in tasks."""
    cols = [*job.qi, job.sensitive]
    if job.weigh is None:
        return loaded.data.groupBy(*cols).agg(F.count(F.lit(1)).alias(COUNT))
    weigh = job.weigh
    schema = pa.schema([(a, pa.int32()) for a in cols] + [(COUNT, pa.int64())])
    weighed = loaded.data.mapInPandas(
        lambda frames: (weigh(f) for f in frames), struct_type(schema)
    )
    return weighed.groupBy(*cols).agg(F.sum(COUNT).alias(COUNT))


def _measure_shard(job: ClassJob, p: pd.Series):
    def run(frame: pd.DataFrame) -> pd.DataFrame:
        return class_measures(
            frame.drop(columns="__shard"), job.qi, job.sensitive, p, job.l, job.ordered
        )

    return run


def _measured(loaded, job: ClassJob, counts):
    """Every class's measures, in tasks (k in rows, not units)."""
    parts = max(1, default_parallelism(loaded.data.sparkSession))
    with spark_errors(loaded.source):
        totals = counts.groupBy(job.sensitive).agg(F.sum(COUNT).alias(COUNT)).toPandas()
    p = distribution(totals.set_index(job.sensitive)[COUNT])
    shards = counts.withColumn("__shard", F.pmod(F.hash(*job.qi), F.lit(parts)))
    schema = pa.schema(
        [(a, pa.int32()) for a in job.qi]
        + [("k", pa.int64()), ("distinct_l", pa.int64())]
        + [(c, pa.float64()) for c in MEASURES[2:]]
    )
    m = shards.groupBy("__shard").applyInPandas(_measure_shard(job, p), struct_type(schema))
    return m.withColumn("k", F.col("k") / F.lit(float(job.unit))) if job.unit != 1 else m


def class_summary(loaded, job: ClassJob) -> ClassSummary:
    """The classes' summary (`ClassSummary`); one aggregate, one small sort."""
    counts = _counts(loaded, job).persist()
    m = _measured(loaded, job, counts)
    with spark_errors(loaded.source):
        m = m.persist()
        agg = [
            F.count(F.lit(1)).alias("classes"),
            *[getattr(F, job.levels[c])(c).alias(c) for c in MEASURES],
            F.sum("k").alias("total"),
        ]
        fails = job.failing(m)  # Spark columns work with the same comparisons
        agg += [F.sum(bad.cast("int")).alias(f"f{i}") for i, bad in enumerate(fails.values())]
        agg += [
            F.sum(F.when(bad, F.col("k")).otherwise(0)).alias(f"r{i}")
            for i, bad in enumerate(fails.values())
        ]
        row = m.agg(*agg).collect()[0]
        smallest = m.orderBy("k", "distinct_l").limit(job.worst).toPandas()
        m.unpersist()
        counts.unpersist()
    return ClassSummary(
        {c: row[c] for c in MEASURES},
        {name: (int(row[f"f{i}"]), float(row[f"r{i}"])) for i, name in enumerate(fails)},
        int(row["classes"]),
        smallest,
        float(row["total"]),
    )
