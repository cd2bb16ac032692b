"""Delta tables of releases (lake/delta.py, `vpub releases register --delta`): one table
per part, read back with deltalake (and DuckDB's `delta_scan` where its extension is
installed) equal to the release's files; one version per release of the family, time
travel back to the previous release; registering twice changes nothing; a refused
release writes nothing."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
from release_helpers import config, vpub

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.lake.catalog import Root
from vpub_spark.lake.delta import register_delta
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.reader import open_release

RULES = ["age, zip -> job", "sex -> job"]


def _publish(table, root: str, seed: int):
    out = {"path": root, "release_id": f"r{seed}", "family": "jobs"}
    publish(config(table, root, RULES, 3, seed=seed, output=out), InProcessEngine())
    return open_release(Root(root).uri(f"r{seed}"))


def _rows(rel) -> dict[str, pd.DataFrame]:
    """Every part's rows by its Delta table's name."""
    return {
        f"jobs_{e['name']}_{part}".lower(): rel.read(e["name"], part).to_pandas()
        for e in rel.tables
        for part in e["parts"]
    }


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    cols = sorted(a.columns)
    key = lambda df: df[cols].astype(str).sort_values(cols).reset_index(drop=True)  # noqa: E731
    return sorted(a.columns) == sorted(b.columns) and key(a).equals(key(b))


def test_register_read_back_versions_and_properties(table, tmp_path):
    from deltalake import DeltaTable

    root, lake = str(tmp_path / "lake"), tmp_path / "delta"
    first, second = _publish(table, root, 1), _publish(table, root, 2)
    done = register_delta(first, str(lake))
    assert all(done.changed) and {p.rsplit("/", 1)[-1] for p in done.tables} == set(_rows(first))
    assert register_delta(second, str(lake)).changed == (True,) * len(done.tables)
    assert not any(register_delta(second, str(lake)).changed)  # registered twice: no change
    for name, rows in _rows(second).items():
        t = DeltaTable(str(lake / name))
        assert t.version() == 1
        assert _same(t.to_pyarrow_table().to_pandas(), rows)
        assert t.history(1)[0]["vpub.release_id"] == "r2"
        assert json.loads(t.history(1)[0]["vpub.privacy"])["l"] == 3
        old = DeltaTable(str(lake / name), version=0).to_pyarrow_table().to_pandas()
        assert _same(old, _rows(first)[name])  # time travel: the previous release


def test_duckdb_reads_the_delta_tables(table, tmp_path):
    import duckdb

    con = duckdb.connect()
    try:
        con.sql("LOAD delta")
    except duckdb.Error:
        try:
            con.sql("INSTALL delta; LOAD delta")
        except duckdb.Error as e:
            reason = str(e).splitlines()[0]
            pytest.skip(f"DuckDB's delta extension is not installed and cannot be: {reason}")
    root, lake = str(tmp_path / "lake"), tmp_path / "delta"
    rel = _publish(table, root, 1)
    register_delta(rel, str(lake))
    for name, rows in _rows(rel).items():
        assert _same(con.sql(f"SELECT * FROM delta_scan('{lake / name}')").df(), rows)


def test_the_command_line_registers_and_refuses_an_uncommitted_release(table, tmp_path):
    root = str(tmp_path / "lake")
    rel = _publish(table, root, 1)
    done = subprocess.run(
        vpub("releases", "register", root, "r1", "--delta"), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()[1:]
    assert sorted(x.split(":")[0].strip() for x in lines) == sorted(_rows(rel))
    assert all(x.endswith(": a new version") for x in lines)
    assert (tmp_path / "lake" / "_delta").is_dir()
    (tmp_path / "lake" / "r1" / "_SUCCESS").unlink()
    refused = subprocess.run(
        vpub("releases", "register", root, "r1", "--delta", str(tmp_path / "d2")),
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "d2").exists()
