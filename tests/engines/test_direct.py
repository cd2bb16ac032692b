"""Tasks that read the source themselves (`engines/spark/direct.py`): the row-group
splits cover every row group once, and the rows they encode are exactly the load's."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_engines import ROWS, SPEC, _sorted

from vpub_spark.engines.spark import direct
from vpub_spark.engines.spark.direct import (
    direct_frame,
    frame_tasks,
    item_frame,
    readable_directly,
    row_group_splits,
)
from vpub_spark.engines.spark.schema import struct_type
from vpub_spark.tablespec import table_spec_from_dict


def _files(tmp_path, groups_per_file=(3, 1, 4), rows=10) -> str:
    d = tmp_path / "src"
    d.mkdir()
    for i, groups in enumerate(groups_per_file):
        values = np.arange(groups * rows, dtype=np.int32) + 1000 * i
        pq.write_table(pa.table({"x": values}), d / f"part-{i}.parquet", row_group_size=rows)
    return str(d)


@pytest.mark.parametrize(("cores", "task_rows"), [(1, 10**9), (2, 10**9), (3, 25), (16, 10**9)])
def test_splits_cover_every_row_group_once(tmp_path, monkeypatch, cores, task_rows):
    monkeypatch.setattr(direct, "TASK_ROWS", task_rows)
    path = _files(tmp_path)
    splits = row_group_splits(path, cores)
    covered = [(f, g) for f, first, end in splits for g in range(first, end)]
    every = [
        (f, g)
        for f in sorted(str(p) for p in tmp_path.glob("src/*.parquet"))
        for g in range(pq.read_metadata(f).num_row_groups)
    ]
    assert covered == every  # each once, in order
    assert len(splits) >= min(cores, len(every))
    target = -(-80 // max(cores, -(-80 // task_rows)))
    assert all((end - first) * 10 <= max(target, 10) for _, first, end in splits)


@pytest.fixture
def parquet_dir(tmp_path) -> str:
    """test_engines' rows in two files, with missing values and untrimmed strings."""
    d = tmp_path / "pq"
    d.mkdir()
    t = pa.Table.from_pandas(ROWS.assign(zipcode=ROWS.zipcode.astype(float)), preserve_index=False)
    pq.write_table(t.slice(0, 4), d / "a.parquet")
    pq.write_table(t.slice(4), d / "b.parquet", row_group_size=2)
    return str(d)


def test_only_plain_local_parquet_is_read_directly(tmp_path, parquet_dir):
    from vpub_spark.engines.inprocess import InProcessEngine

    assert InProcessEngine().load(parquet_dir, SPEC).direct is None  # it holds its rows
    ROWS.to_csv(tmp_path / "t.csv", index=False)
    assert not readable_directly(str(tmp_path / "t.csv"), None, {"t"})
    stamps = tmp_path / "ts.parquet"
    pq.write_table(pa.table({"t": pa.array([0, 1], pa.timestamp("us"))}), stamps)
    assert not readable_directly(str(stamps), None, {"t"})  # Spark would hand it over as UTC
    assert not readable_directly("s3://bucket/data", "parquet", {"t"})
    assert readable_directly(parquet_dir, None, {a.column for a in SPEC.attributes})
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pq.write_table(pa.table({"t": pa.array([1], pa.int64())}), mixed / "a.parquet")
    pq.write_table(pa.table({"t": pa.array([1], pa.int32())}), mixed / "b.parquet")
    assert not readable_directly(str(mixed), None, {"t"})  # Spark's reader decides


@pytest.mark.spark
def test_direct_rows_are_the_loaded_rows(spark_engine, parquet_dir):
    """Trimmed strings, floats, and rows with a missing value dropped, as the load does."""
    loaded = spark_engine.load(parquet_dir, SPEC)
    assert loaded.direct is not None

    def same(batches):
        yield from batches

    got = direct_frame(spark_engine.spark, loaded.direct, same, loaded.data.schema).toPandas()
    assert _sorted(got).equals(_sorted(loaded.data.toPandas()))
    assert len(got) == 6
    sample = spark_engine.sample(loaded, 3, 1)
    assert sample.direct is None  # new rows: read from `data`
    assert spark_engine.persist(loaded).direct == loaded.direct


@pytest.mark.spark
def test_integer_parquet_reads_directly(spark_engine, tmp_path):
    spec = table_spec_from_dict({"attributes": [{"name": "a", "kind": "numeric"}, {"name": "b"}]})
    d = tmp_path / "ints"
    d.mkdir()
    frame = pd.DataFrame({"a": np.arange(50, dtype=np.int64) % 7 - 3, "b": np.arange(50) % 4})
    pq.write_table(
        pa.Table.from_pandas(frame, preserve_index=False), d / "x.parquet", row_group_size=8
    )
    loaded = spark_engine.load(str(d), spec)
    got = direct_frame(
        spark_engine.spark, loaded.direct, lambda b: b, loaded.data.schema
    ).toPandas()
    assert _sorted(got).equals(_sorted(loaded.data.toPandas()))
    assert loaded.dictionaries["a"].labels == tuple(str(v) for v in range(-3, 4))


@pytest.mark.parametrize("blob_keys", [1, 3, 1 << 20])
def test_key_blobs_merge_to_the_distinct_rows(monkeypatch, blob_keys):
    """`direct_keys`' two halves: every distinct row reaches one reduce partition, in
    blobs of at most BLOB_KEYS keys, with its counts summed over the map tasks."""
    from vpub_spark.engines.spark import kl
    from vpub_spark.engines.spark.kl import Packing, _key_blobs, _merged_frames
    from vpub_spark.kernels.arrays import unpack_sorted

    monkeypatch.setattr(kl, "BLOB_KEYS", blob_keys)
    rng = np.random.default_rng(blob_keys)
    rows = pd.DataFrame({"a": rng.integers(0, 5, 200), "b": rng.integers(0, 7, 200)}).astype(
        "int32"
    )
    packing, routes = Packing(("a", "b"), (7, 1), (5, 7)), [11, 22, 33]
    maps = [
        pa.RecordBatch.from_pandas(half, preserve_index=False) for half in (rows[:120], rows[120:])
    ]
    blobs = [b for m in maps for b in _key_blobs(iter([m]), packing, routes)]
    assert all(len(unpack_sorted(b.column("keys")[0].as_py())) <= blob_keys for b in blobs)
    parts = {}
    for b in blobs:
        parts.setdefault(b.column("part")[0].as_py(), []).append(b)
    assert set(parts) <= set(routes)
    merged = pd.concat(
        [f for p in parts.values() for f in _merged_frames(iter(p), packing, ["a", "b"])]
    )
    want = rows.value_counts().rename("count").reset_index()
    got = merged.rename(columns={merged.columns[-1]: "count"}).astype("int64")
    assert _sorted(got).equals(_sorted(want.astype("int64")))


@pytest.mark.parametrize("items", [[("a", 1), ("b", 2), ("c", 3)], [("only", 7)], []])
def test_item_frame_runs_one_task_per_item(spark_engine, items):
    """Each item reaches exactly one task, alone and as one batch with its columns
    named; no items, no rows."""
    schema = pa.schema(
        [("task", pa.int64()), ("name", pa.string()), ("n", pa.int64()), ("batches", pa.int64())]
    )

    def seen(batches):  # a task's items, one row each, with the task's partition id
        from pyspark import TaskContext

        got = list(batches)
        rows = [
            {"name": b.column(0)[i].as_py(), "n": b.column(1)[i].as_py()}
            for b in got
            for i in range(b.num_rows)
        ]
        task = {"task": TaskContext.get().partitionId(), "batches": len(got)}
        yield pa.RecordBatch.from_pylist([task | r for r in rows], schema=schema)

    got = item_frame(spark_engine.spark, items, ("name", "n"), seen, struct_type(schema)).toPandas()
    assert len(got) == len(items)
    assert sorted(zip(got["name"], got["n"], strict=True)) == sorted(items)
    assert got["task"].is_unique and set(got["batches"]) <= {1}


@pytest.mark.parametrize(("rows", "parts"), [(7, 3), (2, 4), (1, 1)])
def test_frame_tasks_spread_every_row_once(spark_engine, rows, parts):
    """Every row of the frame reaches exactly one of the tasks, with its dtypes (an
    unsigned and a categorical column too), and `map_rows` returns what they made."""
    import pandas as pd

    frame = pd.DataFrame(
        {"i": np.arange(rows, dtype=np.uint8), "c": pd.Categorical(["a", "b"] * rows)[:rows]}
    )
    schema = pa.schema([("task", pa.int64()), ("i", pa.int64()), ("kinds", pa.string())])

    def seen(part):
        from pyspark import TaskContext

        kinds = f"{part['i'].dtype}/{part['c'].dtype}"
        return pd.DataFrame(
            {"task": TaskContext.get().partitionId(), "i": part["i"], "kinds": kinds}
        )

    got = frame_tasks(spark_engine.spark, frame, seen, schema, parts).toPandas()
    assert sorted(got["i"]) == list(range(rows))
    assert set(got["kinds"]) == {"uint8/category"}
    assert got["task"].nunique() == min(rows, parts)
    mapped = spark_engine.map_rows(frame, seen, schema, parts)
    assert sorted(mapped["i"]) == list(range(rows))
