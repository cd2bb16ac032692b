"""Analysis-ready export and SQL tables over a release: the flat files are what
pandas reads without vpub and their weighted counts are the release's estimates; the SQL
tables and the anatomy view give the same rows, in the session catalog and in a Hive
metastore (embedded Derby) that outlives the session."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import yaml
from release_helpers import config, job_table, marginal_release, vpub, write_table

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.estimate.codes import to_codes
from vpub_spark.lake.sql import register, sql_name
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.export import export
from vpub_spark.release.reader import open_release
from vpub_spark.utility.queries import estimate_count
from vpub_spark.utility.release_models import release_models

RULES = ["age -> job", "sex -> zip"]  # UAD: an anatomy table (job, sex, zip) and a projection (age)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exp")
    data = write_table(job_table(6, 2500), tmp / "t")
    r = publish(
        config(
            data,
            tmp / "out",
            RULES,
            3,
            seed=2,
            output={"path": str(tmp / "out"), "release_id": "2026-11-22.a"},
        ),
        InProcessEngine(),
    )
    return open_release(r.path)


def _anatomy(rel):
    return next(t for t in rel.tables if t["kind"] == "anatomy")


def test_long_export_weights_are_the_anatomy_estimate(release, tmp_path):
    t = _anatomy(release)
    path, notes = export(release, t["name"], tmp_path / "a.csv")
    df = pd.read_csv(path, dtype=str).assign(weight=lambda d: d["weight"].astype(float))
    rows = release.manifest["source"]["rows"]
    assert df["weight"].sum() == pytest.approx(rows)
    qi = [a for a in t["attributes"] if a != t["sensitive"]]
    assert np.allclose(
        df.groupby([*qi, "group_id"])["weight"].sum().groupby(["group_id"]).sum().to_numpy() >= 1,
        True,
    )
    models, domains = release_models(release)
    s, a = t["sensitive"], qi[0]
    for value in sorted(df[a].unique())[:5]:
        for sv in sorted(df[s].unique())[:3]:
            by_file = df.loc[(df[a] == value) & (df[s] == sv), "weight"].sum()
            codes = to_codes(pd.DataFrame({a: [value], s: [sv]}), domains)
            query = {a: frozenset([int(codes[a][0])]), s: frozenset([int(codes[s][0])])}
            assert by_file == pytest.approx(estimate_count(models, query, rows, domains))
    text = notes.read_text()
    assert all(f"`{c}`" in text for c in df.columns) and "l = 3" in text


def test_wide_and_parquet_exports(release, tmp_path):
    t = _anatomy(release)
    path, _ = export(release, t["name"], tmp_path / "w.parquet", "parquet", "wide")
    df = pd.read_parquet(path)
    probs = [c for c in df.columns if c.startswith(f"P({t['sensitive']}=")]
    assert len(df) == release.manifest["source"]["rows"] and np.allclose(df[probs].sum(axis=1), 1.0)
    proj = next(x for x in release.tables if x["kind"] == "projection")
    counts, _ = export(release, proj["name"], tmp_path / "p.csv")
    assert pd.read_csv(counts)["count"].sum() == release.manifest["source"]["rows"]


def test_generalized_export(tmp_path):
    rel = open_release(marginal_release(tmp_path, 7, 1500).path)
    name = rel.tables[0]["name"]
    long, _ = export(rel, name, tmp_path / "g.csv")
    df = pd.read_csv(long, dtype={"age_min": str, "age_max": str})
    assert {"age_min", "age_max", "zip_min", "zip_max", "job", "count"} <= set(df.columns)
    assert df["count"].sum() == 1500 and (df["age_min"] <= df["age_max"]).all()
    wide, _ = export(rel, name, tmp_path / "gw.csv", layout="wide")
    assert pd.read_csv(wide)["size"].sum() == 1500


def test_sql_tables_and_the_anatomy_view(release, spark, spark_engine):
    names = register(spark_engine, release)[0]
    t = _anatomy(release)
    rid = release.manifest["release_id"]
    assert (
        sql_name(rid, t["name"], "qit") in names
        and sql_name(rid, t["name"]) == f"r_2026_11_22_a_{t['name']}"
    )
    view = spark.table(sql_name(rid, t["name"])).toPandas()
    flat = pd.read_parquet(
        export(release, t["name"], release.path.parent / "v.parquet", "parquet")[0]
    )
    key = [*[a for a in t["attributes"]], "group_id"]
    got = view.groupby(key)["weight"].sum().sort_index()
    want = flat.groupby(key)["weight"].sum().sort_index()
    assert got.index.equals(want.index) and np.allclose(got.to_numpy(), want.to_numpy())
    assert register(spark_engine, release)[0] == names  # re-registering replaces


def test_a_release_on_s3_is_registered_as_temporary_views(s3, release, spark, spark_engine):
    """No Hadoop S3 connector: the views are read by the tasks through pyarrow.fs, and
    give the same rows as the external tables over the local copy."""
    from s3_helpers import new_bucket

    from vpub_spark.lake import objectstore

    uri = f"{new_bucket()}/lake/r"
    for f in [p for p in release.path.rglob("*") if p.is_file()]:
        objectstore.write_bytes(f"{uri}/{f.relative_to(release.path).as_posix()}", f.read_bytes())
    remote = open_release(uri, in_place=True)
    t, rid = _anatomy(release), release.manifest["release_id"]
    register(spark_engine, release)[0]
    local_view = spark.table(sql_name(rid, t["name"])).toPandas()
    names = register(spark_engine, remote)[0]
    assert all(spark.catalog.getTable(n).isTemporary for n in names)
    view = spark.table(sql_name(rid, t["name"])).toPandas()
    key = [*t["attributes"], "group_id"]
    assert (
        view.sort_values(key)
        .reset_index(drop=True)
        .equals(local_view.sort_values(key).reset_index(drop=True))
    )


def test_hive_metastore_outlives_the_session(release, tmp_path):
    settings = tmp_path / "hive.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "master": "local[1]",
                "driver_memory": "1g",
                "conf": {
                    "spark.sql.catalogImplementation": "hive",
                    "spark.sql.warehouse.dir": str(tmp_path / "warehouse"),
                    "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp_path / 'metastore'};create=true",
                },
            }
        )
    )
    t = _anatomy(release)
    view = sql_name(release.manifest["release_id"], t["name"])
    done = subprocess.run(
        vpub(
            "releases",
            "register",
            str(release.path.parent),
            release.path.name,
            "--spark-conf",
            str(settings),
        ),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "registered in the hive catalog" in done.stdout, done.stderr
    later = textwrap.dedent(f"""
        from vpub_spark.engines.spark.session import SparkSettings, get_session
        spark = get_session(SparkSettings.load({str(settings)!r}))
        print("SUM", spark.sql("SELECT SUM(weight) AS w FROM {view}").collect()[0][0])
    """)
    again = subprocess.run(
        [sys.executable, "-c", later], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr[-2000:]
    total = float(
        next(line for line in again.stdout.splitlines() if line.startswith("SUM")).split()[1]
    )
    assert total == pytest.approx(release.manifest["source"]["rows"])


def test_the_data_dictionary_names_both_guarantees():
    """The export's dictionary says the audited and the posterior guarantee apart; with
    the QI-local dealing (not algorithm-safe) it says there is no posterior one, and so
    does the catalog's `guarantee` field."""
    from vpub_spark.release.export import guarantee_lines
    from vpub_spark.serve.catalog import guarantee

    safe = guarantee_lines({"privacy": {"model": "m-invariance", "m": 4}})
    assert safe[0].startswith("- Audited guarantee:") and "1/4" in safe[0]
    assert safe[1].startswith("- Posterior guarantee: an adversary who knows the algorithm")
    local = guarantee_lines({"privacy": {"m": 4}, "method_cost": {"assign": "local-unsafe"}})
    assert local[1].startswith("- Posterior guarantee: none")
    unsafe = {
        "privacy": {"model": "m-invariance", "m": 4},
        "method_cost": {"assign": "local-unsafe"},
    }
    assert guarantee(unsafe) == (
        "m-invariance (m = 4), audited only: no posterior guarantee"
        " (marginals.assign: local-unsafe)"
    )
    assert guarantee({"privacy": {"model": "m-invariance", "m": 4}}) == "m-invariance (m = 4)"
