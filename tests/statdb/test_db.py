"""StatDB over a marginals store (004 §4-§7): intervals hold the truth on both methods,
answers are m-invariant with the store's published marginals, bad input and damaged or
exposed stores are refused, every answer is logged privately."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.cli import main
from vpub_spark.errors import SpecError, VpubError
from vpub_spark.kernels.statdb import Query, a_decompose, qi_mask, signature_buckets
from vpub_spark.release.reader import open_release
from vpub_spark.release.stores.store import BUCKET, ROW, bucket_files, group_dir
from vpub_spark.statdb.db import LOG, StatDB


def _truth(source: pd.DataFrame, db: StatDB, q: Query) -> int:
    """The true count of `q` on the source table (not the store's copy of it): its codes
    are positions in the public domains, so each is turned back into labels."""
    keep = np.ones(len(source), dtype=bool)
    for a, (lo, hi) in q.ranges.items():
        keep &= source[a].isin(db.domains[a][lo : hi + 1]).to_numpy()
    wanted = [db.domains[db.sensitive][v] for v in q.sensitive]
    return int((keep & source[db.sensitive].isin(wanted).to_numpy()).sum())


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_intervals_hold_the_truth_on_both_methods(store, data):
    db = StatDB.open(store[0])
    ranges = {}
    for a in data.draw(st.sets(st.sampled_from(db.qi), min_size=1)):
        size = len(db.domains[a])
        lo = data.draw(st.integers(0, size - 1))
        ranges[a] = (lo, data.draw(st.integers(lo, size - 1)))
    chosen = data.draw(st.sets(st.integers(0, len(db.domains["job"]) - 1), min_size=1))
    q = Query(ranges, frozenset(chosen))
    truth = _truth(store[2], db, q)
    ana, gen, sana, sgen = (
        db.count(q, m, log=False) for m in ("dyn-ana", "dyn-gen", "sta-ana", "sta-gen")
    )
    for answer in (ana, gen, sana, sgen):
        assert answer.low <= truth <= answer.high, answer
    assert gen.high - gen.low >= ana.high - ana.low  # anatomy shows QI values exactly
    # A-Count picks the shortest decomposition of U; sta-ana is one decomposition of U
    assert ana.high - ana.low <= sana.high - sana.low


def test_the_static_baselines_use_one_m_unique_partition_of_the_store(store):
    """sta-ana / sta-gen answer from the store's own buckets, decomposed by position:
    every group lies in one bucket and holds |signature| distinct values."""
    db = StatDB.open(store[0])
    ana, gen = db.static
    group = ana.group
    frame = pd.DataFrame({"g": group, "b": db.bucket, "v": db.values})
    per = frame.groupby("g").agg(
        buckets=("b", "nunique"), size=("v", "size"), values=("v", "nunique")
    )
    assert (per["buckets"] == 1).all() and (per["size"] == per["values"]).all()
    assert per["size"].min() >= db.meta["m"]
    assert len(gen.low["age"]) == len(per)
    with pytest.raises(SpecError, match="sta-gen"):
        db.count("zip = 15", "ran-pert")


def test_where_text_answers_and_the_private_log(store, capsys):
    db = StatDB.open(store[0])
    ages = db.domains["age"]
    where = f"age between {ages[5]} and {ages[20]} and job in (j01, j02)"
    answer = db.count(where)
    assert answer.low <= _truth(store[2], db, db.query(where)) <= answer.high
    log = store[0] / LOG
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert json.loads(log.read_text().splitlines()[-1])["query"] == where
    assert main(["statdb", "query", str(store[0]), "--where", where, "--method", "dyn-gen"]) == 0
    assert "dyn-gen: COUNT(*) WHERE" in capsys.readouterr().out


def test_answers_are_m_invariant_with_the_published_marginals(store):
    """Every group of the decomposition behind an answer shows, for each of its tuples,
    the signature that tuple has in every marginal published from the store."""
    state, release, _ = store
    db = StatDB.open(state)
    tuples = pd.concat(
        [pq.read_table(f).to_pandas() for f in bucket_files(state)], ignore_index=True
    )
    q = db.query(f"age between {db.domains['age'][3]} and {db.domains['age'][30]} and job = j03")
    merged = signature_buckets(tuples[BUCKET].to_numpy(), tuples["job"].to_numpy())  # as StatDB
    group = a_decompose(merged, tuples["job"].to_numpy(), qi_mask(tuples, q.ranges))
    answer_sig = (
        pd.Series(tuples["job"].to_numpy())
        .groupby(group)
        .agg(lambda v: tuple(sorted(v)))[group]
        .to_numpy()
    )
    rel = open_release(release)
    for table in ("age-job", "age-zip-job"):
        links = pd.concat(
            [
                pq.read_table(f).to_pandas()
                for f in sorted(group_dir(state, "r", table).glob("*.parquet"))
            ]
        )
        st_ = rel.read(table, "st").to_pandas()
        codes = {v: i for i, v in enumerate(db.domains["job"])}
        shown = (
            st_.assign(job=st_["job"].astype(str).map(codes))
            .groupby("group_id")["job"]
            .agg(lambda v: tuple(sorted(v)))
        )
        published = shown.reindex(links.set_index(ROW).loc[tuples[ROW], "group_id"]).to_numpy()
        assert (answer_sig == published).all()


@pytest.mark.parametrize(
    "where, message",
    [
        ("salary between 1 and 3", "unknown attribute 'salary'"),
        ("age between 90 and 99", "selects no value"),
        ("age between 60 and 30", "selects no value"),
        ("job = nurse", "job has no value 'nurse'"),
        ("zip in (10, 30)", "selects no range of its values"),
    ],
)
def test_bad_queries_are_refused(store, where, message):
    with pytest.raises(SpecError, match=message):
        StatDB.open(store[0]).query(where)


def test_an_exposed_or_damaged_store_is_refused(store, tmp_path):
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(store[0], copy)
    os.chmod(copy, 0o755)
    with pytest.raises(VpubError, match="must be owner-only"):
        StatDB.open(copy)
    os.chmod(copy, 0o700)
    f = bucket_files(copy)[0]
    b = pq.read_table(f).to_pandas()
    b.loc[b.index[0], "job"] = (b["job"].iloc[0] + 1) % 12  # one tuple's value changed
    pq.write_table(pq.read_table(f).from_pandas(b, preserve_index=False), f)
    os.chmod(f, 0o600)
    with pytest.raises(VpubError, match="changed or damaged, refused"):
        StatDB.open(copy)
