"""Both engines read, encode and profile identically; bad input fails clearly."""

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vpub_spark.errors import DataError, SpecError
from vpub_spark.model import Attribute, CategoryGroup, NumericBin, TableSpec

SPEC = TableSpec(
    (
        Attribute("age", "numeric", bins=(NumericBin("young", 0, 39), NumericBin("old", 40, 120))),
        Attribute("sex", order=("F", "M")),
        Attribute("zip", "numeric", source="zipcode"),
        Attribute("dx", groups=(CategoryGroup("hiv", ("HIV",)),), rest="other"),
    )
)

ROWS = pd.DataFrame(
    {
        "age": ["37", "71", "55", "37", "23", "37", "?", "44"],
        "sex": ["F", "M", "F", "F", "M", "M", "F", " M "],
        "zipcode": ["71000", "72000", "73000", "74000", "71000", "72000", "71000", "100"],
        "dx": ["HIV", "diabetes", "diabetes", "flu", "alcoholism", "HIV", "flu", ""],
        "unused": list("abcdefgh"),
    }
)


@pytest.fixture
def csv_path(tmp_path: Path) -> str:
    p = tmp_path / "t.csv"
    ROWS.to_csv(p, index=False)
    return str(p)


@pytest.fixture
def parquet_dir(tmp_path: Path) -> str:
    d = tmp_path / "pq"
    d.mkdir()
    t = pa.Table.from_pandas(ROWS.assign(zipcode=ROWS.zipcode.astype(float)), preserve_index=False)
    pq.write_table(t.slice(0, 4), d / "a.parquet")
    pq.write_table(t.slice(4), d / "b.parquet")
    return str(d)


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def test_inprocess_load_and_profile(inprocess, csv_path):
    t = inprocess.load(csv_path, SPEC)
    assert (t.rows_read, t.rows_dropped, t.rows) == (8, 2, 6)  # '?' age and '' dx
    assert t.dictionaries["age"].labels == ("young", "old")
    assert t.dictionaries["zip"].labels == ("71000", "72000", "73000", "74000")
    assert t.counts["sex"].tolist() == [3, 3]
    assert t.data.dtypes.map(str).tolist() == ["int32"] * 4
    decoded = [t.dictionaries["dx"].labels[c] for c in t.data["dx"]]
    assert decoded == ["hiv", "other", "other", "other", "other", "hiv"]


def test_an_engine_holding_a_source_reads_it_once(csv_path, parquet_dir):
    """`HeldSourceEngine` returns the table it read for that source and spec, and reads
    anything else anew, as the in-process engine does."""
    from vpub_spark.engines.inprocess import HeldSourceEngine, InProcessEngine

    engine = HeldSourceEngine(csv_path, SPEC)
    held = engine.load(csv_path, SPEC)
    assert engine.load(csv_path, SPEC) is held
    assert held.data.equals(InProcessEngine().load(csv_path, SPEC).data)
    other = engine.load(parquet_dir, SPEC)
    assert other is not held and other.data.equals(InProcessEngine().load(parquet_dir, SPEC).data)


@pytest.mark.spark
@pytest.mark.parametrize("which", ["csv", "parquet"])
def test_engines_agree(spark_engine, inprocess, csv_path, parquet_dir, which):
    path = csv_path if which == "csv" else parquet_dir
    a, b = inprocess.load(path, SPEC), spark_engine.load(path, SPEC)
    assert a.dictionaries == b.dictionaries
    assert {k: v.tolist() for k, v in a.counts.items()} == {
        k: v.tolist() for k, v in b.counts.items()
    }
    assert (a.rows_read, a.rows_dropped) == (b.rows_read, b.rows_dropped)
    assert _sorted(a.data).equals(_sorted(b.data.toPandas()))


@pytest.mark.spark
@pytest.mark.parametrize("engine_name", ["inprocess", "spark"])
def test_bad_input_is_clear(request, engine_name, csv_path, tmp_path):
    engine = request.getfixturevalue("inprocess" if engine_name == "inprocess" else "spark_engine")
    with pytest.raises(SpecError, match="unknown column salary"):
        engine.load(csv_path, TableSpec((Attribute("salary"),)))
    reject = TableSpec(SPEC.attributes, missing="reject")
    with pytest.raises(DataError, match="2 of 8 rows have a missing value"):
        engine.load(csv_path, reject)
    empty = tmp_path / "empty.csv"
    ROWS.head(0).to_csv(empty, index=False)
    with pytest.raises(DataError, match="empty"):
        engine.load(str(empty), SPEC)
    with pytest.raises(SpecError, match="input not found"):
        engine.load(str(tmp_path / "nope"), SPEC)


def test_sql_is_a_capability_only_spark_has():
    """`SqlEngine` is not part of `Engine`: the in-process engine does not implement it
    and is refused in one line; the Spark engine's class has both of its members."""
    from vpub_spark.engines.base import SqlEngine, sql_engine
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.engines.spark.engine import SparkEngine
    from vpub_spark.errors import SpecError

    with pytest.raises(SpecError, match="SQL catalog: use the Spark engine, not inprocess"):
        sql_engine(InProcessEngine())
    assert all(callable(getattr(SparkEngine, m, None)) for m in ("register_tables", "sql"))
    assert not isinstance(InProcessEngine(), SqlEngine)


def test_utility_measures_are_a_capability_both_engines_have():
    """`UtilityEngine` is not part of `Engine`: both engines implement it, and an engine
    without it is refused in one line."""
    from types import SimpleNamespace

    from vpub_spark.engines.base import UtilityEngine, utility_engine
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.engines.spark.engine import SparkEngine
    from vpub_spark.errors import SpecError

    assert utility_engine(InProcessEngine()) is not None
    assert all(
        callable(getattr(SparkEngine, m, None))
        for m in ("release_kl", "count_cubes", "count_matching")
    )
    assert issubclass(SparkEngine, UtilityEngine)
    with pytest.raises(SpecError, match="the bare engine does not measure utility"):
        utility_engine(SimpleNamespace(name="bare"))  # type: ignore[arg-type]
