"""The Spark engine's loading path: read, profile in one aggregate pass, encode with
`mapInArrow` using the shared kernel (no row ever reaches the driver)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...encoding import EncodingPlan, encode_batch
from ...errors import SpecError
from ...frames import FrameInput
from ...kernels.classes import ClassJob, ClassSummary
from ...model import TableSpec
from ...storage import is_remote
from ..base import (
    LoadedTable,
    ReleaseFiles,
    check_columns,
    plan_encoding,
)
from ..files import data_files, detect_format
from .direct import DirectSource, direct_frame, raw_frame, readable_directly
from .errors import spark_errors
from .read import (
    as_arrow_csv,
    check_decoded,
    check_footers,
    files_frame,
    read_csv,
    read_object,
    store_frame,
)
from .rows import numbered_rows, persisted, shuffled_rows
from .schema import struct_type
from .session import SparkSettings, default_parallelism, get_session


def _encoder(plan: EncodingPlan):
    def run(batches):
        for b in batches:
            yield encode_batch(b, plan)

    return run


def spark_hash_long(values: np.ndarray, seed: int = 42) -> np.ndarray:
    """Spark's `hash(x)` of a bigint column (Murmur3_x86_32.hashLong with seed 42), for
    int64 `values`, as int32: a test checks it against Spark."""
    c1, c2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)

    def rotl(x: np.ndarray, r: int) -> np.ndarray:
        return (x << np.uint32(r)) | (x >> np.uint32(32 - r))

    def mix(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
        k1 = rotl(k1 * c1, 15) * c2
        h1 = rotl(h1 ^ k1, 13)
        return h1 * np.uint32(5) + np.uint32(0xE6546B64)

    with np.errstate(over="ignore"):
        v = values.astype(np.int64).view(np.uint64)
        low, high = (
            (v & np.uint64(0xFFFFFFFF)).astype(np.uint32),
            (v >> np.uint64(32)).astype(np.uint32),
        )
        h = mix(mix(np.full(len(v), seed, dtype=np.uint32), low), high) ^ np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h.view(np.int32)


class SparkEngine:
    name = "spark"
    reads_object_stores = True
    audits_in_tasks = True

    def __init__(self, settings: SparkSettings | None = None, session=None):
        """Args:
        settings: how to build the session (`get_session`).
        session: a session to use instead (a Spark DataFrame's, `frames.py`)."""
        self.settings = settings or SparkSettings()
        self._session = session
        self._numbered: tuple | None = None  # (data, sharding, data numbered, its cache)
        self._uncached: list = []  # data that `persist` marked and no pass has read yet

    @property
    def spark(self):
        """The session (started on first use)."""
        return self._session if self._session is not None else get_session(self.settings)

    def start(self) -> float:
        """Start the session now, outside any timed step; its start-up time in seconds."""
        import time

        t0 = time.perf_counter()
        _ = self.spark
        return time.perf_counter() - t0

    def read(self, path: str, spec: TableSpec, fmt: str | None = None):
        """The spec's source columns as stored (CSV: strings, read as the in-process
        engine reads them: `read_csv`); the kernels normalize them. Parquet footers are
        read here first, so a damaged file is an error naming it (`check_footers`)."""
        if is_remote(path):
            return self._read_store(path, spec, fmt)
        kind = detect_format(path, fmt)
        if kind == "parquet":
            check_footers(data_files(path, "parquet"))
        reader = self.spark.read
        if Path(path).is_dir():  # only the data files, like the in-process engine
            reader = reader.option(
                "pathGlobFilter", "*.csv*" if kind == "csv" else "*.parquet"
            ).option("recursiveFileLookup", True)
        with spark_errors(path):
            df = (
                read_csv(reader, Path(path), spec)
                if kind == "csv"
                else reader.parquet(str(Path(path)))
            )
        check_columns(df.columns, spec, path)
        df = df.select(*sorted({a.column for a in spec.attributes}))
        return as_arrow_csv(df) if kind == "csv" else df

    def _read_store(self, uri: str, spec: TableSpec, fmt: str | None):
        """An input on an object store, read by the tasks (`store_frame`): Parquet as
        stored, CSV by the in-process engine's reader (strings), so both engines see the
        same values."""
        from ...storage import data_objects

        files = data_objects(uri, fmt)
        kind = fmt or ("parquet" if files[0].endswith(".parquet") else "csv")
        cols = sorted({a.column for a in spec.attributes})
        if kind == "parquet":
            return store_frame(
                self.spark, files, cols, lambda names: check_columns(names, spec, uri)
            )
        schema = pa.schema([(c, pa.string()) for c in cols])
        return files_frame(
            self.spark,
            files,
            partial(read_object, kind=kind, spec=spec, cols=cols, schema=schema),
            schema,
        )

    def load(self, path: str, spec: TableSpec, fmt: str | None = None) -> LoadedTable:
        """One pass counts the raw values (the shared pyarrow kernel per batch, summed by
        Spark: small), the driver builds the dictionaries, `mapInArrow` encodes. A local
        Parquet source of plain columns (`readable_directly`) is read by the tasks
        themselves in both passes, a range of row groups each (`direct.py`): no source
        row crosses from the JVM to Python, and Spark's reader is not asked for its
        schema (a second reading of every footer: 2.8 s on a cold session at 10M rows)."""
        columns = {a.column for a in spec.attributes}
        if not is_remote(path) and detect_format(path, fmt) == "parquet":
            check_footers(data_files(path, "parquet"))  # a damaged file: one line naming it
            if readable_directly(path, fmt, columns):
                return self._loaded(None, spec, str(path), path, files=True)
        return self._loaded(self.read(path, spec, fmt), spec, str(path), None, files=True)

    def load_frame(self, frame: FrameInput) -> LoadedTable:
        """A frame's rows: a Spark DataFrame's on its session (its columns checked and
        selected, then encoded as a file's), an Arrow table's sent to Spark as Arrow."""
        df = frame.data if frame.on_spark else self.spark.createDataFrame(frame.data)
        with spark_errors(frame.name):
            check_columns(df.columns, frame.spec, frame.name)
        return self._loaded(df.select(*frame.columns), frame.spec, frame.name, None, files=False)

    def _loaded(
        self, df, spec: TableSpec, source: str, direct: str | None, files: bool
    ) -> LoadedTable:
        """`df`'s rows encoded (`load`); `direct`: the local Parquet source's path when
        the tasks read its files themselves; `files`: `df` reads files."""
        from pyspark.sql import functions as F

        from ...encoding import RAW_COUNT_SCHEMA, raw_count_batch, raw_counts_from

        columns = sorted({a.column for a in spec.attributes})

        def count(batches):
            for b in batches:
                yield raw_count_batch(b, spec)

        counted = (
            raw_frame(self.spark, direct, columns, count, struct_type(RAW_COUNT_SCHEMA))
            if direct  # the tasks read the files: no JVM rows
            else df.mapInArrow(count, struct_type(RAW_COUNT_SCHEMA))
        )
        with spark_errors(source):
            sums = (
                counted.groupBy("attr", "value")
                .agg(F.sum("count").alias("count"))
                .collect()  # small: one row per distinct raw value of each attribute
            )
        replaced = any("\ufffd" in (r["value"] or "") for r in sums)
        if replaced and df is not None and files and not is_remote(source):
            check_decoded(df, spec)  # a local CSV's replaced bytes
        raw, rows, missing_rows = raw_counts_from(
            ((r["attr"], r["value"], r["count"]) for r in sums), spec
        )
        plan, dictionaries, counts = plan_encoding(spec, raw, rows, missing_rows)
        tasks_read = DirectSource(direct, plan) if direct else None
        encoded = (
            direct_frame(self.spark, tasks_read, iter, struct_type(plan.schema))
            if tasks_read is not None
            else df.mapInArrow(_encoder(plan), struct_type(plan.schema))
        )
        return LoadedTable(
            spec, dictionaries, counts, rows, missing_rows, encoded, source, tasks_read
        )

    # --- data sets -------------------------------------------------------------
    def code_counts(self, df, dictionaries) -> dict:
        """Per attribute, the count of every code (one aggregate pass)."""
        import numpy as np
        from pyspark.sql import functions as F

        names = list(df.columns)
        cells = [F.struct(F.lit(i).alias("a"), F.col(n).alias("v")) for i, n in enumerate(names)]
        agg = (
            df.select(F.explode(F.array(*cells)).alias("x")).groupBy("x.a", "x.v").count().collect()
        )
        counts = {n: np.zeros(dictionaries[n].size, dtype=np.int64) for n in names}
        for r in agg:
            counts[names[r["a"]]][r["v"]] = r["count"]
        return counts

    def _keyed(self, loaded: LoadedTable, seed: int):
        """The data with OCCURRENCE and the content key `__key` (kernels/sampling.py)."""
        from pyspark.sql import types as T

        from ...kernels.sampling import sample_keys

        cols = list(loaded.names)
        df, _ = numbered_rows(self._held(loaded).data, cols, _sizes(loaded))

        def keys(batches):
            for b in batches:
                frame = b.to_pandas()
                yield pa.RecordBatch.from_pandas(
                    frame.assign(__key=sample_keys(frame, seed).view("int64")), preserve_index=False
                )

        return df.mapInArrow(
            keys, T.StructType(df.schema.fields + [T.StructField("__key", T.LongType())])
        )

    def suppress(self, loaded: LoadedTable, attribute: str, drop, seed: int) -> LoadedTable:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from ...kernels.sampling import OCCURRENCE

        cols = list(loaded.names)
        unsigned = F.col("__key").bitwiseXOR(F.lit(-(1 << 63)))  # the in-process order
        rank = (
            F.row_number().over(Window.partitionBy(attribute).orderBy(unsigned, *cols, OCCURRENCE))
            - 1
        )
        limit = F.element_at(
            F.create_map(*[F.lit(x) for v, d in enumerate(drop) for x in (v, int(d))]),
            F.col(attribute),
        )
        kept = (
            self._keyed(loaded, seed)
            .withColumn("__rank", rank)
            .where(F.col("__rank") >= F.coalesce(limit, F.lit(0)))
            .select(*cols)
        )
        kept = kept.persist()
        counts = self.code_counts(kept, loaded.dictionaries)
        gone = loaded.rows - int(counts[cols[0]].sum())
        return LoadedTable(
            loaded.spec,
            loaded.dictionaries,
            counts,
            loaded.rows_read,
            loaded.rows_dropped + gone,
            kept,
            loaded.source,
        )

    def sample(self, loaded: LoadedTable, n: int, seed: int) -> LoadedTable:
        from pyspark.sql import functions as F

        from ...kernels.sampling import OCCURRENCE

        if n >= loaded.rows:
            return loaded
        cols = list(loaded.names)
        # hash order as unsigned 64-bit, like the in-process engine
        unsigned = F.col("__key").bitwiseXOR(F.lit(-(1 << 63)))
        picked = (
            self._keyed(loaded, seed)
            .orderBy(unsigned, *cols, OCCURRENCE)
            .limit(n)
            .select(*cols)
            .cache()
        )
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
        with spark_errors(f"writing {directory}"):
            self._held(loaded).data.mapInArrow(decode, schema).write.parquet(str(directory))

    def write_blocks(
        self, blocks: int, block, schema: pa.Schema, directory: Path, progress=None
    ) -> None:
        """Tasks over the block numbers (at most 4 per core), each making its blocks
        itself; `progress` is not called (the rows never pass through the driver)."""
        parts = max(1, min(blocks, default_parallelism(self.spark) * 4))

        def make(batches):
            for b in batches:
                for i in b.column(0).to_pylist():
                    yield block(i)

        out = struct_type(schema)
        with spark_errors(f"writing {directory}"):
            self.spark.range(blocks, numPartitions=parts).mapInArrow(make, out).write.parquet(
                str(directory)
            )

    # --- publishing (publishing/ jobs do the per-partition work) --------------
    def persist(self, loaded: LoadedTable) -> LoadedTable:
        """Keep the encoded codes (int32, compact) for the passes of one release, so the
        source is read and encoded once more, not once per pass. They are cached when a
        pass first reads them (`_held`); if that pass is a numbering window
        (`_with_occurrence`), the numbered rows it caches serve every later pass instead,
        and the codes themselves are never cached: one pass over the rows fewer
        (docs/explanation/performance.md)."""
        self._uncached.append(loaded.data)
        return loaded

    def unpersist(self, loaded: LoadedTable) -> None:
        loaded.data.unpersist()
        self._uncached = [d for d in self._uncached if d is not loaded.data]
        if self._numbered is not None and self._numbered[0] is loaded.data:
            self._numbered[3].unpersist()
            self._numbered = None

    def _held(self, loaded: LoadedTable) -> LoadedTable:
        """`loaded` reading its rows from what is cached: the numbered rows of its data
        if a numbering window cached them (the same rows, OCCURRENCE dropped), else its
        codes, cached now if `persist` asked for it."""
        from dataclasses import replace

        data = loaded.data
        kept = self._numbered
        if kept is not None and kept[0] is data:
            return replace(loaded, data=kept[2].select(*data.columns))
        if any(d is data for d in self._uncached):
            self._uncached = [d for d in self._uncached if d is not data]
            persisted(data)
        return loaded

    def _with_occurrence(self, loaded: LoadedTable, sharding):
        """The loaded data with OCCURRENCE where the sharding reads it (`rows.numbered_rows`),
        cached for the partitions' pass after the counting pass, so the window runs once;
        the window reads the codes as they are encoded if no pass has cached them."""
        from ...kernels.partitioning import numbers_rows

        data = loaded.data
        if not numbers_rows(sharding):
            return self._held(loaded).data
        kept = self._numbered
        if kept is not None and kept[0] is data and kept[1] == sharding:
            return kept[2]
        if kept is not None:
            kept[3].unpersist()
            self._numbered = None
        uncached = any(d is data for d in self._uncached)
        source = data if uncached else self._held(loaded).data
        direct = loaded.direct if uncached else None  # the tasks that read it pack the words
        numbered, cached = numbered_rows(
            source, sharding.columns, _sizes(loaded), cache=True, direct=direct
        )
        self._numbered = (data, sharding, numbered, cached)
        return numbered

    def rows_sample(self, loaded: LoadedTable, n: int, seed: int):
        """A seeded sample of at most n rows as a pandas frame of codes (GD's scoring):
        the only rows that reach the driver, bounded by n (config gd.sample_rows)."""
        return self._held(self.sample(loaded, n, seed)).data.toPandas()

    def shard_counts(self, loaded: LoadedTable, sensitive, sharding):
        """The shard counts (`kernels.partitioning.shard_counts`, summed), as JVM
        expressions and one aggregate (`shards.py`): no row in a Python worker."""
        from .shards import shard_count_frame

        data = self._with_occurrence(loaded, sharding)
        with spark_errors(loaded.source):
            return shard_count_frame(data, list(sensitive), sharding, _sizes(loaded))

    def combination_counts(self, loaded: LoadedTable, columns):
        """Rows per distinct combination of `columns` (codes + `count`), sorted: an
        aggregate, as small as the number of combinations."""
        cols = list(columns)
        with spark_errors(loaded.source):
            counts = self._held(loaded).data.groupBy(*cols).count().toPandas()
        return counts.sort_values(cols, kind="stable").reset_index(drop=True)

    def partition_keys(self, parts: int) -> list[int]:
        """For each partition p, a key k with pmod(hash(k), parts) = p: `repartition(parts, key)`
        then puts partition p in Spark partition p, so P partitions run as P tasks
        (small keys would collide in the hash; docs/explanation/architecture.md, "Spark
        pitfalls"). Found with Spark's own hash computed in NumPy (`spark_hash_long`), so
        no Spark job is spent on it."""
        found: dict[int, int] = {}
        span = parts * 16
        while len(found) < parts:
            ids = np.arange(span, dtype=np.int64)
            part = np.mod(spark_hash_long(ids).astype(np.int64), parts)
            first = np.unique(part, return_index=True)
            found = {int(b): int(ids[i]) for b, i in zip(*first, strict=True)}
            span *= 4
        return [found[p] for p in range(parts)]

    def run_partitions(self, loaded: LoadedTable, plan, job):
        """One shuffle: each row's partition key as a JVM expression of its shard
        (`job.sharding`, `shards.py`), `repartition(P, key)`, and `job.run` once per
        partition in a `mapInArrow` task, which gets its rows as Arrow batches, codes
        only (`rows.shuffled_rows`: where they fit, each row one bigint, its codes and
        its OCCURRENCE packed): no sort by the key (as `groupBy().applyInPandas` adds),
        and each row reaches Python once. Returns the summary rows (the job says what a
        partition does: publishing/)."""
        import pyarrow as pa
        from pyspark import TaskContext

        summary = job.summary_schema
        data = self._with_occurrence(loaded, job.sharding)
        keys = self.partition_keys(plan.parts)
        rows, made = shuffled_rows(loaded, data, job.sharding, keys, plan.shard_part)

        def task(batches):
            got = list(batches)
            if sum(b.num_rows for b in got):
                frame, part = made(pa.Table.from_batches(got))
                context = TaskContext.get()
                task_id = context.partitionId() if context is not None else -1
                if task_id not in (-1, part):  # `partition_keys` sends partition p to task p
                    raise RuntimeError(f"task {task_id} got the rows of partition {part}")
                out = job.run(frame, part, task_id)
                yield pa.RecordBatch.from_pandas(out, schema=summary, preserve_index=False)

        with spark_errors("a partition task failed"):
            return rows.mapInArrow(task, struct_type(summary)).toPandas()

    def class_summary(self, loaded: LoadedTable, job: ClassJob) -> ClassSummary:
        from .classes import class_summary

        return class_summary(self._held(loaded), job)

    def release_kl(
        self, loaded: LoadedTable, release: ReleaseFiles, form: str | None = None
    ) -> float:
        from .kl import spark_kl

        return spark_kl(self, release, self._held(loaded), form)

    def count_cubes(self, loaded: LoadedTable, luts, sizes, sets, cubes):
        from .cubes import count_cubes

        return count_cubes(self._held(loaded), luts, sizes, list(sets), cubes)

    def count_matching(self, loaded: LoadedTable, codes) -> int:
        from .cubes import count_matching

        return count_matching(self._held(loaded), codes)

    def register_tables(self, tables, views) -> str:
        spark = self.spark
        with spark_errors(f"registering {', '.join(t.name for t in tables)}"):
            for t in tables:
                if t.path is not None:
                    spark.sql(f"DROP TABLE IF EXISTS {t.name}")
                    spark.catalog.createTable(t.name, path=t.path, source="parquet")
                else:
                    store_frame(spark, list(t.files)).createOrReplaceTempView(t.name)
            for view in views:
                spark.sql(view)
        return spark.conf.get("spark.sql.catalogImplementation", "in-memory")

    def sql(self, query: str, limit: int):
        with spark_errors("--sql"):  # a bad query: one line
            return self.spark.sql(query).limit(limit).toPandas()

    def catalog_table(self, name: str):
        """The catalog's table `name` (its schema resolved: a missing table fails here)."""
        from .errors import is_spark_error

        try:
            df = self.spark.table(name)
            df.schema  # noqa: B018
        except Exception as e:
            if not is_spark_error(e):
                raise
            raise SpecError(
                f"catalog:{name}: no such table in the Spark session's catalog"
            ) from None
        return df

    def map_rows(self, frame, run, schema, parts):
        """`run` per task over `frame` spread on `parts` tasks (`frame_tasks`); for small
        driver-side frames such as a query workload, never for the data. A frame made
        from a Python RDD started a second Python worker in every task (measured;
        docs/explanation/performance.md)."""
        from .direct import frame_tasks

        if frame.empty:
            return frame.iloc[0:0].reindex(columns=schema.names)
        parts = max(1, min(len(frame), parts if parts > 0 else default_parallelism(self.spark)))
        with spark_errors("map rows"):
            return frame_tasks(self.spark, frame, run, schema, parts).toPandas()

    def write_projection(self, loaded: LoadedTable, attributes, directory: str | Path) -> None:
        """A duplicate-preserving projection, aggregated (`count`) by Spark: as small as its
        distinct combinations, so it is written here as one file, like the in-process
        engine's, and the same bytes (also to an object store: no Hadoop writer)."""
        from ...encoding import write_decoded

        counts = self.combination_counts(loaded, attributes)
        write_decoded(counts, loaded.dictionaries, directory, "part-00000.parquet")


def _sizes(loaded: LoadedTable) -> dict[str, int]:
    """Each attribute's domain size (its codes are below it)."""
    return {a: loaded.dictionaries[a].size for a in loaded.names}
