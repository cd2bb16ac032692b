"""004's anatomy-based statistical database kernel: Examples 1-2, Table 3 and Figure 1
as golden tests; A-Count equals the Lemma 3 interval of A-Decompose's decomposition,
which is m-invariant with the bucketization and contains the true count."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.kernels.statdb import (
    Cells,
    Query,
    a_count,
    a_count_cells,
    a_decompose,
    anatomy_interval,
    g_count,
    g_count_cells,
    generalized_interval,
    perturb,
    perturbed_interval,
    qi_mask,
    retention,
    signature_buckets,
)

# 004 Table 1a; Disease: flu 0, gastritis 1, insomnia 2
NAMES = ["Alice", "Bob", "David", "Helen", "Jack", "Ken", "Linda", "Mary", "Paul", "Ray", "Tom"]
T = pd.DataFrame(
    {
        "age": [20, 23, 38, 42, 46, 48, 49, 52, 53, 59, 61],
        "zip": [12000, 58000, 41000, 23000, 25000, 13000, 51000, 52000, 49000, 61000, 39000],
    }
)
DISEASE = np.array([0, 1, 0, 1, 0, 1, 0, 2, 1, 0, 1])
P1 = np.array([1, 1, 2, 2, 3, 3, 4, 4, 4, 5, 5])  # the partition underlying Table 1b / Table 3
FIGURE_1 = np.array(
    [1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1]
)  # B_1 {flu, gastritis}, B_2 {flu, insomnia, gastritis}
Q1 = ({"age": (30, 50)}, {0})  # Age in [30, 50] AND Disease = flu
Q2 = ({"zip": (20000, 40000)}, {0})  # Zipcode in [20k, 40k] AND Disease = flu


def test_table_3_answers_q1_with_lemma_3():
    ranges, flu = Q1
    assert anatomy_interval(P1, DISEASE, qi_mask(T, ranges), flu) == (2, 3)  # truth: 3


def test_example_1_a_decompose_of_b1_for_q2():
    ranges, _ = Q2
    ok = qi_mask(T, ranges)
    in_b1 = FIGURE_1 == 1
    assert sorted(np.array(NAMES)[in_b1 & ok]) == ["Helen", "Jack", "Tom"]  # S_1
    group = a_decompose(FIGURE_1, DISEASE, ok)
    members = {g: sorted(np.array(NAMES)[group == g]) for g in np.unique(group[in_b1])}
    assert len(members) == 4 and all(len(m) == 2 for m in members.values())
    s1 = {"Helen", "Jack", "Tom"}
    from_s1 = [m for m in members.values() if set(m) <= s1]
    assert len(from_s1) == 1 and "Jack" in from_s1[0]  # G_1 = Jack and a gastritis tuple of S_1
    mixed = next(m for m in members.values() if len(set(m) & s1) == 1)
    assert (
        DISEASE[NAMES.index(next(x for x in mixed if x not in s1))] == 0
    )  # G_2: a flu tuple of S_2
    assert sum(not set(m) & s1 for m in members.values()) == 2  # G_3, G_4 from S_2 alone
    assert anatomy_interval(group, DISEASE, ok, Q2[1]) == (1, 2)


def test_example_2_a_count_for_q2_and_the_truth():
    ranges, flu = Q2
    ok = qi_mask(T, ranges)
    assert a_count(FIGURE_1, DISEASE, ok, flu) == (1, 2)  # the truth is 1 (Jack)
    assert a_count(FIGURE_1, DISEASE, qi_mask(T, Q1[0]), flu) == (2, 3)


@st.composite
def bucketizations(draw):
    """Random buckets, each a signature of distinct values held c times (Lemma 5)."""
    buckets, values = [], []
    for b in range(draw(st.integers(1, 6))):
        k = draw(st.integers(2, 5))
        signature = draw(st.lists(st.integers(0, 7), min_size=k, max_size=k, unique=True))
        c = draw(st.integers(1, 4))
        buckets += [b * 3] * (k * c)  # bucket ids need not be dense
        values += signature * c
    n = len(buckets)
    perm = draw(st.permutations(range(n)))
    qi = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    chosen = draw(st.sets(st.integers(0, 7)))
    return np.array(buckets)[list(perm)], np.array(values)[list(perm)], np.array(qi), chosen


@settings(max_examples=300, deadline=None)
@given(case=bucketizations())
def test_a_count_is_the_interval_of_a_decompose_and_holds_the_truth(case):
    bucket, value, ok, chosen = case
    group = a_decompose(bucket, value, ok)
    for g in np.unique(group):  # every group: one bucket, its whole signature, once each
        members = group == g
        assert len(np.unique(bucket[members])) == 1
        signature = np.unique(value[bucket == bucket[members][0]])
        assert sorted(value[members]) == list(signature)
    lo, hi = a_count(bucket, value, ok, chosen)
    assert (lo, hi) == anatomy_interval(group, value, ok, chosen)
    truth = int((ok & np.isin(value, list(chosen))).sum())
    assert lo <= truth <= hi


@settings(max_examples=200, deadline=None)
@given(case=bucketizations(), seed=st.integers(0, 1000))
def test_no_decomposition_gives_a_shorter_interval(case, seed):
    """Lemma 7: a random decomposition's interval is never shorter than A-Count's."""
    bucket, value, ok, chosen = case
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(len(bucket))
    other = np.empty(len(bucket), dtype=np.int64)
    other[shuffled] = a_decompose(
        bucket[shuffled], value[shuffled], np.zeros(len(bucket), dtype=bool)
    )
    lo, hi = a_count(bucket, value, ok, chosen)
    olo, ohi = anatomy_interval(other, value, ok, chosen)
    assert olo <= lo and hi <= ohi


P2 = np.array(
    [1, 5, 3, 2, 2, 1, 4, 4, 4, 5, 3]
)  # 004 Table 2: {Alice, Ken} {Jack, Helen} {David, Tom} {Linda, Mary, Paul} {Ray, Bob}
Q3 = Query({"age": (40, 60), "zip": (20000, 60000)}, frozenset({0}))


def _q(pair) -> Query:
    return Query(pair[0], frozenset(pair[1]))


def test_section_1_3_intervals_of_tables_1b_and_2():
    assert generalized_interval(P1, T, _q(Q1), DISEASE) == (2, 3)  # Q1 on T1*
    assert generalized_interval(P1, T, _q(Q2), DISEASE) == (0, 4)  # Q2 on T1*
    assert generalized_interval(P2, T, _q(Q2), DISEASE) == (1, 2)  # Q2 on T2*
    assert generalized_interval(P2, T, _q(Q1), DISEASE) == (1, 5)  # Q1 on T2*


def test_example_3_g_count():
    in_b1 = FIGURE_1 == 1
    b1 = g_count(FIGURE_1[in_b1], DISEASE[in_b1], T[in_b1].reset_index(drop=True), Q3)
    assert b1 == (1, 2)  # n_1 = 1 (Helen, Jack), n_3 = 2 (Bob, David; Alice, Ken)
    assert g_count(FIGURE_1, DISEASE, T, Q3) == (2, 3)  # B_2 lies inside: [1, 1]; the truth is 2


@st.composite
def with_points(draw):
    bucket, value, _, chosen = draw(bucketizations())
    n = len(bucket)
    codes = pd.DataFrame(
        {a: draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)) for a in ("x", "y")}
    )
    ranges = {}
    for a in draw(st.sets(st.sampled_from(["x", "y"]))):
        lo = draw(st.integers(0, 9))
        ranges[a] = (lo, draw(st.integers(lo, 9)))
    return bucket, value, codes, Query(ranges, frozenset(chosen))


@settings(max_examples=300, deadline=None)
@given(case=with_points(), seed=st.integers(0, 1000))
def test_g_count_holds_the_truth_and_is_bounded(case, seed):
    bucket, value, codes, query = case
    lo, hi = g_count(bucket, value, codes, query)
    ok = qi_mask(codes, query.ranges)
    truth = int((ok & np.isin(value, list(query.sensitive))).sum())
    assert 0 <= lo <= truth <= hi <= int(np.isin(value, list(query.sensitive)).sum())
    rng = np.random.default_rng(
        seed
    )  # and any decomposition's Lemma 2 interval holds the truth too
    perm = rng.permutation(len(bucket))
    group = np.empty(len(bucket), dtype=np.int64)
    group[perm] = a_decompose(bucket[perm], value[perm], np.zeros(len(bucket), dtype=bool))
    glo, ghi = generalized_interval(group, codes, query, value)
    assert glo <= truth <= ghi


def _reference_g_count(bucket, value, codes, query):
    """004 Figure 6 one bucket, one tuple at a time, with g_count's tie-break (fewest
    later margins, then the lowest pattern)."""
    attrs = list(query.ranges)

    def digit(r, a):
        lo, hi = query.ranges[a]
        x = codes[a][r]
        return 1 if x < lo else 2 if x > hi else 0

    low = high = 0
    for b in np.unique(bucket):
        rows = [int(r) for r in np.flatnonzero(bucket == b)]
        signature = sorted({int(value[r]) for r in rows})
        pattern = {r: sum(digit(r, a) * 3**i for i, a in enumerate(attrs)) for r in rows}
        margins = {r: [digit(r, a) == side for a in attrs for side in (1, 2)] for r in rows}
        inside = [r for r in rows if pattern[r] == 0]
        n1 = min(sum(value[r] == v for r in inside) for v in signature)
        alive, n3 = set(rows) - set(inside), 0
        for j in range(2 * len(attrs)):
            here = [r for r in alive if margins[r][j]]
            y = min(sum(value[r] == v for r in here) for v in signature)
            n3 += y
            for v in signature:
                of_v = sorted(
                    (r for r in here if value[r] == v),
                    key=lambda r: (sum(margins[r][j + 1 :]), pattern[r]),
                )
                alive -= set(of_v[:y])
        alpha = len(set(signature) & set(query.sensitive))
        low += n1 * alpha
        high += (len(rows) // len(signature) - n3) * alpha
    return low, high


@settings(max_examples=200, deadline=None)
@given(case=with_points())
def test_g_count_is_figure_6_tuple_by_tuple(case):
    bucket, value, codes, query = case
    assert g_count(bucket, value, codes, query) == _reference_g_count(bucket, value, codes, query)


@settings(max_examples=200, deadline=None)
@given(case=bucketizations())
def test_signature_buckets_merge_exactly_the_buckets_of_one_signature(case):
    bucket, value, _, _ = case
    bucket = np.concatenate([bucket, bucket + 100])  # every signature at least twice
    value = np.concatenate([value, value]) * 10  # values up to 70: two 64-bit words
    merged = signature_buckets(bucket, value)
    sig = {b: frozenset(value[bucket == b].tolist()) for b in np.unique(bucket)}
    for b1 in sig:
        for b2 in sig:
            same = merged[bucket == b1][0] == merged[bucket == b2][0]
            assert same == (sig[b1] == sig[b2])
    assert len(np.unique(merged)) == len(set(sig.values()))


@settings(max_examples=200, deadline=None)
@given(case=with_points(), data=st.data())
def test_static_versions_hold_the_truth_on_any_partition(case, data):
    """sta-ana (Lemma 3) and sta-gen (Lemma 2) on an arbitrary partition of the table."""
    _, value, codes, query = case
    group = np.array(
        data.draw(st.lists(st.integers(0, 4), min_size=len(value), max_size=len(value)))
    )
    ok = qi_mask(codes, query.ranges)
    truth = int((ok & np.isin(value, list(query.sensitive))).sum())
    lo, hi = anatomy_interval(group, value, ok, query.sensitive)
    glo, ghi = generalized_interval(group, codes, query, value)
    assert 0 <= lo <= truth <= hi and 0 <= glo <= truth <= ghi


@settings(max_examples=200, deadline=None)
@given(case=with_points())
def test_tuples_laid_out_cell_by_cell_give_the_same_answers(case):
    """The segmented sums a store's layout allows (`Cells.runs`) count as the scatter does."""
    bucket, value, codes, query = case
    order = np.lexsort((value, bucket))
    laid = Cells.of(bucket[order], value[order])
    assert laid.runs is not None
    ok = qi_mask(codes, query.ranges)
    cells = Cells.of(bucket, value)
    assert a_count_cells(laid, ok[order], query.sensitive) == a_count_cells(
        cells, ok, query.sensitive
    )
    moved = codes.iloc[order].reset_index(drop=True)
    assert g_count_cells(laid, moved, query) == g_count_cells(cells, codes, query)


def test_formula_10_and_the_worked_perturbation_intervals():
    assert retention(10, 50) == pytest.approx(4 / 49)
    for n, y, p, b, expected in (
        (100, 22, 0.2, 0.2, (4.114, 55.886)),
        (1000, 250, 0.5, 0.1, (371.058, 428.942)),
    ):
        domain = 10 if b == 0.1 else 5
        shown = np.zeros(n, dtype=np.int64)
        shown[:y] = 0  # y tuples show a value in V = {0}, the others 1
        shown[y:] = 1
        lo, hi = perturbed_interval(np.ones(n, dtype=bool), shown, {0}, p, domain)
        assert (lo, hi) == pytest.approx(expected, abs=1e-3)


def test_perturbation_keeps_about_p_and_its_interval_covers_the_truth_most_of_the_time():
    rng = np.random.default_rng(0)
    n, domain, p = 20_000, 50, retention(10, 50)
    s = rng.integers(0, domain, n)
    ok = rng.random(n) < 0.5
    chosen = set(range(10))
    truth = int((ok & np.isin(s, list(chosen))).sum())
    covered = 0
    for seed in range(200):
        shown = perturb(s, p, domain, seed)
        lo, hi = perturbed_interval(ok, shown, chosen, p, domain)
        covered += lo <= truth <= hi
    assert 0.74 <= covered / 200 <= 0.86  # an 80% interval
    kept = (perturb(s, p, domain, 1) == s).mean()
    assert kept == pytest.approx(p + (1 - p) / domain, abs=0.01)
