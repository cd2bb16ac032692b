"""The Spark engine's loading path: read, profile in one aggregate pass, encode with
`mapInArrow` using the shared kernel (no row ever reaches the driver)."""

from __future__ import annotations

from functools import reduce
from pathlib import Path

from ...encoding import EncodingPlan, encode_batch
from ...model import TableSpec
from ..base import Format, LoadedTable, check_columns, detect_format, plan_encoding
from .session import SparkSettings, get_session


def struct_type(schema):
    """A pyspark StructType for a pyarrow schema (int32/int64/float64/string columns)."""
    from pyspark.sql import types as T

    kinds = {"int32": T.IntegerType(), "int64": T.LongType(), "double": T.DoubleType(), "string": T.StringType()}
    return T.StructType([T.StructField(f.name, kinds[str(f.type)], True) for f in schema])


def _encoder(plan: EncodingPlan):
    def run(batches):
        for b in batches:
            yield encode_batch(b, plan)

    return run


class SparkEngine:
    name = "spark"

    def __init__(self, settings: SparkSettings | None = None):
        self.settings = settings or SparkSettings()

    @property
    def spark(self):
        return get_session(self.settings)

    def read(self, path: str, spec: TableSpec, fmt: Format | None = None):
        """The spec's source columns as trimmed strings (the raw form every engine compares)."""
        from pyspark.sql import functions as F

        kind = detect_format(path, fmt)
        p = str(Path(path))
        reader = self.spark.read
        if Path(path).is_dir():  # only the data files, like the in-process engine
            reader = reader.option("pathGlobFilter", "*.csv*" if kind == "csv" else "*.parquet").option("recursiveFileLookup", True)
        if kind == "csv":
            df = reader.option("header", True).option("inferSchema", False).csv(p)
        else:
            df = reader.parquet(p)
        check_columns(df.columns, spec, path)
        cols = sorted({a.column for a in spec.attributes})
        return df.select(*[F.trim(df[c].cast("string")).alias(c) for c in cols])

    def load(self, path: str, spec: TableSpec, fmt: Format | None = None) -> LoadedTable:
        from pyspark.sql import functions as F

        df = self.read(path, spec, fmt)
        tokens = list(spec.missing_values)
        missing = {a.name: df[a.column].isNull() | df[a.column].isin(tokens) for a in spec.attributes}
        any_missing = reduce(lambda x, y: x | y, missing.values())
        cells = [
            F.struct(F.lit(i).alias("a"), F.when(~any_missing, df[a.column]).alias("v"))
            for i, a in enumerate(spec.attributes)
        ]
        cells.append(F.struct(F.lit(-1).alias("a"), F.when(any_missing, "1").otherwise("0").alias("v")))
        agg = (
            df.select(F.explode(F.array(*cells)).alias("x"))
            .groupBy(F.col("x.a").alias("a"), F.col("x.v").alias("v"))
            .count()
            .collect()  # small: one row per distinct value of each attribute
        )
        raw: dict[str, dict[str, int]] = {a.name: {} for a in spec.attributes}
        rows = missing_rows = 0
        for r in agg:
            if r["a"] == -1:
                rows += r["count"]
                missing_rows += r["count"] if r["v"] == "1" else 0
            elif r["v"] is not None:
                raw[spec.attributes[r["a"]].name][r["v"]] = r["count"]
        plan, dictionaries, counts = plan_encoding(spec, raw, rows, missing_rows)
        encoded = df.mapInArrow(_encoder(plan), struct_type(plan.schema))
        return LoadedTable(spec, dictionaries, counts, rows, missing_rows, encoded, source=str(path))

    # --- data sets -------------------------------------------------------------
    def code_counts(self, df, dictionaries) -> dict:
        """Per attribute, the count of every code (one aggregate pass)."""
        import numpy as np
        from pyspark.sql import functions as F

        names = list(df.columns)
        cells = [F.struct(F.lit(i).alias("a"), F.col(n).alias("v")) for i, n in enumerate(names)]
        agg = df.select(F.explode(F.array(*cells)).alias("x")).groupBy("x.a", "x.v").count().collect()
        counts = {n: np.zeros(dictionaries[n].size, dtype=np.int64) for n in names}
        for r in agg:
            counts[names[r["a"]]][r["v"]] = r["count"]
        return counts

    def sample(self, loaded: LoadedTable, n: int, seed: int) -> LoadedTable:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from ...kernels.sampling import OCCURRENCE, sample_keys

        if n >= loaded.rows:
            return loaded
        cols = list(loaded.names)
        occ = F.row_number().over(Window.partitionBy(*cols).orderBy(*cols)) - 1
        df = loaded.data.withColumn(OCCURRENCE, occ.cast("long"))

        def keys(batches):
            import pyarrow as pa

            for b in batches:
                frame = b.to_pandas()
                yield pa.RecordBatch.from_pandas(frame.assign(__key=sample_keys(frame, seed).view("int64")), preserve_index=False)

        from pyspark.sql import types as T

        schema = T.StructType(df.schema.fields + [T.StructField("__key", T.LongType())])
        keyed = df.mapInArrow(keys, schema)
        # hash order as unsigned 64-bit, like the in-process engine
        unsigned = F.col("__key").bitwiseXOR(F.lit(-(1 << 63)))
        picked = keyed.orderBy(unsigned, *cols, OCCURRENCE).limit(n).select(*cols).cache()
        counts = self.code_counts(picked, loaded.dictionaries)
        return LoadedTable(loaded.spec, loaded.dictionaries, counts, n, 0, picked, loaded.source)

    def write_decoded(self, loaded: LoadedTable, directory: Path) -> None:
        from ...encoding import decode_batch

        dictionaries = loaded.dictionaries

        def decode(batches):
            for b in batches:
                yield decode_batch(b, dictionaries)

        from pyspark.sql import types as T

        schema = T.StructType([T.StructField(n, T.StringType()) for n in loaded.names])
        loaded.data.mapInArrow(decode, schema).write.parquet(str(directory))

    def generate(self, name: str, rows: int, seed: int, directory: Path, progress=None) -> None:
        from ...datasets.synthetic import blocks, generate_block, schema

        nblocks = blocks(rows)
        parts = max(1, min(nblocks, self.spark.sparkContext.defaultParallelism * 4))

        def make(batches):
            for b in batches:
                for block in b.column(0).to_pylist():
                    yield generate_block(name, seed, rows, block)

        from pyspark.sql import types as T

        out = T.StructType([T.StructField(a, T.IntegerType()) for a, _ in schema(name)])
        self.spark.range(nblocks, numPartitions=parts).mapInArrow(make, out).write.parquet(str(directory))
