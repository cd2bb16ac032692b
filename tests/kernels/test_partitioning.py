"""The partition plan: every partition l-eligible for every sensitive attribute; shard
counts and fingerprints independent of row order and batch boundaries."""

import numpy as np
import pandas as pd
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vpub_spark.kernels.partitioning import (
    SHARDS,
    ContentShards,
    QiShards,
    combine_counts,
    fingerprint,
    plan_chunks,
    plan_partitions,
    shard_counts,
    shard_of,
)
from vpub_spark.kernels.sampling import OCCURRENCE, with_occurrence


@st.composite
def frames(draw):
    n = draw(st.integers(20, 3000))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    domains = [draw(st.integers(2, 12)) for _ in range(draw(st.integers(2, 5)))]
    skew = draw(st.floats(0.0, 2.0))
    cols = {}
    for i, d in enumerate(domains):
        p = 1.0 / np.arange(1, d + 1) ** skew
        cols[f"a{i}"] = rng.choice(d, size=n, p=p / p.sum()).astype(np.int32)
    return (
        pd.DataFrame(cols),
        domains,
        draw(st.integers(2, 5)),
        draw(st.integers(1, 40)),
        draw(st.integers(0, 99)),
    )


@settings(max_examples=60, deadline=None)
@given(case=frames())
def test_plan_partitions_are_eligible_for_every_sensitive_attribute(case):
    frame, domains, l, target, seed = case
    n = len(frame)
    sensitive = [c for c in frame.columns if frame[c].value_counts().max() * l <= n]
    assume(sensitive)
    counts = combine_counts(
        shard_counts(frame, sensitive, ContentShards(seed)),
        sensitive,
        dict(zip(frame.columns, domains, strict=True)),
    )
    assert counts.total == n
    plan = plan_partitions(counts, l, target)
    assert 1 <= plan.parts <= target
    part = plan.part_of(shard_of(frame, seed))
    sizes = np.bincount(part, minlength=plan.parts)
    assert (sizes > 0).all() and (sizes == plan.rows).all()
    for s in sensitive:  # checked on the rows themselves, not on the counts the plan used
        top = frame.groupby(part)[s].agg(lambda c: c.value_counts().max()).to_numpy()
        assert (top * l <= sizes).all()
    assert plan.first_group.tolist() == np.concatenate([[0], np.cumsum(sizes // l)[:-1]]).tolist()


def test_counts_and_fingerprint_ignore_order_and_batches():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "a": rng.integers(0, 5, 5000, dtype=np.int32),
            "b": rng.integers(0, 9, 5000, dtype=np.int32),
        }
    )
    labels = {"a": [str(i) for i in range(5)], "b": [str(i) for i in range(9)]}
    whole = combine_counts(shard_counts(frame, ["b"], ContentShards(3)), ["b"], {"b": 9})
    shuffled = frame.sample(frac=1, random_state=2).reset_index(drop=True)
    batches = pd.concat(
        [
            shard_counts(shuffled.iloc[i : i + 777], ["b"], ContentShards(3))
            for i in range(0, 5000, 777)
        ]
    )
    pieces = combine_counts(batches, ["b"], {"b": 9})
    assert (whole.rows == pieces.rows).all() and (whole.values["b"] == pieces.values["b"]).all()
    assert fingerprint(whole, labels) == fingerprint(pieces, labels)
    assert (np.sort(shard_of(frame, 3)) == np.sort(shard_of(shuffled, 3))).all()
    assert not (shard_of(frame, 3) == shard_of(frame, 4)).all()  # the seed moves rows
    changed = frame.copy()
    changed.loc[0, "a"] = (changed.loc[0, "a"] + 1) % 5
    assert fingerprint(
        combine_counts(shard_counts(changed, [], ContentShards(0)), [], {}), labels
    ) != fingerprint(whole, labels)
    assert whole.rows.shape == (SHARDS,)


@settings(max_examples=40, deadline=None)
@given(case=frames(), data=st.data())
def test_partitions_read_no_sensitive_value_but_through_their_count(case, data):
    """kernels/partitioning.py: a row's shard hashes its non-sensitive columns only, shard
    s goes to partition s mod P, so re-placing the sensitive values moves no row; only P
    may change (the largest eligible one)."""
    frame, domains, l, target, seed = case
    s = frame.columns[-1]
    assume(frame[s].value_counts().max() * l <= len(frame))
    qi = tuple(frame.columns[:-1])
    moved = frame.assign(**{s: data.draw(st.permutations(frame[s].tolist()))})
    sizes = dict(zip(frame.columns, domains, strict=True))
    plans = []
    for f in (frame, moved):
        shards = shard_of(f, seed, qi)
        counts = combine_counts(shard_counts(f, [s], ContentShards(seed, qi)), [s], sizes)
        plan = plan_partitions(counts, l, target)
        assert (plan.shard_part == np.arange(SHARDS) % plan.parts).all()
        plans.append((shards, plan.parts, plan.part_of(shards)))
    assert (plans[0][0] == plans[1][0]).all()  # the same shard for every row
    if plans[0][1] == plans[1][1]:  # the same P: every row in the same partition
        assert (plans[0][2] == plans[1][2]).all()


@settings(max_examples=60, deadline=None)
@given(case=frames(), chunk_rows=st.integers(1, 400), data=st.data())
def test_chunks_are_eligible_and_read_only_published_multisets(case, chunk_rows, data):
    """plan_chunks: every chunk eligible (recounted from the rows) and of at least
    chunk_rows rows (or the whole table); re-placing the sensitive values inside each
    chunk (each chunk's multiset, which the release publishes, kept) gives the same plan."""
    frame, domains, l, _target, _seed = case
    s = frame.columns[-1]
    assume(frame[s].value_counts().max() * l <= len(frame))
    sizes = dict(zip(frame.columns, domains, strict=True))
    sharding = QiShards(tuple(frame.columns[:-1]), tuple(domains[:-1]))
    shard = sharding.of(frame)

    def plan_of(f):
        return plan_chunks(
            combine_counts(shard_counts(f, [s], sharding), [s], sizes), l, chunk_rows
        )

    plan = plan_of(frame)
    part = plan.part_of(shard)
    for c in range(plan.parts):
        assert frame[s][part == c].value_counts().max() * l <= (part == c).sum()
    assert plan.parts == 1 or (plan.rows >= chunk_rows).all()
    moved = frame.copy()
    for c in range(plan.parts):  # a new table the release allows: values re-placed per chunk
        rows = np.flatnonzero(part == c)
        moved.loc[rows, s] = frame[s].to_numpy()[data.draw(st.permutations(rows.tolist()))]
    assert (plan_of(moved).shard_part == plan.shard_part).all()


def test_rows_of_equal_qi_get_shards_of_their_own():
    """Anatomy's shards (ContentShards with `occurrence`): rows of equal QI are numbered
    0..k-1 in the order of every column (`with_occurrence`: the same whatever the row
    order), and each number hashes to a shard of its own, so rows of equal QI do not
    share a partition as a block (kernels/partitioning.py says why that leaked)."""
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "a": rng.integers(0, 3, 3000),
            "b": rng.integers(0, 2, 3000),
            "s": rng.integers(0, 9, 3000),
        }
    )
    numbered = with_occurrence(frame, ("a", "b"))
    sizes = numbered.groupby(["a", "b"]).size()
    ranks = numbered.groupby(["a", "b"])[OCCURRENCE].agg(lambda o: sorted(o.tolist()))
    assert all(ranks[k] == list(range(n)) for k, n in sizes.items())
    ordered = numbered.sort_values(["a", "b", OCCURRENCE])
    assert (ordered.groupby(["a", "b"])["s"].diff().dropna() >= 0).all()  # by every column
    shuffled = frame.sample(frac=1, random_state=5).reset_index(drop=True)
    again = with_occurrence(shuffled, ("a", "b"))
    key = ["a", "b", "s", OCCURRENCE]
    assert sorted(map(tuple, again[key].to_numpy().tolist())) == sorted(
        map(tuple, numbered[key].to_numpy().tolist())
    )
    sharding = ContentShards(7, ("a", "b"), occurrence=True)
    shards = sharding.of(numbered)
    per_qi = pd.Series(shards).groupby([numbered["a"], numbered["b"]]).nunique()
    assert (per_qi > 100).all()  # about 500 rows each: spread over many shards
    assert (ContentShards(7, ("a", "b")).of(frame) == shard_of(frame, 7, ("a", "b"))).all()
