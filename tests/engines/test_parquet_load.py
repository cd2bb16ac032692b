"""The in-process Parquet load (engines/parquet_load.py) reads each row group once and
codes it from its dictionary: the same frame, dictionaries, counts and dropped rows as
counting and encoding the table as read (`raw_value_counts`, `encode_batch`), on random
tables of integer, text and float columns with nulls, missing-value tokens, values that
differ only by spaces, several files and row groups, and one worker or several."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vpub_spark.encoding import encode_batch, raw_value_counts
from vpub_spark.engines.base import plan_encoding
from vpub_spark.engines.inprocess import InProcessEngine, read_arrow
from vpub_spark.errors import DataError
from vpub_spark.model import Attribute, TableSpec

TEXT = ["a", " a", "a ", "b", "?", "", "c c", "B"]


def _reference(path: str, spec: TableSpec):
    """The table read whole, counted and encoded as Spark's batches are."""
    table = read_arrow(path, spec)
    raw, rows, missing = raw_value_counts(table, spec)
    plan, dictionaries, counts = plan_encoding(spec, raw, rows, missing)
    return encode_batch(table, plan).to_pandas(), dictionaries, counts, rows, missing


@st.composite
def _tables(draw):
    rows = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    wide = draw(st.booleans())  # integers too spread out to count densely

    def nulls(values, p=0.1):
        return [None if rng.random() < p else v for v in values]

    ints = rng.integers(-3, 5, rows) * (10**12 if wide else 1)
    columns = {
        "i8": pa.array(rng.integers(-120, 120, rows), pa.int8()),
        "i64": pa.array(nulls(ints.tolist()) if draw(st.booleans()) else ints, pa.int64()),
        "text": pa.array(nulls(rng.choice(TEXT, rows).tolist()), pa.string()),
        "real": pa.array(nulls(rng.choice([0.5, 1.0, 2.25], rows).tolist(), 0.05), pa.float64()),
        "flag": pa.array(nulls((rng.random(rows) < 0.5).tolist(), 0.05), pa.bool_()),
        "huge": pa.array(  # straddling 2**63 when wide
            np.uint64(2**64 - 1)
            - rng.integers(0, 3, rows).astype(np.uint64) * np.uint64(2**62 if wide else 1),
            pa.uint64(),
        ),
    }
    files = draw(st.integers(1, 3))
    group_rows = draw(st.integers(1, 25))
    return pa.table(columns), files, group_rows


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_tables(), st.sampled_from([1, 2]))
def test_the_load_is_counting_and_encoding_the_table_as_read(tmp_path_factory, drawn, workers):
    table, files, group_rows = drawn
    d = tmp_path_factory.mktemp("pq")
    bounds = np.linspace(0, table.num_rows, files + 1).astype(int)
    for i in range(files):
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        pq.write_table(part, d / f"part-{i}.parquet", row_group_size=group_rows)
    spec = TableSpec(
        (
            Attribute("small", source="i8", kind="numeric"),
            Attribute("big", source="i64"),
            Attribute("word", source="text"),
            Attribute("again", source="text"),  # two attributes of one column
            Attribute("real", source="real", kind="numeric"),
            Attribute("flag", source="flag"),
            Attribute("huge", source="huge"),
        ),
        missing="drop",
        missing_values=("?", "", "3"),
    )
    try:
        expected = _reference(str(d), spec)
    except DataError as e:  # every row missing: the load says the same
        with pytest.raises(DataError, match=str(e)[:20]):
            InProcessEngine(workers, min_rows=0).load(str(d), spec)
        return
    frame, dictionaries, counts, rows, missing = expected
    got = InProcessEngine(workers, min_rows=0).load(str(d), spec)
    assert (got.rows_read, got.rows_dropped) == (rows, missing)
    assert got.dictionaries == dictionaries
    assert all((got.counts[a] == counts[a]).all() for a in counts)
    assert got.data.reset_index(drop=True).equals(frame.astype("int32"))


@pytest.mark.parametrize(
    "first, later",
    [
        (pa.array([7, 1, 3], pa.int64()), pa.array(["07", "1", "3"], pa.string())),
        (pa.array([0.1, 0.5], pa.float64()), pa.array([0.1, 0.5], pa.float32())),
        (pa.array([1, 2], pa.int32()), pa.array([2, 3], pa.int64())),
        (pa.array(["a", "b"], pa.string()), pa.array([1, 2], pa.int16())),
    ],
)
def test_files_of_other_types_are_read_as_the_first_files(tmp_path, first, later):
    """A directory whose files disagree on a column's type: every file is read as the
    first file's types, as the table read whole (a dataset) reads them."""
    d = tmp_path / "data"
    d.mkdir()
    pq.write_table(pa.table({"x": first}), d / "part-0.parquet")
    pq.write_table(pa.table({"x": later}), d / "part-1.parquet")
    spec = TableSpec((Attribute("x"),))
    frame, dictionaries, counts, rows, missing = _reference(str(d), spec)
    for workers in (1, 2):
        got = InProcessEngine(workers, min_rows=0).load(str(d), spec)
        assert got.dictionaries == dictionaries and (got.rows_read, got.rows_dropped) == (
            rows,
            missing,
        )
        assert got.data.reset_index(drop=True).equals(frame.astype("int32"))
