"""The m-invariance kernels: the worked example of docs/explanation/algorithms.md,
002 Theorem 2's eligibility error, 002 Tables 1-3's leak and its absence in our
marginals, and over random tables: every group m-unique, one signature per tuple in
every marginal, every tuple in exactly one group."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vpub_spark.errors import PrivacyError
from vpub_spark.kernels.marginal_groups import decompose
from vpub_spark.kernels.minvariance import (
    assign_buckets,
    check_m_eligible,
    group_ncp,
    place_leftovers,
    signatures,
)


def _bucketize(codes, s, m, extents, seed=0, sub=None):
    b = place_leftovers(s, assign_buckets(s, m, seed, sub), seed + 1, sub)
    sig = signatures(b, s)
    return b, [sig[k] for k in range(len(sig))]


def _signatures(group, s):
    """Each row's signature: the set of sensitive values of its group."""
    sets = pd.Series(s).groupby(group).agg(lambda x: frozenset(x))
    return [sets[g] for g in group]


def test_worked_example_of_algorithms_md():
    """a@10 a@50 b@12 b@52 c@14 c@54 d@48, m = 3: one bucket {a, b, c} of six tuples and
    d@48 left over, whose bucket takes one a, one b and one c of it drawn by the seed
    (not the nearest ones): over seeds, every choice of the 8 appears."""
    age = np.array([10, 50, 12, 52, 14, 54, 48])
    s = np.array([0, 0, 1, 1, 2, 2, 3])  # a a b b c c d
    codes = pd.DataFrame({"age": age})
    seen = set()
    for seed in range(60):
        b, _ = _bucketize(codes, s, 3, {"age": 90}, seed)
        groups = decompose(codes, s, b, {"age": 90})
        members = {
            tuple(sorted(age[groups == g])): tuple(sorted(s[groups == g]))
            for g in np.unique(groups)
        }
        assert sorted(members.values()) == [(0, 1, 2), (0, 1, 2, 3)]
        seen.add(next(k for k, v in members.items() if 3 in v))
    assert len(seen) == 8 and all(48 in k for k in seen)


def test_not_m_eligible_names_the_value_and_its_share():
    with pytest.raises(
        PrivacyError, match=r"disease = 'a' covers 3 of 6 rows \(50.0%\), more than 1/3"
    ):
        check_m_eligible(np.array([0, 0, 0, 1, 2, 3]), 3, "disease", ["a", "b", "c", "d"])


def test_ncp():
    codes = pd.DataFrame({"age": [20, 29, 30, 30], "zip": [0, 4, 2, 2]})
    ncp = group_ncp(codes, np.array([0, 0, 1, 1]), {"age": 90, "zip": 4})
    assert ncp[0] == pytest.approx(2 * (9 / 90 + 4 / 4)) and ncp[1] == 0


# 002 Table 1 (Age, Zip in k, Sex M=0/F=1, Disease)
AGE = [20, 19, 20, 24, 29, 34, 39, 45, 34]
ZIP = [12, 20, 13, 16, 21, 24, 19, 14, 21]
SEX = [0, 0, 1, 1, 1, 1, 0, 0, 1]
DISEASE = [
    "bronchitis",
    "flu",
    "pneumonia",
    "gastritis",
    "flu",
    "gastritis",
    "bronchitis",
    "flu",
    "pneumonia",
]


def test_002_tables_2_and_3_leak_and_our_marginals_do_not():
    s = pd.Categorical(DISEASE).codes.astype(np.int64)
    table2 = np.array(
        [0, 0, 1, 1, 2, 2, 3, 3, 3]
    )  # 002 Table 2's groups (Bob, Alex | Jane, Lily | ...)
    table3 = np.array(
        [0, 2, 0, 1, 3, 3, 2, 1, 3]
    )  # Table 3: Zip groups [12k-13k] [14k-16k] [19k-20k] [21k-24k]
    bob = 0
    leak = _signatures(table2, s)[bob] & _signatures(table3, s)[bob]
    assert len(leak) == 1  # {bronchitis}: the attack of 002 §1
    codes = pd.DataFrame({"age": AGE, "zip": ZIP, "sex": SEX})
    extents = {"age": 26, "zip": 12, "sex": 1}
    b, _ = _bucketize(codes, s, 2, extents)
    m1 = decompose(codes, s, b, extents)  # <Age, Zip, Sex, Disease>
    m2 = decompose(codes[["zip"]], s, b, extents)  # <Zip, Disease>
    assert _signatures(m1, s) == _signatures(m2, s)
    assert all(len(x) >= 2 for x in _signatures(m1, s))


@st.composite
def eligible_tables(draw):
    m = draw(st.integers(2, 5))
    values = draw(st.integers(m, m + 6))
    n = draw(st.integers(m, 300))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    s = rng.integers(0, values, n)
    cap = n // m
    _, counts = np.unique(s, return_counts=True)
    if counts.max() > cap:  # rebalance into an m-eligible table
        s = np.resize(np.arange(values), n)
        rng.shuffle(s)
    assume(np.unique(s, return_counts=True)[1].max() * m <= n)
    codes = pd.DataFrame(
        {"a": rng.integers(0, 40, n), "b": rng.integers(0, 5, n), "c": rng.integers(0, 12, n)}
    )
    return codes, s.astype(np.int64), m, seed


@settings(max_examples=60, deadline=None)
@given(eligible_tables())
def test_every_marginal_is_m_unique_with_one_signature_per_tuple(table):
    codes, s, m, seed = table
    extents = {"a": 39, "b": 4, "c": 11}
    sub = (
        np.random.default_rng(seed).integers(0, 2, len(s)) if len(s) >= 4 * m and seed % 2 else None
    )
    if sub is not None and any(
        np.unique(s[sub == k], return_counts=True)[1].max() * m > (sub == k).sum() for k in (0, 1)
    ):
        sub = None  # the random split is not m-eligible on both sides: one sub-table
    b, sig = _bucketize(codes, s, m, extents, seed, sub)
    assert (b >= 0).all()
    if sub is not None:  # a bucket never spans two sub-tables
        assert (pd.Series(sub).groupby(b).nunique() == 1).all()
    for k, signature in enumerate(sig):
        members = s[b == k]
        vals, counts = np.unique(members, return_counts=True)
        assert tuple(vals) == signature and len(vals) >= m and len(set(counts)) == 1
    bucket_sig = [frozenset(sig[k]) for k in b]
    for attrs in (["a", "b", "c"], ["b"], ["c", "a"]):
        groups = decompose(codes[attrs], s, b, extents)
        assert len(groups) == len(s)  # every tuple in exactly one group
        per = pd.DataFrame({"g": groups, "s": s}).groupby("g")["s"]
        assert (per.nunique() == per.size()).all() and (per.size() >= m).all()  # m-unique
        assert _signatures(groups, s) == bucket_sig  # the same signature in every marginal


@settings(max_examples=30, deadline=None)
@given(eligible_tables(), st.sampled_from([1, 8, 32]))
def test_partition_gives_m_eligible_sub_tables(table, blocks):
    from vpub_spark.kernels.minvariance import partition

    codes, s, m, seed = table
    part = partition(codes, s, m, {"a": 39, "b": 4, "c": 11}, seed, blocks=blocks)
    for p in np.unique(part):
        members = s[part == p]
        assert np.unique(members, return_counts=True)[1].max() * m <= len(members)


def test_partition_keeps_close_tuples_together():
    from vpub_spark.kernels.minvariance import partition

    rng = np.random.default_rng(0)
    age = np.concatenate([rng.integers(0, 10, 200), rng.integers(80, 90, 200)])  # two far clusters
    s = np.resize(np.arange(20), 400)  # 20 values: cuts leave each side 2 x its top count
    part = partition(pd.DataFrame({"age": age}), s, 2, {"age": 89}, seed=1)
    assert len(np.unique(part)) > 2
    for p in np.unique(part):
        ages = age[part == p]
        assert ages.max() < 10 or ages.min() >= 80  # no sub-table straddles the two clusters


@settings(max_examples=40, deadline=None)
@given(
    eligible_tables(),
    st.sampled_from(["mondrian", "ncp", "ncp+mondrian", "none"]),
    st.sampled_from(["random", "local-unsafe"]),
)
def test_bucketize_then_decompose_keeps_signatures(table, partitioning, assign):
    """The publisher's chunk pipeline under every partitioning step (Mondrian's median
    cuts, 002 Figure 1, both, none) and both dealings: m-eligible sub-tables, assigning
    and leftovers per sub-table, then every marginal: m-unique groups, one signature per
    tuple."""
    from vpub_spark.kernels.minvariance import bucketize
    from vpub_spark.kernels.mondrian import qi_order
    from vpub_spark.publishing.marginals import subtables

    codes, s, m, seed = table
    extents = {"a": 39, "b": 4, "c": 11}
    made = subtables(codes, s, m, extents, seed, 5, 32, partitioning)
    for p in np.unique(made):
        assert np.unique(s[made == p], return_counts=True)[1].max() * m <= (made == p).sum()
    local = qi_order(codes, extents, m, made) if assign == "local-unsafe" else None
    sub, b = bucketize(codes, s, m, extents, seed, sub=made, local=local)
    assert (sub == made).all()
    assert (b >= 0).all() and (pd.Series(sub).groupby(b).nunique() == 1).all()
    sig = signatures(b, s)
    bucket_sig = [frozenset(sig[k]) for k in b]
    for attrs in (["a"], ["b", "c"]):
        groups = decompose(codes[attrs], s, b, extents)
        per = pd.DataFrame({"g": groups, "s": s}).groupby("g")["s"]
        assert (per.nunique() == per.size()).all() and (per.size() >= m).all()
        assert _signatures(groups, s) == bucket_sig


def test_blind_mondrian_cuts_only_where_every_arrangement_is_eligible():
    """x = 0..7, m = 2: with every value at most twice the middle cut (4 | 4 rows >=
    2 * 2) is taken; a half holding a value twice stays whole (2 | 2 < 4), a half of four
    distinct values is cut again (2 | 2 >= 2 * 1): the cuts read each node's multiset,
    which its published groups show, never where its values lie; a value three times needs
    sides of 6, so eight rows stay one sub-table, whichever rows hold it; the cut moves
    off a heavy median to the boundary with the larger smaller side (x <= 1 | x = 2 keeps
    one row, x = 0 | x >= 1 keeps four)."""
    from vpub_spark.kernels.mondrian import blind_mondrian

    codes = pd.DataFrame({"x": np.arange(8)})
    for s in ([0, 0, 1, 1, 2, 2, 3, 3], [0, 1, 1, 0, 2, 3, 3, 2]):
        assert blind_mondrian(codes, {"x": 7}, np.array(s), 2).tolist() == [0] * 4 + [1] * 4
    cut = blind_mondrian(codes, {"x": 7}, np.array([0, 1, 2, 3, 3, 2, 1, 0]), 2)
    assert cut.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    for s in ([0, 0, 0, 1, 2, 3, 4, 5], [1, 0, 2, 3, 0, 4, 0, 5]):
        assert (blind_mondrian(codes, {"x": 7}, np.array(s), 2) == 0).all()
    heavy = pd.DataFrame({"x": [0] * 4 + [1] * 7 + [2]})
    side = blind_mondrian(heavy, {"x": 2}, np.arange(12) % 6, 2)
    assert side.tolist() == [0] * 4 + [1] * 8


@settings(max_examples=40, deadline=None)
@given(eligible_tables())
def test_blind_mondrian_sub_tables_are_m_eligible(table):
    from vpub_spark.kernels.mondrian import blind_mondrian

    codes, s, m, _ = table
    group = blind_mondrian(codes, {"a": 39, "b": 4, "c": 11}, s, m)
    per = pd.DataFrame({"g": group, "s": s}).groupby(["g", "s"]).size()
    assert (per.groupby(level=0).max() * m <= per.groupby(level=0).sum()).all()


def _compositions(bucket: np.ndarray, s: np.ndarray) -> list:
    """Each bucket's sorted (value, count) pairs, sorted: what the runs decide."""
    return sorted(
        tuple(zip(*np.unique(s[bucket == k], return_counts=True), strict=True))
        for k in np.unique(bucket[bucket >= 0])
    )


@settings(max_examples=40, deadline=None)
@given(eligible_tables())
def test_local_dealing_keeps_the_runs_and_deals_every_tuple_once(table):
    """QI-local dealing changes which tuple of a value goes where, never the runs: the
    same bucket compositions, the same number of leftovers of each value, and the same
    buckets again for the same seed."""
    from vpub_spark.kernels.mondrian import qi_order

    codes, s, m, seed = table
    extents = {"a": 39, "b": 4, "c": 11}
    sub = np.zeros(len(s), dtype=np.int64)
    local = qi_order(codes, extents, m, sub)
    chance = assign_buckets(s, m, seed, sub)
    near = assign_buckets(s, m, seed, sub, local=local)
    assert _compositions(near, s) == _compositions(chance, s)
    assert sorted(s[near < 0]) == sorted(s[chance < 0])
    assert (near == assign_buckets(s, m, seed, sub, local=local)).all()


@pytest.mark.parametrize("seed", range(6))
def test_local_dealing_narrows_the_boxes(seed):
    """400 tuples, the top value at about 1/5 of them and 11 others, m = 4, one
    sub-table: the groups of every marginal are narrower with the QI-local dealing than
    with 002's random dealing (mean normalized width: e.g. 0.32 against 0.24 on age)."""
    from vpub_spark.kernels.minvariance import bucketize
    from vpub_spark.kernels.mondrian import qi_order

    rng = np.random.default_rng(seed)
    codes = pd.DataFrame({"age": rng.integers(0, 100, 400), "zip": rng.integers(0, 20, 400)})
    s = rng.integers(1, 12, 400)
    s[rng.random(400) < 0.2] = 0
    extents, sub = {"age": 99, "zip": 19}, np.zeros(400, dtype=np.int64)

    def width(local, attrs) -> float:
        b = bucketize(codes, s, 4, extents, seed, sub=sub, local=local)[1]
        group = decompose(codes[attrs], s, b, extents)
        spans = codes[attrs].groupby(group).agg(lambda x: x.max() - x.min()).mean()
        return float(np.mean([spans[a] / extents[a] for a in attrs]))

    local = qi_order(codes, extents, 4, sub)
    for attrs in (["age"], ["age", "zip"]):
        assert width(local, attrs) < width(None, attrs)


def _spread(row_of: np.ndarray, rank: np.ndarray, slot_group: np.ndarray) -> float:
    """Sum over groups of the squared distances of their rows' ranks to the group's mean."""
    r = rank[row_of]
    size = np.bincount(slot_group)
    mean = np.bincount(slot_group, weights=r) / np.maximum(size, 1)
    return float(((r - mean[slot_group]) ** 2).sum())


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=2, max_size=40),
    st.integers(1, 12),
    st.integers(0, 2**31),
)
def test_the_alignment_deals_each_pool_in_place_order_and_never_spreads_the_groups(
    pools, groups, seed
):
    """`_aligned` (the QI-local dealing's rounds): every slot gets one row of its own
    pool, each row fills one slot, and the groups' spread along the order (squared
    distances of their rows' ranks to their means) is never above the first dealing's
    (each round deals monotonically in the places, each move takes the means)."""
    from vpub_spark.kernels.minvariance import _aligned

    rng = np.random.default_rng(seed)
    slot_pool = np.array(pools, dtype=np.int64)
    slot_group = np.unique(rng.integers(0, groups, len(pools)), return_inverse=True)[1]
    groups = int(slot_group.max()) + 1
    pos = rng.random(len(pools))
    rank = rng.permutation(len(pools)).astype(np.float64)  # one row per slot
    pool_of_row = rng.permutation(slot_pool)
    rows = np.lexsort((rank, pool_of_row))  # each pool's rows along the order
    first = np.empty(len(rows), dtype=np.int64)
    first[np.lexsort((pos, slot_pool))] = rows
    row_of = _aligned(rows, rank, slot_pool, slot_group, pos, groups)
    assert sorted(row_of.tolist()) == list(range(len(pools)))
    assert (pool_of_row[row_of] == slot_pool).all()
    assert _spread(row_of, rank, slot_group) <= _spread(first, rank, slot_group) + 1e-9


def test_the_alignment_matches_by_place_not_by_quantile():
    """Groups g0, g1 hold {top, a}, g2, g3 {top, b}; a lies at ranks 0-1, top at 2-5,
    b at 6-7, and the first places (0.1, 0.6, 0.3, 0.9) deal top by quantile to g0, g2,
    g1, g3. After the alignment the groups holding a take the top tuples nearest a:
    g0 = {2, 0}, g1 = {3, 1}, g2 = {4, 6}, g3 = {5, 7}."""
    from vpub_spark.kernels.minvariance import _aligned

    slot_pool = np.array([0, 0, 0, 0, 1, 1, 2, 2])  # top, top, top, top, a, a, b, b
    slot_group = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    pos = np.array([0.1, 0.6, 0.3, 0.9, 0.1, 0.6, 0.3, 0.9])
    rank = np.array([2.0, 3.0, 4.0, 5.0, 0.0, 1.0, 6.0, 7.0])  # row i's place
    rows = np.arange(8)  # pools top (rows 0-3), a (4-5), b (6-7), each along the order
    row_of = _aligned(rows, rank, slot_pool, slot_group, pos, 4)
    assert rank[row_of].tolist() == [2, 3, 4, 5, 0, 1, 6, 7]


def test_a_signature_class_is_decomposed_whole_when_that_is_narrower():
    """Two buckets of one signature {a, b} (two sub-tables): a at age 0 and b at 10 in
    one, a at 10 and b at 0 in the other. Decomposing each bucket gives two groups 10
    years wide; the class whole gives {a 0, b 0} and {a 10, b 10}, 0 wide: `decompose`
    keeps the class's. One class per bucket: the buckets' halving, unchanged."""
    from vpub_spark.kernels.marginal_groups import halved

    codes = pd.DataFrame({"age": [0, 10, 10, 0]})
    s, bucket, extents = np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1]), {"age": 10}
    assert pd.Series(halved(codes, s, bucket, extents)).tolist() == [0, 0, 1, 1]
    g = decompose(codes, s, bucket, extents)
    assert g[0] == g[3] and g[1] == g[2] and g[0] != g[1]
    other = np.array([0, 1, 0, 2])  # {a, b} and {a, c}: two classes
    assert (decompose(codes, other, bucket, extents) == halved(codes, other, bucket, extents)).all()
    none = np.zeros(0, dtype=np.int64)
    assert len(decompose(codes.iloc[:0], none, none, extents)) == 0  # an empty chunk


@settings(max_examples=40, deadline=None)
@given(eligible_tables(), st.sampled_from([["a"], ["b", "c"], ["a", "b", "c"]]))
def test_decompose_is_never_wider_than_halving_the_buckets(table, attrs):
    """Per signature class, `decompose` keeps the lowest-NCP of the buckets' halving and
    the matchings of the buckets and of the class: its total NCP is at most the buckets'
    halving's, its groups m-unique with one tuple per value of their bucket's signature."""
    from vpub_spark.kernels.marginal_groups import halved
    from vpub_spark.kernels.minvariance import bucketize
    from vpub_spark.publishing.marginals import subtables

    codes, s, m, seed = table
    extents = {"a": 39, "b": 4, "c": 11}
    _, b = bucketize(
        codes, s, m, extents, seed, sub=subtables(codes, s, m, extents, seed, 5, 32, "mondrian")
    )
    g, fine = decompose(codes[attrs], s, b, extents), halved(codes[attrs], s, b, extents)
    assert (
        group_ncp(codes[attrs], g, extents).sum()
        <= group_ncp(codes[attrs], fine, extents).sum() + 1e-9
    )
    per = pd.DataFrame({"g": g, "s": s}).groupby("g")["s"]
    assert (per.nunique() == per.size()).all() and (per.size() >= m).all()
    sig = signatures(b, s)
    assert _signatures(g, s) == [frozenset(sig[k]) for k in b]
