"""An analyst reads a release without vpub (docs/how-to/use-a-release.md, "Read a release
with DuckDB or pandas"): the DuckDB SQL and the pandas lines of the docs, run on a
release's anatomy table, give the release's own estimate for every (QI value,
sensitive value) pair tried."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from release_helpers import config, job_table, write_table

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.reader import open_release
from vpub_spark.utility.queries import estimate_count
from vpub_spark.utility.release_models import release_models
from vpub_spark.utility.where import parse_where

SQL = """
WITH qit AS (SELECT * FROM read_parquet('{t}/qit/*.parquet')),
     st AS (SELECT * FROM read_parquet('{t}/st/*.parquet')),
     size AS (SELECT group_id, SUM("count") AS n FROM st GROUP BY group_id)
SELECT SUM(st."count" / size.n) AS estimate
FROM qit JOIN st USING (group_id) JOIN size USING (group_id)
WHERE qit.{a} = $qi AND st.{s} = $sv
"""


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("duck")
    data = write_table(job_table(8, 3000), tmp / "t")
    out = {"path": str(tmp / "out"), "release_id": "r"}
    cfg = config(data, tmp / "out", ["age -> job", "sex -> zip"], 3, seed=4, output=out)
    return open_release(publish(cfg, InProcessEngine()).path)


def test_duckdb_and_pandas_give_the_release_estimate(rel):
    entry = next(t for t in rel.tables if t["kind"] == "anatomy")
    s = entry["sensitive"]
    a = next(x for x in entry["attributes"] if x != s)
    t = rel.path / "tables" / entry["name"]
    qit, st = pd.read_parquet(t / "qit"), pd.read_parquet(t / "st")
    st["weight"] = st["count"] / st.groupby("group_id")["count"].transform("sum")
    rows = qit.merge(st, on="group_id")
    models, domains = release_models(rel)
    n, tried = int(rel.manifest["source"]["rows"]), 0
    for qi in sorted(qit[a].unique())[:4]:
        for sv in sorted(st[s].unique())[:3]:
            ours = estimate_count(
                models, parse_where(f"{a} = '{qi}' and {s} = '{sv}'", domains), n, domains
            )
            sql = SQL.format(t=t, a=a, s=s)
            (by_duckdb,) = duckdb.execute(sql, {"qi": qi, "sv": sv}).fetchone()
            by_pandas = rows.loc[(rows[a] == qi) & (rows[s] == sv), "weight"].sum()
            assert (by_duckdb or 0.0) == pytest.approx(ours) and by_pandas == pytest.approx(ours)
            tried += ours > 0
    assert tried >= 6  # most pairs have a non-zero estimate: the test compares numbers


def test_vpub_query_reader_duckdb(rel):
    """`vpub query --reader duckdb` (lake/duckdb.py): the release's estimate for queries
    one anatomy or projection table holds, value lists included, and for queries over
    several tables that share no attribute."""
    from vpub_spark.errors import SpecError
    from vpub_spark.lake.duckdb import duckdb_count
    from vpub_spark.utility.queries import duckdb_estimate

    models, domains = release_models(rel)
    n = int(rel.manifest["source"]["rows"])
    held = [t for t in rel.tables if t["kind"] in ("anatomy", "projection")]
    assert {t["kind"] for t in held} == {"anatomy", "projection"}
    for t in held:
        for a in t["attributes"]:
            values = list(domains[a])[:2]
            where = f"{a} in ({', '.join(repr(v) for v in values)})"
            query = parse_where(where, domains)
            by_sql, table = duckdb_count(rel, query, domains)
            assert table == t["name"] or set(query) <= set(
                next(x for x in rel.tables if x["name"] == table)["attributes"]
            )
            assert by_sql == pytest.approx(estimate_count(models, query, n, domains))
            assert duckdb_estimate(rel, where)[0] == pytest.approx(by_sql)  # labels by DuckDB
    # a query over two tables that share no attribute (UAD): the product of their counts
    apart = [next(iter(held[0]["attributes"])), next(iter(held[1]["attributes"]))]
    where = " and ".join(f"{a} in ({domains[a][0]!r}, {domains[a][1]!r})" for a in apart)
    query = parse_where(where, domains)
    assert not any(set(apart) <= set(t["attributes"]) for t in held)  # two tables' attributes
    with pytest.raises(
        SpecError, match="DuckDB answers a query over anatomy and projection tables"
    ):
        duckdb_count(rel, query, domains)  # one table's SQL cannot
    est, tables = duckdb_estimate(rel, where)
    assert est == pytest.approx(estimate_count(models, query, n, domains), rel=1e-12)
    assert est > 0 and set(tables.split(", ")) == {held[0]["name"], held[1]["name"]}


def test_vpub_query_reader_duckdb_on_overlapping_tables(tmp_path):
    """GD's tables share attributes: DuckDB runs the junction tree's message passing as
    SQL (`lake/duckdb.tree_count`) and gives the release's estimate for queries inside
    one table, across tables and with value lists; an attribute no table shows is
    refused, naming the tables."""
    import itertools

    from vpub_spark.errors import SpecError
    from vpub_spark.utility.queries import duckdb_estimate

    data = write_table(job_table(3, 2000), tmp_path / "t")
    out = {"path": str(tmp_path / "out"), "release_id": "g"}
    rules = ["age -> job", "sex, job -> zip"]
    cfg = config(data, tmp_path / "out", rules, 3, method="gd", output=out)
    rel = open_release(publish(cfg, InProcessEngine()).path)
    models, domains = release_models(rel)
    n = int(rel.manifest["source"]["rows"])
    names = [a for t in rel.tables for a in t["attributes"]]
    assert len(names) > len(set(names)) and len(rel.tables) > 2, rel.tables  # they overlap
    attrs = sorted(set(names))
    tried = 0
    for k in (1, 2, 3):
        for chosen in itertools.combinations(attrs, k):
            where = " and ".join(
                f"{a} in ({', '.join(repr(v) for v in list(domains[a])[i % 2 :: 3])})"
                for i, a in enumerate(chosen)
            )
            est, _ = duckdb_estimate(rel, where)
            ours = estimate_count(models, parse_where(where, domains), n, domains)
            assert est == pytest.approx(ours, rel=1e-9, abs=1e-9), where
            tried += est > 0
    assert tried > 5
    with pytest.raises(SpecError, match="DuckDB answers a query over anatomy and projection"):
        duckdb_estimate(rel, f"{attrs[0]} = {domains[attrs[0]][0]!r} and salary = '1'")
