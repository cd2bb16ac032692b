"""kernels/dynamic.py over random sequences of inserts and deletes (hypothesis): every
survivor keeps its signature, every bucket stays balanced with at least m values, the
counterfeits are those the version states, A-Count and G-Count hold the truth on every
version; the pieces against their definitions."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.kernels.dynamic import (
    invariance_failures,
    republish,
    signature_keys,
    unbalanced,
)
from vpub_spark.kernels.hashing import key_hash
from vpub_spark.kernels.minvariance import bucketize
from vpub_spark.kernels.statdb import Cells, Query, a_count, g_count_cells, signature_buckets

D, EXT = 6, {"x": 9, "y": 4}


def _table(rng, n: int, m: int) -> tuple[pd.DataFrame, np.ndarray]:
    """n people with QI (x, y) and an m-eligible sensitive column."""
    values = rng.permutation(np.arange(n) % D)
    while np.bincount(values).max() * m > n:
        values = rng.integers(0, D, n)
    return pd.DataFrame({"x": rng.integers(0, 10, n), "y": rng.integers(0, 5, n)}), values


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(2, 4),
    steps=st.lists(st.tuples(st.floats(0, 0.5), st.integers(0, 30)), min_size=1, max_size=4),
    fill=st.sampled_from(["counterfeits", "inserts"]),
)
def test_versions_stay_m_invariant_and_answers_hold_the_truth(seed, m, steps, fill):
    rng = np.random.default_rng(seed)
    qi, values = _table(rng, 40, m)
    ids = np.arange(40)
    bucket = bucketize(qi, values, m, EXT, seed, sub=np.zeros(40, np.int64))[1]
    rows, fake = ids, (np.zeros(0, np.int64), np.zeros(0, np.int64))
    prev = _version(rows, bucket, values, fake)
    next_id, next_bucket = 40, int(bucket.max()) + 1
    for share, inserts in steps:
        kept = rng.random(len(rows)) >= share
        nq, nv = (
            pd.DataFrame({"x": rng.integers(0, 10, inserts), "y": rng.integers(0, 5, inserts)}),
            rng.integers(0, D, inserts),
        )
        old_b = np.concatenate([bucket, fake[0]])
        old_v = np.concatenate([values, fake[1]])
        r = republish(
            old_b,
            old_v,
            np.concatenate([kept, np.zeros(len(fake[0]), bool)]),
            nv,
            nq,
            m,
            EXT,
            seed + len(rows),
            next_bucket,
            D,
            fill=fill,
        )
        fake = (
            np.repeat(r.counterfeit_bucket, r.counterfeit_count),
            np.repeat(r.counterfeit_value, r.counterfeit_count),
        )
        rows = np.concatenate([rows[kept], next_id + np.arange(inserts)])
        bucket = np.concatenate([bucket[kept], r.bucket])
        values = np.concatenate([values[kept], nv])
        qi = pd.concat([qi[kept], nq], ignore_index=True)
        next_id += inserts
        next_bucket = (
            max(
                next_bucket,
                int(old_b.max(initial=0)),
                int(np.concatenate([r.bucket, r.counterfeit_bucket]).max(initial=0)),
            )
            + 1
        )
        assert (
            len(np.intersect1d(r.bucket, np.unique(bucket[: kept.sum()]))) == 0 or fill == "inserts"
        )
        now = _version(rows, bucket, values, fake)
        assert invariance_failures(*prev[:2], *now[:2], now[2], now[3], m) == []
        assert r.counterfeits == len(fake[0])
        _answers_hold(qi, bucket, values, fake)
        prev = now


def _version(rows, bucket, values, fake):
    """(row or -1, signature key, bucket, value) of every tuple, counterfeits last."""
    b = np.concatenate([bucket, fake[0]])
    v = np.concatenate([values, fake[1]])
    r = np.concatenate([rows, np.full(len(fake[0]), -1)])
    return r, signature_keys(b, v, D), b, v


def _answers_hold(qi, bucket, values, fake):
    b = np.concatenate([bucket, fake[0]])
    v = np.concatenate([values, fake[1]])
    merged = signature_buckets(b, v)
    real = np.arange(len(b)) < len(bucket)
    cells = Cells.of(merged, v)
    codes = {a: np.concatenate([qi[a].to_numpy(), np.zeros(len(fake[0]), np.int64)]) for a in qi}
    for lo, hi, chosen in [(0, 4, {1}), (3, 9, {0, 2}), (0, 9, {5})]:
        inside = (codes["x"] >= lo) & (codes["x"] <= hi)
        truth = int((inside & real & np.isin(v, list(chosen))).sum())
        low, high = a_count(merged, v, inside & real, chosen)
        assert low <= truth <= high
        for ranges in ({"x": (lo, hi)}, {}):
            q = Query(ranges, frozenset(chosen))
            inside = np.ones(len(b), bool) if not ranges else inside
            truth = int((inside & real & np.isin(v, list(chosen))).sum())
            low, high = g_count_cells(cells, codes, q, None if real.all() else ~real)
            assert low <= truth <= high


def _inserts_only(values, m: int, seed: int = 3):
    """republish on an empty version: every tuple is an insert (x = its position)."""
    n = len(values)
    frame = pd.DataFrame({"x": np.arange(n) % 10, "y": np.arange(n) % 5})
    none = np.zeros(0, np.int64)
    return republish(none, none, none.astype(bool), np.array(values), frame, m, EXT, seed, 0, D)


@given(counts=st.lists(st.integers(0, 5), min_size=D, max_size=D), m=st.integers(2, 4))
@settings(max_examples=60, deadline=None)
def test_a_batch_is_bucketized_whole_or_made_one_bucket_by_its_multiset(counts, m):
    """An m-eligible batch gets balanced buckets of >= m values and no counterfeit; any
    other one bucket holding every value of its signature the top count times (each
    present value, and absent ones drawn while fewer than m are present)."""
    values = np.repeat(np.arange(D), counts)
    if not len(values):
        return
    r = _inserts_only(values, m)
    bucket = np.concatenate([r.bucket, np.repeat(r.counterfeit_bucket, r.counterfeit_count)])
    shown = np.concatenate([values, np.repeat(r.counterfeit_value, r.counterfeit_count)])
    assert unbalanced(bucket, shown, m) == 0
    if m * max(counts) <= len(values):
        assert r.counterfeits == 0
        return
    signature = np.unique(shown)
    assert set(r.bucket.tolist()) == {0} and len(signature) == max(m, np.count_nonzero(counts))
    assert set(np.flatnonzero(counts).tolist()) <= set(signature.tolist())
    assert r.counterfeits == len(signature) * max(counts) - len(values)


def test_survivors_keep_their_buckets_and_shortfalls_are_counterfeits():
    """Bucket 0 {a, b} loses its b; bucket 1 {a, b, a, b} loses one a: each gets one
    counterfeit of the value it lacks; an insert never joins them (default)."""
    r = republish(
        np.array([0, 0, 1, 1, 1, 1]),
        np.array([0, 1, 0, 1, 0, 1]),
        np.array([True, False, True, True, False, True]),
        np.array([1, 0]),
        pd.DataFrame({"x": [0, 1], "y": [0, 0]}),
        2,
        EXT,
        1,
        10,
        D,
    )
    cells = set(r.cells())
    assert {(0, 1, 1), (1, 0, 1)} <= cells
    assert (r.bucket >= 10).all() and len(set(r.bucket.tolist())) == 1  # {1, 0}: one new bucket


def test_a_lone_insert_gets_m_minus_one_counterfeits_of_other_values():
    for seed in range(20):
        r = republish(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, bool),
            np.array([3]),
            pd.DataFrame({"x": [0], "y": [0]}),
            3,
            EXT,
            seed,
            0,
            D,
        )
        assert r.bucket.tolist() == [0] and r.counterfeits == 2
        assert 3 not in r.counterfeit_value.tolist() and len(set(r.counterfeit_value.tolist())) == 2


def test_key_hashes_are_keyed_and_distinct():
    labels = [f"id{i}" for i in range(50_000)] + ["ß", "12", "012"]
    a0, a1 = key_hash(labels, 7)
    b0, _ = key_hash(labels, 8)
    assert len(np.unique(a0)) == len(labels) and len(np.unique(a1)) == len(labels)
    assert (a0 != b0).mean() > 0.999  # another secret, other hashes
    c0, c1 = key_hash(list(reversed(labels)), 7)
    assert (c0[::-1] == a0).all() and (c1[::-1] == a1).all()  # per label, order-free
    assert not any(np.array_equal(x, y) for x, y in itertools.combinations([a0, a1, b0], 2))


def test_signature_keys_tell_every_value_apart():
    """Bits 32-63 of a word and words past the first count; the key does not depend on
    the largest value present."""
    buckets = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    values = np.array([0, 32, 0, 33, 0, 100, 0, 101])
    keys = signature_keys(buckets, values, 130)
    assert len(set(keys[::2].tolist())) == 4
    alone = signature_keys(np.array([0, 0]), np.array([0, 1]), 130)
    more = signature_keys(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 129]), 130)
    assert alone[0] == more[0]
