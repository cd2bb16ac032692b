"""`vpub statdb build` (004 §5): a store made without publishing, in the marginal
publisher's format; the same buckets on both engines; marginals added later stay
jointly m-invariant with the query answers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from release_helpers import write_table

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError
from vpub_spark.publishing.marginals_add import add_marginal
from vpub_spark.release.stores.audit import audit_store
from vpub_spark.release.stores.store import bucket_files, read_store
from vpub_spark.statdb.build import build_store
from vpub_spark.statdb.db import StatDB


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(9)
    n = 2000
    age = rng.integers(20, 70, n)
    frame = pd.DataFrame(
        {
            "age": age.astype(str),
            "zip": rng.integers(10, 30, n).astype(str),
            "salary": [f"s{x:02d}" for x in (age // 4 + rng.integers(0, 9, n)) % 15],
        }
    )
    return write_table(frame, tmp_path_factory.mktemp("d") / "t")


def _cfg(data, tmp, engine="inprocess", **marg):
    return config_from_dict(
        {
            "input": {"path": str(data)},
            "privacy": {"model": "m-invariance", "m": 5},
            "engine": engine,
            "seed": 3,
            "marginals": {
                "sensitive": "salary",
                "qi": ["age", "zip"],
                "state": str(tmp / "private" / "store"),
                "chunk_rows": 700,
            }
            | marg,
        }
    )


def _buckets(state):
    return (
        pd.concat([pq.read_table(f).to_pandas() for f in bucket_files(state)])
        .sort_values("row")
        .reset_index(drop=True)
    )


def test_build_then_query_then_add_a_marginal(data, tmp_path):
    built = build_store(_cfg(data, tmp_path), InProcessEngine())
    assert built.rows == 2000 and built.buckets > 10 and built.chunks >= 2
    meta = read_store(built.state)
    assert meta["published"] == [] and meta["qi"] == ["age", "zip"]
    db = StatDB.open(built.state)
    answer = db.count("age between 30 and 45 and salary in (s03, s04)")
    q = db.query("age between 30 and 45 and salary in (s03, s04)")
    source = pd.read_csv(data / "data" / "part.csv", dtype=str)  # the truth, not the store's copy
    ages = pd.to_numeric(source["age"])
    truth = int(((ages >= 30) & (ages <= 45) & source["salary"].isin(["s03", "s04"])).sum())
    assert answer.low <= truth <= answer.high
    assert db.domains["age"][q.ranges["age"][0]] == "30"  # the query reads as written
    r = add_marginal(built.state, ["age"], tmp_path / "out", "later")
    assert (
        r.audit.passed and audit_store(built.state).passed
    )  # joint m-invariance, re-checked privately


def test_the_local_dealing_builds_a_valid_store(data, tmp_path):
    """`marginals.assign: local-unsafe` in a store (one sub-table per chunk): every bucket still
    m-unique with each of its values equally often, and the intervals still hold the
    truth. (A store's bucket merges every run of one signature in its chunk, so the
    dealing barely changes its span: a mean age range of 40.7 against 41.9 here.)"""
    source = pd.read_csv(data / "data" / "part.csv", dtype=str)
    ages = pd.to_numeric(source["age"])
    built = build_store(_cfg(data, tmp_path, assign="local-unsafe"), InProcessEngine())
    assert StatDB.open(built.state).meta["assign"] == "local-unsafe"  # the page reads it
    b = _buckets(built.state)
    counts = b.groupby(["bucket", "salary"]).size()
    assert (counts.groupby(level=0).nunique() == 1).all()  # each value equally often
    assert (counts.groupby(level=0).size() >= 5).all()  # m = 5 values at least
    db = StatDB.open(built.state)
    for lo, hi, jobs in ((20, 29, ["s01"]), (30, 45, ["s03", "s04"]), (50, 69, ["s10"])):
        truth = int(((ages >= lo) & (ages <= hi) & source["salary"].isin(jobs)).sum())
        answer = db.count(f"age between {lo} and {hi} and salary in ({', '.join(jobs)})")
        assert answer.low <= truth <= answer.high


@pytest.mark.spark
def test_spark_builds_the_same_buckets(data, tmp_path, spark_engine):
    a = build_store(_cfg(data, tmp_path / "a"), InProcessEngine())
    b = build_store(_cfg(data, tmp_path / "b", engine="spark"), spark_engine)
    assert _buckets(a.state).equals(_buckets(b.state))


def test_bad_builds_are_refused_and_leave_nothing(data, tmp_path):
    with pytest.raises(SpecError, match="needs marginals.qi"):
        build_store(_cfg(data, tmp_path, qi=None), InProcessEngine())
    with pytest.raises(SpecError, match="'wage' is not an attribute"):
        build_store(_cfg(data, tmp_path, sensitive="wage"), InProcessEngine())
    assert not (tmp_path / "private" / "store").exists()


def test_the_cli_builds_a_store(data, tmp_path, capsys):
    conf = tmp_path / "s.yaml"
    conf.write_text(
        json.dumps(
            {
                "input": {"path": str(data)},
                "privacy": {"model": "m-invariance", "m": 5},
                "engine": "inprocess",
                "marginals": {
                    "sensitive": "salary",
                    "qi": ["age", "zip"],
                    "state": str(tmp_path / "store"),
                },
            }
        )
    )
    assert main(["statdb", "build", "--config", str(conf)]) == 0
    assert "store built" in capsys.readouterr().out
    assert (
        main(["statdb", "query", str(tmp_path / "store"), "--where", "zip between 12 and 20"]) == 0
    )


def test_build_on_an_existing_marginals_store_reuses_its_buckets(store, tmp_path, capsys):
    """004 Lemma 4: the store the marginals came from is the one answers come from."""
    state = store[0]
    before = {f.name: f.read_bytes() for f in bucket_files(state)}
    assert main(["statdb", "build", "--state", str(state)]) == 0
    assert "reusing the store" in capsys.readouterr().out
    assert {f.name: f.read_bytes() for f in bucket_files(state)} == before
    meta = read_store(state)
    conf = tmp_path / "s.yaml"
    conf.write_text(
        json.dumps(
            {
                "input": {"path": str(tmp_path / "unused")},
                "privacy": {"model": "m-invariance", "m": meta["m"]},
                "engine": "inprocess",
                "marginals": {
                    "sensitive": meta["sensitive"],
                    "qi": meta["qi"],
                    "state": str(state),
                },
            }
        )
    )
    assert main(["statdb", "build", "--config", str(conf)]) == 0  # the input is never read
    assert {f.name: f.read_bytes() for f in bucket_files(state)} == before
    conf.write_text(conf.read_text().replace(f'"m": {meta["m"]}', '"m": 9'))
    assert main(["statdb", "build", "--config", str(conf)]) == 2
    assert "exists with m = 4" in capsys.readouterr().err


def test_a_built_store_keeps_the_served_domains_only_sealed_and_signed(data, tmp_path):
    """qi = age only: zip is neither QI nor sensitive, so the store neither keeps nor
    serves its domain; every bucket file's SHA-256 is listed; output.sign_key signs it."""
    from dataclasses import replace

    from vpub_spark.release.signing import generate_keys
    from vpub_spark.release.stores.integrity import verify_store
    from vpub_spark.release.stores.store import file_digests

    private, public = generate_keys(tmp_path / "keys")
    cfg = replace(_cfg(data, tmp_path, qi=["age"]), sign_key=str(private))
    built = build_store(cfg, InProcessEngine())
    meta = read_store(built.state)
    assert set(meta["domains"]) == {"age", "salary"} and meta["signed_by"]
    assert meta["files"] == file_digests(built.state) and len(meta["files"]) == built.chunks
    assert set(StatDB.open(built.state, str(public)).domains) == {"age", "salary"}
    assert verify_store(built.state, str(public)).passed
