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
from vpub_spark.publish.pipeline import publish
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


def test_duckdb_and_pandas_give_the_release_estimate(tmp_path):
    data = write_table(job_table(8, 3000), tmp_path / "t")
    out = {"path": str(tmp_path / "out"), "release_id": "r"}
    rel = open_release(
        publish(
            config(data, tmp_path / "out", ["age -> job", "sex -> zip"], 3, seed=4, output=out),
            InProcessEngine(),
        ).path
    )
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
