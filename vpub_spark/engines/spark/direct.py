"""Tasks that read a Spark LoadedTable's source themselves: the Parquet files
read by pyarrow in the tasks, a range of row groups each, and encoded there with the
load's own plan (`encode_batch`), so that no source row crosses from the JVM to
Python. Spark hands a Python task about a million rows a second whatever their width
(its rows become Arrow batches one at a time); a task reads and encodes the 1M `sal`
source's rows in a tenth of that.

Only a table whose rows are the source's, encoded, has a `DirectSource`: the load of a
local Parquet input sets one, and a sample or a suppressed table (new rows) has none,
so its passes read `LoadedTable.data`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq

from ...encoding import EncodingPlan, encode_batch
from ...storage import is_remote
from ..base import unreadable
from ..files import data_files, detect_format
from .schema import struct_type
from .session import default_parallelism

TASK_ROWS = 8_000_000
"""At most about this many source rows per task (a task's row groups), and never fewer
tasks than cores: a task's state (packed keys, cubes) stays bounded."""

BATCH_ROWS = 1 << 20
"""Rows per batch a task reads."""


@dataclass(frozen=True)
class DirectSource:
    """The local Parquet files of a load and the plan that encoded them."""

    path: str
    plan: EncodingPlan


def row_group_splits(path: str, cores: int) -> list[tuple[str, int, int]]:
    """The files' row groups as (file, first, end) ranges of about equal rows: at least
    `cores` ranges when there are that many row groups, each at most about `TASK_ROWS`
    rows (a row group is never split). Read from the footers only."""
    groups = [
        (f, g, meta.row_group(g).num_rows)
        for f in data_files(path, "parquet")
        for meta in [pq.read_metadata(f)]
        for g in range(meta.num_row_groups)
    ]
    total = sum(n for _, _, n in groups)
    target = max(1, -(-total // max(cores, -(-total // TASK_ROWS))))
    out: list[tuple[str, int, int]] = []
    held = 0
    for f, g, n in groups:
        if out and out[-1][0] == f and out[-1][2] == g and held + n <= target:
            out[-1], held = (f, out[-1][1], g + 1), held + n
        else:
            out.append((f, g, g + 1))
            held = n
    return out


def readable_directly(path: str, fmt: str | None, columns: set[str]) -> bool:
    """Whether tasks may read the source themselves: local Parquet whose `columns` (of
    the same types in every file's footer) are integers, floats, strings or booleans, which Spark hands to
    Python as the same Arrow types, so both reads see the same values; not CSV, an
    object store, timestamps or decimals."""
    if is_remote(path) or detect_format(path, fmt) != "parquet":
        return False
    plain = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_boolean)
    seen = None
    for f in data_files(path, "parquet"):  # every footer: a later file may differ
        schema = pq.read_schema(f)
        names = set(schema.names)
        if not all(c in names and any(t(schema.field(c).type) for t in plain) for c in columns):
            return False
        types = [schema.field(c).type for c in sorted(columns)]
        if seen is not None and types != seen:
            return False  # files of other types: Spark's reader decides how to read them
        seen = types
    return True


def raw_batches(splits, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """In a task: the rows of `splits` ((file, first, end) rows of a batch) as read; a
    file that cannot be read is a one-line error naming it (`unreadable`)."""
    for b in splits:
        for f, first, end in zip(*(b.column(i).to_pylist() for i in range(3)), strict=True):
            try:
                parquet = pq.ParquetFile(f)
                yield from parquet.iter_batches(
                    BATCH_ROWS, row_groups=range(first, end), columns=columns
                )
            except (pa.ArrowException, OSError) as e:
                raise unreadable(f, e) from None


def encoded_batches(splits, plan: EncodingPlan, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """In a task: the rows of `splits` read and encoded (rows with a missing value
    dropped, as the load drops them)."""
    for batch in raw_batches(splits, columns):
        yield encode_batch(batch, plan)


def direct_frame(spark, source: DirectSource, run: Callable, schema):
    """A DataFrame of `run`'s output (`schema`, a pyspark StructType), `run` called in
    each task with the encoded batches of the task's row groups: one task per split,
    no JVM rows in."""
    columns = sorted({c.column for c in source.plan.columns})
    task = partial(_task, run=run, plan=source.plan, columns=columns)
    return source_frame(spark, source.path, task, schema)


def raw_frame(spark, path: str, columns: list[str], run: Callable, schema):
    """As `direct_frame`, `run` called with the task's row groups as read."""
    task = partial(_raw_task, run=run, columns=columns)
    return source_frame(spark, path, task, schema)


def source_frame(spark, path: str, task: Callable, schema):
    """One task per split of the files' row groups (`row_group_splits`), `task` called
    with its splits' batch."""
    splits = row_group_splits(path, default_parallelism(spark))
    return item_frame(spark, splits, ("file", "first", "end"), task, schema)


def _task(splits, run: Callable, plan: EncodingPlan, columns: list[str]):
    yield from run(encoded_batches(splits, plan, columns))


def _raw_task(splits, run: Callable, columns: list[str]):
    yield from run(raw_batches(splits, columns))


def item_frame(spark, items: list[tuple], names: tuple[str, ...], run: Callable, schema):
    """A DataFrame of `run`'s output (`schema`), one task per item of `items` (tuples
    of plain values), `run` called with one Arrow batch of its item (`names` its
    columns). The tasks are `spark.range`'s, their items in the closure: a DataFrame
    made from a Python RDD converts its rows in a Python worker of its own, a second
    one per task (an empty job: 0.27 s against 0.21 s, medians of 10; docs/explanation/performance.md)."""
    return spark.range(len(items), numPartitions=max(1, len(items))).mapInArrow(
        partial(_item_task, items=items, names=names, run=run), schema
    )


def frame_tasks(spark, frame, run: Callable, schema: pa.Schema, parts: int):
    """A DataFrame of `run`'s output (pandas frames of `schema`, a pyarrow schema), `run`
    called in each of `parts` tasks with its rows of `frame` (a small driver-side pandas
    frame, in the closure: its dtypes are kept). As `item_frame`, from `spark.range`."""
    task = partial(_frame_task, frame=frame, run=run, schema=schema)
    return spark.range(len(frame), numPartitions=parts).mapInArrow(task, struct_type(schema))


def _frame_task(ids, frame, run: Callable, schema: pa.Schema):
    import numpy as np

    mine = [b.column(0).to_numpy() for b in ids]
    rows = np.concatenate(mine) if mine else np.zeros(0, np.int64)
    if len(rows):
        out = run(frame.iloc[rows].reset_index(drop=True))
        yield pa.RecordBatch.from_pandas(out, schema=schema, preserve_index=False)


def _item_task(ids, items: list[tuple], names: tuple[str, ...], run: Callable):
    mine = [items[i] for b in ids for i in b.column(0).to_pylist()]
    columns = {n: [item[j] for item in mine] for j, n in enumerate(names)}
    yield from run(iter([pa.RecordBatch.from_pydict(columns)] if mine else []))
