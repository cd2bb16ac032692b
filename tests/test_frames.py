"""Publishing a frame (`vpub_spark.publish(frame, ...)`, frames.py): a pandas DataFrame,
a pyarrow Table and a pyspark DataFrame each publish the release that the same rows
written to Parquet, with the inferred table spec, publish on the same engine and seed;
the spec is inferred from the types and the caller's overrides win; a column of a type
that cannot be an attribute is one line and nothing is written."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_helpers import contents, same_contents

import vpub_spark
from vpub_spark.frames import frame_input
from vpub_spark.tablespec import write_table_spec

RULES = ["age, sex -> disease", "born -> disease"]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 1500
    return pd.DataFrame(
        {
            "age": rng.integers(17, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "born": [datetime.date(1950 + int(y), 1, 1) for y in rng.integers(0, 4, n)],
            "smoker": rng.choice([True, False], n),
            "disease": rng.choice(["flu", "hiv", "cold", "gout", "acne", "ulcer"], n),
        }
    )


def _as_parquet(frame: pd.DataFrame, tmp_path, table=None):
    """The frame's rows as a Parquet data set with its inferred table.yaml."""
    data = tmp_path / "parquet"
    (data / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), data / "data" / "p.parquet")
    write_table_spec(frame_input(frame, table).spec, data / "table.yaml")
    return data


def _publish(source, out, **kw):
    return vpub_spark.publish(source, rules=RULES, privacy=3, output=out, seed=11, **kw)


def test_the_spec_is_inferred_from_the_types(frame):
    spec = frame_input(frame).spec
    kinds = {a.name: a.kind for a in spec.attributes}
    assert kinds == {
        "age": "numeric",
        "sex": "categorical",
        "born": "categorical",
        "smoker": "categorical",
        "disease": "categorical",
    }
    bins = {"age": {"bins": [[0, 39], [40, 120]]}}
    assert frame_input(frame, bins).spec.attribute("age").bins is not None


@pytest.mark.parametrize("kind", ["pandas", "arrow"])
def test_a_pandas_or_arrow_frame_publishes_what_its_parquet_does(frame, tmp_path, kind):
    table = {"age": {"bins": [[0, 39], [40, 59], [60, 120]]}}
    data = frame if kind == "pandas" else pa.Table.from_pandas(frame, preserve_index=False)
    rel = _publish(data, tmp_path / "frame", table=table, engine="inprocess")
    files = _publish(_as_parquet(frame, tmp_path, table), tmp_path / "files", engine="inprocess")
    assert rel.manifest["source"]["path"] == (
        "pandas DataFrame" if kind == "pandas" else "pyarrow Table"
    )
    assert rel.manifest["source"]["rows"] == len(frame)
    assert rel.audit().passed
    assert same_contents(contents(rel.path), contents(files.path))


@pytest.mark.spark
def test_a_spark_dataframe_publishes_on_its_session_what_its_parquet_does(spark, frame, tmp_path):
    df = spark.createDataFrame(frame)
    rel = _publish(df, tmp_path / "frame")
    assert rel.manifest["engine"] == "spark"
    assert rel.manifest["source"]["path"] == "Spark DataFrame"
    files = _publish(_as_parquet(frame, tmp_path), tmp_path / "files", engine="inprocess")
    assert same_contents(contents(rel.path), contents(files.path))
    arrow = _publish(pa.Table.from_pandas(frame), tmp_path / "arrow", engine="spark")
    assert same_contents(contents(arrow.path), contents(files.path))


def test_an_unsupported_column_is_one_line_and_nothing_is_written(frame, tmp_path):
    bad = frame.assign(visits=[[1, 2]] * len(frame))
    with pytest.raises(vpub_spark.VpubError) as e:
        _publish(bad, tmp_path / "out", engine="inprocess")
    assert "column visits" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_an_override_naming_no_column_is_refused(frame, tmp_path):
    with pytest.raises(vpub_spark.VpubError, match="no column agee"):
        _publish(frame, tmp_path / "out", table={"agee": {"kind": "numeric"}})
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_a_spark_dataframe_is_not_published_in_process(spark, frame, tmp_path):
    with pytest.raises(vpub_spark.VpubError, match="on its session"):
        _publish(spark.createDataFrame(frame), tmp_path / "out", engine="inprocess")


def test_check_measures_a_frame_as_vpub_check_measures_its_file(frame, tmp_path):
    data = _as_parquet(frame, tmp_path)
    of_frame = vpub_spark.check(frame, qi="age, sex", sa="disease", model="k=2,l=2")
    of_file = vpub_spark.check(data, qi=["age", "sex"], sa="disease", model="k=2,l=2")
    assert of_frame.as_dict() == of_file.as_dict()
    assert of_frame.measured["k"] >= 1


def test_workers_without_vpub_spark_are_named_with_the_fix():
    from vpub_spark.engines.spark.errors import one_line

    text = "Traceback ...\nModuleNotFoundError: No module named 'vpub_spark'\n"
    line = str(one_line("Spark DataFrame", text))
    assert "PYSPARK_PYTHON" in line and "\n" not in line
