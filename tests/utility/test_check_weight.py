"""`vpub check` on the project's own exports:
each row weighs what it stands for, so a long anatomy export (one row per tuple and
sensitive value, `weight` = c_g(s) / |g|) counts the release's rows, not the file's;
wide exports (the sensitive attribute as `P(S=v)` columns) and generalized ones
(`count`, `size`) read the same; both engines agree. The measures are recomputed here
from the exported file with pandas."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
from release_helpers import config, job_table, marginal_release, vpub, write_table

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import DataError, SpecError
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.export import export
from vpub_spark.release.reader import open_release
from vpub_spark.utility.check import Model, check_table

RULES = ["age -> job", "sex -> zip"]  # UAD: an anatomy table (job, sex, zip) and a projection (age)
ROWS = 2500


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chkw")
    data = write_table(job_table(6, ROWS), tmp / "t")
    r = publish(
        config(
            data,
            tmp / "out",
            RULES,
            3,
            seed=2,
            output={"path": str(tmp / "out"), "release_id": "r"},
        ),
        InProcessEngine(),
    )
    return open_release(r.path)


@pytest.fixture(scope="module")
def exports(release, tmp_path_factory):
    """The anatomy table's long CSV and wide Parquet exports, and its QI and sensitive."""
    tmp = tmp_path_factory.mktemp("exports")
    t = next(x for x in release.tables if x["kind"] == "anatomy")
    long, _ = export(release, t["name"], tmp / "long.csv")
    wide, _ = export(release, t["name"], tmp / "wide.parquet", "parquet", "wide")
    s = t["sensitive"]
    return str(long), str(wide), [a for a in t["attributes"] if a != s], s


def _weighted_measures(df: pd.DataFrame, qi: list[str], s: str, w: str) -> dict:
    """k, distinct l, entropy l and equal-distance t of a weighted long table."""
    cells = df.groupby([*qi, s])[w].sum()
    cells = cells[cells > 0]
    size = cells.groupby(level=qi).sum()
    share = cells / size.reindex(cells.droplevel(s).index).to_numpy()
    p = cells.groupby(level=s).sum() / cells.sum()
    q = share.unstack(s, fill_value=0.0).reindex(columns=p.index, fill_value=0.0)
    return {
        "k": size.min(),
        "distinct_l": int(cells.groupby(level=qi).size().min()),
        "entropy_l": float(np.exp((-share * np.log(share)).groupby(level=qi).sum()).min()),
        "t": float((0.5 * (q - p).abs().sum(axis=1)).max()),
        "classes": len(size),
    }


def test_a_long_export_counts_the_releases_rows(exports):
    long, _, qi, s = exports
    df = pd.read_csv(long, dtype=str).assign(weight=lambda d: d["weight"].astype(float))
    report = check_table(InProcessEngine(), long, qi, s, Model.of(k=2, l=2))
    assert report.weight == "weight" and report.file_rows == len(df) > ROWS
    assert report.rows == ROWS  # the weighted row count is the release's, not the file's
    ours = _weighted_measures(df, qi, s, "weight")
    assert report.classes == ours["classes"]
    assert (
        report.measured["k"] == pytest.approx(ours["k"])
        and report.measured["distinct_l"] == ours["distinct_l"]
    )
    assert report.measured["entropy_l"] == pytest.approx(ours["entropy_l"])
    assert report.measured["t"] == pytest.approx(ours["t"])
    unweighted = check_table(InProcessEngine(), long, qi, s, Model(), weight="none")
    assert unweighted.rows == len(df) and unweighted.weight is None


def test_the_wide_export_reads_as_the_long_one(exports):
    long, wide, qi, s = exports
    model = Model.of(k=3, l=3, entropy_l=2.0, c=3.0, t=0.4)
    a = check_table(InProcessEngine(), long, qi, s, model)
    b = check_table(InProcessEngine(), wide, qi, s, model)
    assert b.rows == a.rows == ROWS and b.file_rows == ROWS and b.weight.endswith("(wide export)")
    assert (
        b.measured == pytest.approx(a.measured) and b.checks == a.checks and b.classes == a.classes
    )


def test_spark_equals_in_process_on_weighted_exports(exports, spark_engine):
    long, wide, qi, s = exports
    model = Model.of(k=3, l=2, t=0.3)
    for path in (long, wide):
        here = check_table(InProcessEngine(), path, qi, s, model)
        there = check_table(spark_engine, path, qi, s, model)
        assert (there.rows, there.classes, there.file_rows) == (
            here.rows,
            here.classes,
            here.file_rows,
        )
        assert there.measured == pytest.approx(here.measured) and there.checks == here.checks
        assert [w["k"] for w in there.worst] == pytest.approx([w["k"] for w in here.worst])


def test_generalized_exports(tmp_path):
    rel = open_release(marginal_release(tmp_path, 7, 1500).path)
    name = rel.tables[0]["name"]
    long, _ = export(rel, name, tmp_path / "g.csv")
    wide, _ = export(rel, name, tmp_path / "gw.csv", layout="wide")
    box = ["age_min", "age_max", "zip_min", "zip_max"]
    a = check_table(InProcessEngine(), str(long), box, "job", Model.of(k=3))
    b = check_table(InProcessEngine(), str(wide), box, "job", Model.of(k=3))
    assert (a.weight, a.rows, b.rows) == ("count", 1500, 1500) and b.weight.startswith("size x")
    assert b.measured == pytest.approx(a.measured) and a.checks == b.checks
    df = pd.read_csv(long, dtype=str).assign(count=lambda d: d["count"].astype(float))
    assert a.measured["k"] == _weighted_measures(df, box, "job", "count")["k"] >= 3
    explicit = check_table(InProcessEngine(), str(long), box, "job", Model.of(k=3), weight="count")
    assert explicit.measured == a.measured and explicit.rows == 1500


def test_bad_weights_are_refused(tmp_path):
    frame = pd.DataFrame({"a": ["x", "y"], "s": ["u", "v"], "w": ["1", "-0.5"]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError, match="negative value -0.5"):
        check_table(InProcessEngine(), str(tmp_path / "t.csv"), ["a"], "s", Model(), weight="w")
    with pytest.raises(SpecError, match="unknown weight column nope"):
        check_table(InProcessEngine(), str(tmp_path / "t.csv"), ["a"], "s", Model(), weight="nope")
    with pytest.raises(SpecError, match=r"unknown column t, and no P\(t=...\) columns"):
        check_table(InProcessEngine(), str(tmp_path / "t.csv"), ["a"], "t", Model())


def test_check_command_on_an_export(exports):
    long, _, qi, s = exports
    done = subprocess.run(
        vpub("check", long, "--qi", ",".join(qi), "--sa", s, "--model", "k=2", "--json"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    assert report["rows"] == ROWS and report["weight"] == "weight" and report["file_rows"] > ROWS
    plain = subprocess.run(
        vpub("check", long, "--qi", ",".join(qi), "--sa", s, "--weight", "none", "--json"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(plain.stdout)["rows"] == report["file_rows"]
    shown = subprocess.run(
        vpub("check", long, "--qi", ",".join(qi), "--sa", s),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert f"{ROWS:,} rows in" in " ".join(shown.stdout.split())
