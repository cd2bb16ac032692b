"""Iceberg tables over releases (lake/iceberg.py, `vpub releases register --iceberg`): a
real pyiceberg SQL catalog on SQLite, its warehouse on local disk and on a real
S3-compatible server; each table read back through pyiceberg and DuckDB equal to the
release's files, one snapshot per re-publication of the family, the release's
properties, and refused releases never registered."""

from __future__ import annotations

import json
import subprocess

import duckdb
import pandas as pd
import pytest
from release_helpers import config, vpub

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import DataError
from vpub_spark.lake.catalog import Root
from vpub_spark.lake.iceberg import open_catalog, register_iceberg
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.reader import open_release
from vpub_spark.storage import is_remote

RULES = ["age, zip -> job", "sex -> job"]


def _publish(table, root: str, seed: int) -> str:
    out = {"path": root, "release_id": f"r{seed}", "family": "jobs"}
    publish(config(table, root, RULES, 3, seed=seed, output=out), InProcessEngine())
    return f"r{seed}"


def _release(root: str, rid: str):
    return open_release(Root(root).uri(rid), in_place=is_remote(root))


def _parts(rel) -> dict[str, tuple[pd.DataFrame, set[str]]]:
    """Every part of the release by its Iceberg name: its rows, read from the release's
    own files, and where those files lie (`<release>/tables/<table>/<part>/<file>`)."""
    out = {}
    for entry in rel.tables:
        for part in entry["parts"]:
            names = rel.part_files(entry["name"], part)
            rows = pd.concat(
                [pd.read_parquet(rel.local_file(entry["name"], part, f)) for f in names],
                ignore_index=True,
            )
            rid = rel.manifest["release_id"]
            where = {f"/{rid}/tables/{entry['name']}/{part}/{f}" for f in names}
            out[f"vpub.jobs_{entry['name']}_{part}".replace("-", "_").lower()] = (rows, where)
    return out


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    cols = sorted(a.columns)
    key = lambda df: df[cols].astype(str).sort_values(cols).reset_index(drop=True)  # noqa: E731
    return sorted(a.columns) == sorted(b.columns) and key(a).equals(key(b))


def test_register_read_back_snapshots_and_properties(table, root, tmp_path):
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"{root}/_iceberg/warehouse" if is_remote(root) else str(tmp_path / "wh")
    first = _release(root, _publish(table, root, 1))
    done = register_iceberg(first, catalog_uri, warehouse)
    assert all(done.changed) and len(done.tables) == sum(len(t["parts"]) for t in first.tables)
    catalog = open_catalog(catalog_uri, warehouse)
    expected = _parts(first)
    assert set(expected) == set(done.tables)
    con = duckdb.connect()
    for name, (frame, where) in expected.items():
        t = catalog.load_table(name)
        assert _same(t.scan().to_pandas(), frame)  # through pyiceberg
        files = t.inspect.files().column("file_path").to_pylist()
        assert {f[f.index("/r1/") :] for f in files} == where  # the release's files, no copy
        assert _same(
            t.scan().to_duckdb("part", connection=con).sql("select * from part").df(), frame
        )
        props = t.properties
        assert props["vpub.release_id"] == "r1" and props["vpub.family"] == "jobs"
        assert json.loads(props["vpub.privacy"]) == first.manifest["privacy"]
        assert props["vpub.audit"].startswith("passed")
    assert not any(register_iceberg(first, catalog_uri, warehouse).changed)  # no-op twice
    second = _release(root, _publish(table, root, 2))
    register_iceberg(second, catalog_uri, warehouse)
    for name, (frame, _) in _parts(second).items():
        t = catalog.load_table(name)
        assert _same(t.scan().to_pandas(), frame) and t.properties["vpub.release_id"] == "r2"
        snaps = t.snapshots()
        assert len(snaps) == 2  # one per release of the family
        back = t.scan(snapshot_id=snaps[0].snapshot_id).to_pandas()  # time travel to r1
        assert _same(back, expected[name][0])
        assert t.current_snapshot().summary["vpub.release_id"] == "r2"


def test_refused_releases_are_never_registered(table, tmp_path):
    root = str(tmp_path / "lake")
    rel = _release(root, _publish(table, root, 3))
    catalog_uri, warehouse = f"sqlite:///{tmp_path / 'c.db'}", str(tmp_path / "wh")
    (rel.path / "_SUCCESS").rename(rel.path / "_SUCCESS.off")
    with pytest.raises(DataError, match="only a committed release can be registered"):
        register_iceberg(_release(root, "r3"), catalog_uri, warehouse)
    (rel.path / "_SUCCESS.off").rename(rel.path / "_SUCCESS")
    failed = _release(root, "r3")
    failed.manifest["audit"] = {"passed": False, "checks": 3}
    with pytest.raises(DataError, match="records no passed audit"):
        register_iceberg(failed, catalog_uri, warehouse)
    assert open_catalog(catalog_uri, warehouse).list_namespaces() == []  # nothing written


def test_the_cli_registers_into_the_default_catalog(table, tmp_path):
    root = str(tmp_path / "lake")
    _publish(table, root, 4)
    run = lambda: subprocess.run(  # noqa: E731
        vpub("releases", "register", root, "r4", "--iceberg"), capture_output=True, text=True
    )
    r = run()
    assert r.returncode == 0, r.stderr
    assert "a new snapshot" in r.stdout
    assert "already holds this release" in run().stdout
    catalog = open_catalog(
        f"sqlite:///{tmp_path / 'lake' / '_iceberg' / 'catalog.db'}",
        str(tmp_path / "lake" / "_iceberg" / "warehouse"),
    )
    assert catalog.list_tables("vpub")


def test_bench_lake_times_registration_and_both_queries(tmp_path):
    """`vpub bench lake` on 30,000 rows: two publishes of one family, both registered
    (the first making the tables, the second one snapshot each), and the same estimate
    from `vpub query`'s path and from the DuckDB SQL; the JSON holds what it printed."""
    from vpub_bench.bench_lake import BenchLake, bench_lake

    results = bench_lake(BenchLake(rows=30_000, repeat=1, out=str(tmp_path / "b")))
    written = json.loads((tmp_path / "b" / "lake.json").read_text())
    assert any(r[0].startswith("register as Iceberg") for r in written["tables"][0]["rows"])
    assert results["iceberg_tables"] >= 2 and results["estimate"] > 0
    assert all(x > 0 for x in [*results["publish_s"], *results["register_s"]])
    assert results["vpub_query_s"] > 0 and results["duckdb_s"] > 0
    catalog = open_catalog(
        f"sqlite:///{(tmp_path / 'b' / 'releases' / 'catalog.db').resolve()}",
        str(tmp_path / "b" / "releases" / "wh"),
    )
    name = catalog.list_tables("vpub")[0]
    assert len(catalog.load_table(name).snapshots()) == 2  # two releases, one snapshot each
