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


HIVE_TABLE = """
import sys
import pandas as pd
from vpub_spark.engines.spark.session import SparkSettings, get_session
spark = get_session(SparkSettings.load(sys.argv[1]))
spark.createDataFrame(pd.read_parquet(sys.argv[2])).write.saveAsTable("default.patients")
"""


@pytest.mark.spark
def test_a_hive_metastore_table_is_published_from_the_command_line(versions, tmp_path):
    """A table saved to a Hive metastore by one session, published by `vpub publish`
    in another (`--input catalog:...`); a missing table is one line and exit 2."""
    settings = tmp_path / "hive.yaml"
    hive = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(tmp_path / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp_path / 'metastore'};create=true",
    }
    settings.write_text(yaml.safe_dump({"master": "local[1]", "driver_memory": "1g", "conf": hive}))
    rows = tmp_path / "rows.parquet"
    versions[1].to_parquet(rows)
    run = {"capture_output": True, "text": True, "timeout": 600, "cwd": tmp_path}
    made = subprocess.run([sys.executable, "-c", HIVE_TABLE, str(settings), str(rows)], **run)
    assert made.returncode == 0, made.stderr[-2000:]
    job = tmp_path / "job.yaml"
    config = {"input": {"path": "unused"}, "rules": RULES, "privacy": {"l": 3}, "seed": 4}
    config |= {"engine": "spark", "spark": str(settings), "output": {"path": str(tmp_path / "out")}}
    job.write_text(yaml.safe_dump(config))
    cli = [sys.executable, "-m", "vpub_spark.cli", "publish", "--config", str(job)]
    done = subprocess.run([*cli, "--input", "catalog:default.patients"], **run)
    assert done.returncode == 0, done.stderr[-2000:]
    files = _publish({"path": _as_parquet(versions[1], tmp_path / "pq")}, tmp_path / "files")
    published = next((tmp_path / "out").glob("*/manifest.json")).parent
    assert same_contents(contents(published), contents(files.path))
    missing = subprocess.run([*cli, "--input", "catalog:default.nothing"], **run)
    assert missing.returncode == 2
    lines = missing.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such table" in lines[0], missing.stderr
    assert [p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("_")] == [
        published.name
    ]


def test_a_delta_column_of_another_type_is_one_line_exit_2(tmp_path):
    from deltalake import write_deltalake

    path = tmp_path / "visits"
    write_deltalake(str(path), pa.table({"age": [30, 40], "visits": [[1, 2], [3]]}))
    job = tmp_path / "job.yaml"
    config = {"input": {"delta": str(path)}, "rules": ["age -> visits"], "privacy": {"l": 2}}
    job.write_text(yaml.safe_dump(config | {"output": {"path": str(tmp_path / "out")}}))
    done = subprocess.run(
        [sys.executable, "-m", "vpub_spark.cli", "publish", "--config", str(job)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "column visits" in lines[0], done.stderr
    assert not (tmp_path / "out").exists()
