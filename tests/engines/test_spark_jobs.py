"""The Spark path's fixed costs: Spark jobs per publish must not grow back
(counted by Spark's status tracker under a job group), and the partition keys found
without a job must be those Spark's own hash gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from release_helpers import config, job_table, write_table
from spark_helpers import with_jobs

from vpub_spark.engines.spark.engine import spark_hash_long
from vpub_spark.engines.spark.read import csv_header
from vpub_spark.publishing.pipeline import publish

pytestmark = pytest.mark.spark

# the Spark jobs of a publish (docs/explanation/performance.md): the partition keys and the
# CSV header are found without Spark; the raw-value count (2 jobs under AQE), the cached
# encoding and the shard counts (3), the partition tasks (2); a release this small is
# audited in the driver (commit.IN_DRIVER_BYTES), a larger one in 1 job of tasks. uad's
# shards also read each row's index among rows of equal QI (kernels/partitioning.py):
# a window, once: its numbered rows are cached for the partition tasks, and it reads the
# codes as they are encoded (they are not cached apart first: 1 job more, not 2)
MAX_JOBS = {"uad": 8, "marginals": 7, "rda": 7}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_table(job_table(3, 3000), tmp_path_factory.mktemp("jobs") / "t")


@pytest.mark.parametrize("method", sorted(MAX_JOBS))
def test_spark_jobs_per_publish_stay_at_the_measured_count(
    method, data, tmp_path, spark, spark_engine
):
    rules = [{"lhs": ["age", "zip"], "rhs": "job"}]
    kw: dict = {"method": method, "engine": "spark", "seed": 1}
    if method == "marginals":
        kw |= {
            "privacy": {"model": "m-invariance", "m": 4},
            "marginals": {
                "sensitive": "job",
                "schemas": [["age"], ["age", "zip"]],
                "state": str(tmp_path / "store"),
            },
        }
    elif method == "rda":
        kw |= {"privacy": {"model": "l-diversity", "l": 4}, "streamliner": {"sensitive": "job"}}
    cfg = config(data, tmp_path / "out", rules, 4, **kw)
    _, jobs = with_jobs(spark, lambda: publish(cfg, spark_engine), f"vpub-jobs-{method}")
    assert 0 < jobs <= MAX_JOBS[method]


def test_partition_keys_use_sparks_own_hash(spark, spark_engine):
    from pyspark.sql import functions as F

    ids = np.random.default_rng(0).integers(-(2**63), 2**63 - 1, 5000, dtype=np.int64)
    ids[:4] = [0, 1, -1, 2**40]
    frame = spark.createDataFrame(pd.DataFrame({"id": ids}))
    expected = np.array([r["h"] for r in frame.select(F.hash("id").alias("h")).collect()])
    assert (spark_hash_long(ids) == expected).all()
    keys = spark_engine.partition_keys(7)
    got = (
        spark.createDataFrame(pd.DataFrame({"k": keys}))
        .select(F.expr("pmod(hash(k), 7)").alias("p"))
        .collect()
    )
    assert [r["p"] for r in got] == list(range(7))


def test_csv_headers_are_read_without_spark_when_plain(tmp_path):
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    (tmp_path / "b.csv").write_text("x,y\n3,4\n")
    assert csv_header(tmp_path, "utf-8") == ["x", "y"]
    (tmp_path / "c.csv").write_text("y,x\n3,4\n")
    assert csv_header(tmp_path, "utf-8") is None  # files disagree: Spark reads them
    assert csv_header(tmp_path / "a.csv", "utf-8") == ["x", "y"]
    (tmp_path / "d.csv.gz").write_bytes(b"")
    assert csv_header(tmp_path, "utf-8") is None


def test_xxhash64_is_sparks_own(spark):
    """The kernels' NumPy `xxhash64` (ints as int, bigints as long, chained) is Spark's."""
    from pyspark.sql import functions as F

    from vpub_spark.kernels.hashing import spark_xxhash64

    rng = np.random.default_rng(1)
    a = rng.integers(-(2**31), 2**31, 3000).astype(np.int32)
    b = rng.integers(0, 50, 3000).astype(np.int32)
    c = rng.integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64)
    a[:3], c[:3] = [0, -1, 2**31 - 1], [0, -1, -(2**63)]
    frame = spark.createDataFrame(pd.DataFrame({"a": a, "b": b, "c": c}))
    key = -1234567890123456789
    got = frame.select(
        F.xxhash64("a", "b", "c").alias("abc"), F.xxhash64(F.lit(key), "b").alias("kb")
    ).toPandas()
    assert (got["abc"].to_numpy() == spark_xxhash64([a, b, c]).view(np.int64)).all()
    keyed = spark_xxhash64([np.full(3000, key, dtype=np.int64), b]).view(np.int64)
    assert (got["kb"].to_numpy() == keyed).all()


@pytest.mark.parametrize("cells", [True, False], ids=["by-cells", "exploded"])
@pytest.mark.parametrize(
    "sharding",
    ["content", "content_columns", "occurrence", "qi"],
)
def test_jvm_shards_and_counts_are_the_kernels(spark, sharding, cells):
    """The plan's shards and counts as JVM expressions (`engines/spark/shards.py`) give
    what the kernels give in process, fingerprint halves included, counted by cells of
    the sensitive values or exploded per attribute."""
    from vpub_spark.engines.spark.shards import shard_column, shard_count_frame
    from vpub_spark.kernels.partitioning import ContentShards, QiShards, shard_counts
    from vpub_spark.kernels.sampling import OCCURRENCE

    rng = np.random.default_rng(2)
    n = 4000
    frame = pd.DataFrame(
        {
            "age": rng.integers(0, 70, n).astype(np.int32),
            "zip": rng.integers(0, 9, n).astype(np.int32),
            "job": rng.integers(0, 5, n).astype(np.int32),
        }
    )
    if sharding == "occurrence":
        frame[OCCURRENCE] = rng.integers(0, 4, n).astype(np.int64)
    chosen = {
        "content": ContentShards(2**127 + 5),
        "content_columns": ContentShards(7, ("zip", "age")),
        "occurrence": ContentShards(11, ("age", "zip"), occurrence=True),
        "qi": QiShards(("zip", "age"), (9, 70)),
    }[sharding]
    df = spark.createDataFrame(frame)
    got = df.select(shard_column(chosen, df.columns).alias("s")).toPandas()["s"].to_numpy()
    assert (got == chosen.of(frame)).all()
    key = ["attr", "shard", "value"]
    sensitive = ["job", "zip"]
    sizes = {"job": 5, "zip": 9} if cells else None
    jvm = shard_count_frame(df, sensitive, chosen, sizes).sort_values(key)
    kernel = shard_counts(frame, sensitive, chosen).sort_values(key)
    pd.testing.assert_frame_equal(jvm.reset_index(drop=True), kernel.reset_index(drop=True))


def test_the_tasks_pack_the_window_words_as_the_jvm_does(spark):
    """`rows.word_batches` (NumPy, in the tasks that read the source) gives the numbering
    window's two words exactly as `kl.packed_key` (JVM arithmetic) does, with no rest
    columns too."""
    import pyarrow as pa

    from vpub_spark.engines.spark.kl import packed_key, packing_over
    from vpub_spark.engines.spark.rows import word_batches

    rng = np.random.default_rng(5)
    sizes = {"a": 70, "b": 1, "c": 9, "d": 5}
    frame = pd.DataFrame(
        {c: rng.integers(0, max(s, 1), 3000).astype(np.int32) for c, s in sizes.items()}
    )
    batch = pa.RecordBatch.from_pandas(frame, preserve_index=False)
    df = spark.createDataFrame(frame)
    for key, rest in [(["a", "c"], ["b", "d"]), (["d", "a", "b", "c"], [])]:
        packings = (packing_over(key, sizes), packing_over(rest, sizes))
        jvm = df.select(
            packed_key(packings[0]).alias("__k"), packed_key(packings[1]).alias("__r")
        ).toPandas()
        (tasks,) = word_batches(iter([batch]), packings)
        assert (tasks.column("__k").to_numpy() == jvm["__k"].to_numpy()).all()
        assert (tasks.column("__r").to_numpy() == jvm["__r"].to_numpy()).all()
