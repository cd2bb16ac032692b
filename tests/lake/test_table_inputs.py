"""Tables as input (sources.py): a Delta table (deltalake), an Iceberg table (pyiceberg's
SQL catalog) and a table of the Spark session's catalog each publish the release the
same rows give as Parquet (same seed); the manifest names the table and the version
read, so a release of a changed table differs from the last (`releases diff`); a missing
table and a version the table does not have are one line, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from release_helpers import contents, same_contents

import vpub_spark
from vpub_spark.frames import frame_input
from vpub_spark.lake.catalog import diff
from vpub_spark.tablespec import write_table_spec

RULES = ["age, sex -> disease"]


def _rows(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "hiv", "cold", "gout", "acne"], n),
        }
    )


@pytest.fixture(scope="module")
def versions() -> list[pd.DataFrame]:
    """The table's rows at version 0 and at version 1 (rows appended)."""
    first = _rows(1, 900)
    return [first, pd.concat([first, _rows(2, 300)], ignore_index=True)]


@pytest.fixture(scope="module")
def delta(tmp_path_factory, versions) -> str:
    from deltalake import write_deltalake

    path = str(tmp_path_factory.mktemp("delta") / "patients")
    write_deltalake(path, pa.Table.from_pandas(versions[0], preserve_index=False))
    write_deltalake(
        path, pa.Table.from_pandas(versions[1][900:], preserve_index=False), mode="append"
    )
    return path


def _as_parquet(frame: pd.DataFrame, directory) -> str:
    (directory / "data").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pandas(frame, preserve_index=False), directory / "data" / "p.parquet"
    )
    write_table_spec(frame_input(frame, name="patients").spec, directory / "table.yaml")
    return str(directory)


def _publish(input_section: dict, out, engine="inprocess", **kw):
    config = {"input": input_section, "rules": RULES, "privacy": {"l": 3}, "engine": engine}
    config |= {"output": {"path": str(out)}, "seed": 4} | kw
    return vpub_spark.publish(config)


def test_a_delta_table_publishes_what_its_rows_as_parquet_do(delta, versions, tmp_path):
    rel = _publish({"delta": delta}, tmp_path / "delta")
    assert rel.manifest["source"]["path"] == "delta:.../patients"
    assert rel.manifest["source"]["version"] == 1
    assert rel.manifest["source"]["rows"] == len(versions[1])
    files = _publish({"path": _as_parquet(versions[1], tmp_path / "pq")}, tmp_path / "files")
    assert same_contents(contents(rel.path), contents(files.path))
    assert rel.audit().passed


def test_an_older_version_is_read_and_the_change_shows_in_the_diff(delta, versions, tmp_path):
    old = _publish({"delta": delta, "version": 0}, tmp_path / "v0")
    new = _publish({"delta": delta}, tmp_path / "v1")
    assert old.manifest["source"]["version"] == 0
    assert old.manifest["source"]["rows"] == len(versions[0])
    assert ("source data", len(versions[0]), len(versions[1])) in diff(old.manifest, new.manifest)


def test_a_version_the_table_lacks_is_one_line_exit_2_nothing_written(delta, tmp_path):
    config = {
        "input": {"delta": delta, "version": 7},
        "rules": RULES,
        "privacy": {"l": 3},
        "engine": "inprocess",
        "output": {"path": str(tmp_path / "out")},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "vpub_spark.cli", "publish", "--config", str(tmp_path / "job.yaml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "version 7" in lines[0], done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_missing_delta_table_is_one_line(tmp_path):
    with pytest.raises(vpub_spark.VpubError, match="no Delta table"):
        _publish({"delta": str(tmp_path / "nothing")}, tmp_path / "out")


def test_an_iceberg_table_publishes_what_its_rows_as_parquet_do(versions, tmp_path):
    from vpub_spark.lake.iceberg import open_catalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog = open_catalog(uri, str(tmp_path / "warehouse"))
    catalog.create_namespace("clinic")
    first = pa.Table.from_pandas(versions[0], preserve_index=False)
    table = catalog.create_table("clinic.patients", schema=first.schema)
    table.append(first)
    snapshot = table.current_snapshot().snapshot_id
    table.append(pa.Table.from_pandas(versions[1][900:], preserve_index=False))
    rel = _publish({"iceberg": "clinic.patients", "catalog": uri}, tmp_path / "ice")
    assert rel.manifest["source"]["path"] == "iceberg:clinic.patients"
    assert rel.manifest["source"]["version"] == table.current_snapshot().snapshot_id
    files = _publish({"path": _as_parquet(versions[1], tmp_path / "pq")}, tmp_path / "files")
    assert same_contents(contents(rel.path), contents(files.path))
    old = _publish(
        {"iceberg": "clinic.patients", "catalog": uri, "version": snapshot}, tmp_path / "old"
    )
    assert old.manifest["source"]["rows"] == len(versions[0])
    with pytest.raises(vpub_spark.VpubError, match="no such table"):
        _publish({"iceberg": "clinic.nothing", "catalog": uri}, tmp_path / "none")


@pytest.mark.spark
def test_a_catalog_table_publishes_on_spark_what_its_rows_as_parquet_do(spark, versions, tmp_path):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS clinic LOCATION '{tmp_path / 'warehouse'}'")
    spark.createDataFrame(versions[1]).write.mode("overwrite").saveAsTable("clinic.patients")
    try:
        rel = _publish({"catalog": "clinic.patients"}, tmp_path / "cat", engine="spark")
        assert rel.manifest["source"]["path"] == "catalog:clinic.patients"
        files = _publish({"path": _as_parquet(versions[1], tmp_path / "pq")}, tmp_path / "files")
        assert same_contents(contents(rel.path), contents(files.path))
        with pytest.raises(vpub_spark.VpubError, match="no such table"):
            _publish({"catalog": "clinic.nothing"}, tmp_path / "none", engine="spark")
        with pytest.raises(vpub_spark.VpubError, match="use the Spark engine"):
            _publish({"catalog": "clinic.patients"}, tmp_path / "ip", engine="inprocess")
    finally:
        spark.sql("DROP DATABASE IF EXISTS clinic CASCADE")
