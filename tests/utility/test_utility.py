"""Utility (000 §5.1, §6.1): the decomposable estimate, KL divergence, counting queries."""

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from release_helpers import RULES_1_3, TABLE1, publish_inprocess, write_table

from vpub_spark.estimate import models, qi_runs
from vpub_spark.estimate.codes import to_codes
from vpub_spark.estimate.models import AnatomyModel, ProjectionModel
from vpub_spark.kernels.anatomy import anatomize
from vpub_spark.release.reader import open_release
from vpub_spark.utility import queries
from vpub_spark.utility.junction import estimate_rows
from vpub_spark.utility.kl import kl_divergence
from vpub_spark.utility.queries import (
    estimate_count,
    exact_count,
    relative_errors,
    workload,
)
from vpub_spark.utility.release_models import release_models


def _projection(frame, name="all"):
    counts = frame.groupby(list(frame.columns)).size().rename("count").reset_index()
    return ProjectionModel(name, tuple(frame.columns), counts)


def _anatomy(frame, s, l, seed=0, name="t"):
    qit, st_ = anatomize(frame, s, l, seed)
    return AnatomyModel(name, tuple(frame.columns), s, qit, st_)


def _brute_force(models, frame, domains):
    """p~ over the whole domain, and KL by enumeration."""
    cells = pd.DataFrame(
        list(itertools.product(*[range(len(domains[a])) for a in frame.columns])),
        columns=frame.columns,
    )
    p_est = estimate_rows(models, cells, len(frame), domains)
    p = cells.merge(
        frame.groupby(list(frame.columns)).size().rename("n").reset_index(), how="left"
    ).fillna(0)["n"].to_numpy() / len(frame)
    nz = p > 0
    return p_est, float(np.sum(p[nz] * np.log(p[nz] / p_est[nz])))


def test_exact_release_has_zero_kl_and_zero_error():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({a: rng.integers(0, 4, 500).astype(np.int32) for a in "abc"})
    domains = {a: [str(i) for i in range(4)] for a in "abc"}
    models = [_projection(frame)]
    assert kl_divergence(models, frame, domains) == pytest.approx(0.0, abs=1e-12)
    wl = workload(frame, domains, qd=2, p=0.5, size=50, seed=1)
    assert np.allclose(relative_errors(models, wl, len(frame), domains), 0.0)


@st.composite
def small_tables(draw):
    n = draw(st.integers(8, 60))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    frame = pd.DataFrame(
        {
            a: rng.integers(0, d, n).astype(np.int32)
            for a, d in zip("abcd", [2, 3, 3, 4], strict=True)
        }
    )
    split = draw(st.sampled_from(["disjoint", "overlap", "single"]))
    return frame, split


@settings(max_examples=40, deadline=None)
@given(case=small_tables())
def test_kl_equals_brute_force_on_tiny_tables(case):
    frame, split = case
    domains = {a: [str(i) for i in range(d)] for a, d in zip("abcd", [2, 3, 3, 4], strict=True)}
    if split == "disjoint":  # an anatomy table for d (when eligible) beside a projection
        l = 2
        if frame["d"].value_counts().max() * l <= len(frame):
            models = [_projection(frame[["a", "b"]], "p"), _anatomy(frame[["c", "d"]], "d", l)]
        else:
            models = [_projection(frame[["a", "b"]], "p"), _projection(frame[["c", "d"]], "q")]
    elif split == "overlap":  # a junction tree with separator b
        models = [_projection(frame[["a", "b"]], "p"), _projection(frame[["b", "c", "d"]], "q")]
    else:
        models = [_projection(frame[[a]], a) for a in "abc"]  # d unpublished: uniform
    p_est, brute = _brute_force(models, frame, domains)
    assert p_est.sum() == pytest.approx(1.0)
    assert kl_divergence(models, frame, domains) == pytest.approx(brute, abs=1e-9)
    assert brute >= -1e-12


def test_anatomy_estimate_of_004_table3():
    """004 Table 3 (QIT and ST of partition P1) and Q1: Age in [30, 50] and Disease = flu.
    est = sum_g n_g(age) * c_g(flu) / |g| = 2*1/2 + 2*1/2 + 1*1/3 = 7/3 (the true count is 3)."""
    ages = [20, 23, 38, 42, 46, 48, 49, 52, 53, 59, 61]
    groups = [1, 1, 2, 2, 3, 3, 4, 4, 4, 5, 5]
    disease = [
        "flu",
        "gastritis",
        "flu",
        "gastritis",
        "flu",
        "gastritis",
        "flu",
        "insomnia",
        "gastritis",
        "flu",
        "gastritis",
    ]
    domains = {"age": [str(a) for a in ages], "disease": ["flu", "gastritis", "insomnia"]}
    qit = to_codes(pd.DataFrame({"group_id": groups, "age": [str(a) for a in ages]}), domains)
    st_ = to_codes(pd.DataFrame({"group_id": groups, "disease": disease, "count": 1}), domains)
    model = AnatomyModel("t", ("age", "disease"), "disease", qit, st_)
    q1 = {
        "age": frozenset(i for i, a in enumerate(ages) if 30 <= a <= 50),
        "disease": frozenset({0}),
    }
    assert model.count(q1) == pytest.approx(7 / 3)
    assert estimate_count([model], q1, 11, domains) == pytest.approx(7 / 3)
    source = to_codes(pd.DataFrame({"age": [str(a) for a in ages], "disease": disease}), domains)
    assert exact_count(source, q1) == 3


def test_release_models_from_a_published_release(tmp_path):
    data = write_table(TABLE1, tmp_path / "t1")
    result = publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2)
    models, domains = release_models(open_release(result.path))
    source = to_codes(TABLE1, domains)
    kl = kl_divergence(models, source, domains)
    assert kl > 0  # race is published alone and zipcode anatomized: information is lost
    # every single-attribute count is exact in this release (each table covers every row)
    for a in TABLE1.columns:
        for code in range(len(domains[a])):
            q = {a: frozenset({code})}
            assert estimate_count(models, q, 6, domains) == pytest.approx(exact_count(source, q))


def test_the_workload_beside_the_kl_gives_the_serial_figures(tmp_path, monkeypatch):
    """From `MIN_ROWS` source rows `evaluate_loaded` counts the workload on a thread
    beside the KL: the same figures as one after the other (the threshold lowered here,
    so that a six-row release takes that path)."""
    from vpub_spark.utility import evaluate

    data = write_table(TABLE1, tmp_path / "t1")
    result = publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2)
    _, models, domains, src = evaluate.load_release_and_source(str(result.path), str(data / "data"))
    serial = evaluate.evaluate_loaded(models, domains, src, 2, 0.5, 20, 3)
    monkeypatch.setattr(evaluate, "MIN_ROWS", 0)
    beside = evaluate.evaluate_loaded(models, domains, src, 2, 0.5, 20, 3)
    figures = ("kl", "mean_relative_error", "median_relative_error", "queries", "redrawn")
    assert [getattr(beside, f) for f in figures] == [getattr(serial, f) for f in figures]
    np.testing.assert_array_equal(beside.errors, serial.errors)
    assert serial.queries == 20 and serial.kl > 0


def test_where_clauses():
    from vpub_spark.errors import SpecError
    from vpub_spark.utility.where import parse_where

    domains = {"age": ["17", "25", "37", "71"], "sex": ["F", "M"], "zip": ["71000", "72000"]}
    q = parse_where("age between 20 and 40 and sex = 'F' and zip in (71000, \"72000\")", domains)
    assert q == {"age": frozenset({1, 2}), "sex": frozenset({0}), "zip": frozenset({0, 1})}
    assert parse_where("sex in ('F') and sex = M", domains) == {"sex": frozenset()}  # both: nothing
    for bad, msg in [
        ("sex = X", "no value 'X'"),
        ("height = 3", "unknown attribute"),
        ("sex == F", "cannot parse"),
        ("", "empty"),
    ]:
        with pytest.raises(SpecError, match=msg):
            parse_where(bad, domains)


def test_query_and_utility_commands(tmp_path, capsys):
    from vpub_spark.cli import main

    data = write_table(TABLE1, tmp_path / "t1")
    result = publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2)
    assert (
        main(
            [
                "query",
                str(result.path),
                "--where",
                "gender = F and age in (37)",
                "--source",
                str(data / "data"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # gender and age share the zipcode table's QIT: the estimate is exact (2 rows: F, 37)
    assert "estimate: 2.0 of 6 rows" in out and "exact:    2" in out
    assert (
        main(
            [
                "utility",
                str(result.path),
                "--source",
                str(data / "data"),
                "--qd",
                "2",
                "--queries",
                "20",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # engine auto by default: a six-row source fits in process, and the run says so
    assert "on the inprocess engine (auto: " in out and "KL divergence" in out
    assert main(["query", str(result.path), "--where", "gender = X"]) == 2


@settings(max_examples=40, deadline=None)
@given(case=small_tables(), qseed=st.integers(0, 1000))
def test_query_estimates_equal_the_model_summed_over_the_domain(case, qseed):
    """Message passing on the junction tree (overlapping tables) and the product
    (disjoint tables) both equal n * sum of p~ over the query's cells, enumerated."""
    from vpub_spark.utility.queries import Estimator

    frame, split = case
    sizes = dict(zip("abcd", [2, 3, 3, 4], strict=True))
    domains = {a: [str(i) for i in range(d)] for a, d in sizes.items()}
    if split == "overlap":
        models = [
            _projection(frame[["a", "b"]], "p"),
            _projection(frame[["b", "c"]], "q"),
            _projection(frame[["c", "d"]], "r"),
        ]
        if frame["d"].value_counts().max() * 2 <= len(frame):
            models[2] = _anatomy(frame[["b", "c", "d"]], "d", 2)
    else:
        models = [
            _projection(frame[["a", "b"]], "p"),
            _projection(frame[["c"]], "q"),
        ]  # d unpublished
    cells = pd.DataFrame(
        list(itertools.product(*[range(d) for d in sizes.values()])), columns=list(sizes)
    )
    p_est = estimate_rows(models, cells, len(frame), domains)
    rng = np.random.default_rng(qseed)
    est = Estimator(models, len(frame), domains)
    est._cells = False  # the message-passing path (the domain shortcut is checked below)
    shortcut = Estimator(models, len(frame), domains)
    for _ in range(5):
        attrs = rng.choice(list(sizes), size=int(rng.integers(1, 4)), replace=False)
        q = {
            str(a): frozenset(
                int(v)
                for v in rng.choice(
                    sizes[a], size=int(rng.integers(1, sizes[a] + 1)), replace=False
                )
            )
            for a in attrs
        }
        inside = np.ones(len(cells), dtype=bool)
        for a, vals in q.items():
            inside &= cells[a].isin(list(vals)).to_numpy()
        assert est.count(q) == pytest.approx(len(frame) * p_est[inside].sum(), abs=1e-9)
        assert shortcut.count(q) == pytest.approx(len(frame) * p_est[inside].sum(), abs=1e-9)


def _one_at_a_time(frame, domains, qd, p, size, seed):
    """The workload as drawn before cubes: one candidate drawn and counted at a time."""
    rng, out, redrawn = np.random.default_rng(seed), [], 0
    while len(out) < size:
        q = queries._draw(rng, list(frame.columns), domains, qd, p)
        act = int(queries.mask(frame, q).sum())
        if act:
            out.append((q, act))
        else:
            redrawn += 1
    return out, redrawn


@settings(max_examples=40, deadline=None)
@given(
    case=small_tables(),
    qd=st.integers(1, 4),
    p=st.sampled_from([0.2, 0.5, 1.0]),
    seed=st.integers(0, 99),
    cells=st.sampled_from([1, 1 << 22]),
)
def test_workload_by_cubes_equals_drawing_and_counting_one_at_a_time(case, qd, p, seed, cells):
    """Contingency cubes (and the per-query fallback for sets over CUBE_CELLS) give every
    query's exact count, and batched draws the same queries as drawing one at a time."""
    frame, _ = case
    domains = {a: [str(i) for i in range(int(frame[a].max()) + 2)] for a in frame.columns}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(queries, "CUBE_CELLS", cells)
        wl = workload(frame, domains, qd, p, 25, seed)
    expected, redrawn = _one_at_a_time(frame, domains, qd, p, 25, seed)
    assert (
        list(zip(wl.queries, wl.actual.tolist(), strict=True)) == expected and wl.redrawn == redrawn
    )
    assert all(exact_count(frame, q) == a for q, a in zip(wl.queries, wl.actual, strict=True))


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    cols=st.sampled_from([("a", "b", "s"), ("a", "s"), ("s",), ("a",), ("a", "b"), ("b", "s")]),
)
def test_anatomy_marginal_is_its_definition(seed, cols):
    """est(x) = sum_g n_g(x_Q) * c_g(x_S) / |g| (000 §5.1), computed row by row here;
    `AnatomyModel.marginal` answers by sorted packed keys. Keys include
    codes no group holds and repeat; the ST holds suppressed values (-1), which count in
    |g| and are never asked for."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    qit = pd.DataFrame(
        {
            "group_id": rng.integers(0, 6, n) * 3 + 5,
            "a": rng.integers(0, 4, n),
            "b": rng.integers(0, 3, n),
        }
    )
    counts = {
        (g, v): c
        for g in sorted(set(qit["group_id"]))
        for v, c in zip(
            *np.unique(rng.integers(-1, 5, int((qit["group_id"] == g).sum())), return_counts=True),
            strict=True,
        )
    }
    st_ = pd.DataFrame(
        [(g, v, c) for (g, v), c in counts.items()], columns=["group_id", "s", "count"]
    )
    if seed % 2:  # an ST in any order (as written, it is sorted by group and value)
        st_ = st_.iloc[rng.permutation(len(st_))].reset_index(drop=True)
    model = AnatomyModel("t", ("a", "b", "s"), "s", qit, st_)
    k = int(rng.integers(0, 40))
    keys = pd.DataFrame({c: rng.integers(0, 6, k) for c in cols})
    size = st_.groupby("group_id")["count"].sum()
    q = [c for c in cols if c != "s"]
    want = []
    for _, x in keys.iterrows():
        inside = qit[(qit[q] == x[q]).all(axis=1)] if q else qit
        n_g = inside.groupby("group_id").size()
        share = [
            counts.get((g, int(x["s"])), 0) / size[g] if "s" in cols else 1.0 for g in n_g.index
        ]
        want.append(float(np.dot(n_g.to_numpy(), share)))
    assert np.allclose(model.marginal(keys), want)
    for dtype in (np.uint8, np.int8, np.uint64):  # keys of any integer type, packed as they are
        assert np.allclose(model.marginal(keys.astype(dtype)), want)
    if "s" in cols and k:  # values no group holds, past the narrow type's and 2**31
        for big, dtype in ((255, np.uint8), (127, np.int8), (2**32 + 1, np.int64)):
            far = keys.astype(dtype).assign(s=np.full(k, big, dtype))
            assert model.marginal(far).tolist() == [0.0] * k
    for product in (True, False):  # every (run, value) pair summed, or the keys' pairs
        with pytest.MonkeyPatch.context() as patch:  # a few pairs at a time
            patch.setattr(models, "_joint_fits", lambda *_, chosen=product: chosen)
            patch.setattr(qi_runs, "PAIRS", int(rng.integers(1, 5)))
            assert np.allclose(
                AnatomyModel("t", ("a", "b", "s"), "s", qit, st_).marginal(keys), want
            )
            if "s" in cols and k:
                far = keys.assign(s=np.full(k, 2**32 + 1, np.int64))
                assert (
                    AnatomyModel("t", ("a", "b", "s"), "s", qit, st_).marginal(far).tolist()
                    == [0.0] * k
                )
    with pytest.MonkeyPatch.context() as patch:  # a few pairs at a time; shares searched
        patch.setattr(models, "_joint_fits", lambda *_: False)
        patch.setattr(qi_runs, "PAIRS", int(rng.integers(1, 5)))
        patch.setattr(models, "DENSE_SHARES", 0)  # the search within groups
        assert np.allclose(AnatomyModel("t", ("a", "b", "s"), "s", qit, st_).marginal(keys), want)


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    sets=st.lists(
        st.lists(st.sampled_from("abcde"), min_size=0, max_size=4, unique=True),
        min_size=1,
        max_size=8,
    ),
    budget=st.sampled_from([1, 8, 60, 10**6]),
)
def test_cubes_summed_down_from_covers_equal_each_sets_own_cube(seed, sets, budget):
    """`queries.cubes` counts the rows into `covers`' larger cubes and sums them down;
    each set's cube (in the set's own attribute order) equals `cube` counted directly,
    and every set lies in exactly the cover that answers it, within the budget unless it
    is over the budget itself."""
    rng = np.random.default_rng(seed)
    sizes = dict(zip("abcde", rng.integers(1, 5, 5).tolist(), strict=True))
    n = int(rng.integers(0, 50))
    frame = pd.DataFrame({a: rng.integers(0, d, n) for a, d in sizes.items()})
    wanted = [tuple(s) for s in sets]
    found = queries.covers(wanted, sizes, budget)
    assert sorted(s for held in found.values() for s in held) == sorted(set(wanted))
    for cover, held in found.items():
        cells = int(np.prod([sizes[a] for a in cover]))
        assert all(set(s) <= set(cover) for s in held)
        assert cells <= budget or any(set(s) == set(cover) for s in held)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(queries.covers, "__defaults__", (budget,))
        got = queries.cubes(frame, wanted, sizes)
    for s in wanted:
        np.testing.assert_array_equal(got[s], queries.cube(frame, s, sizes))


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    cube_cells=st.sampled_from([1, 1 << 22]),
    cover_cells=st.sampled_from([1, 30, 1 << 20]),
    whole=st.booleans(),
)
def test_batched_estimates_equal_one_count_at_a_time(seed, cube_cells, cover_cells, whole):
    """`Estimator.counts` (estimate cubes per table, summed down from covering cubes)
    gives each query's `count`: an anatomy table whose ST holds suppressed values (-1)
    and groups with gaps in their ids, a projection, an unpublished attribute; cubes
    over CUBE_CELLS fall back to one count per query. An anatomy table's cubes with S
    are summed down from its whole joint, or (`whole` False) from the cube's own."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    qit = pd.DataFrame(
        {
            "group_id": rng.integers(0, 6, n) * 3 + 5,
            "a": rng.integers(0, 4, n),
            "b": rng.integers(0, 3, n),
        }
    )
    counts = {
        (g, v): c
        for g in sorted(set(qit["group_id"]))
        for v, c in zip(
            *np.unique(rng.integers(-1, 5, int((qit["group_id"] == g).sum())), return_counts=True),
            strict=True,
        )
    }
    st_ = pd.DataFrame(
        [(g, v, c) for (g, v), c in counts.items()], columns=["group_id", "s", "count"]
    )
    proj = pd.DataFrame({"c": np.arange(3), "count": rng.integers(0, 9, 3)})
    built = [AnatomyModel("t", ("a", "b", "s"), "s", qit, st_), ProjectionModel("p", ("c",), proj)]
    domains = {
        a: [str(i) for i in range(d)] for a, d in {"a": 4, "b": 3, "s": 5, "c": 3, "d": 2}.items()
    }
    asked = []
    for _ in range(30):
        attrs = rng.choice(list(domains), size=int(rng.integers(1, 5)), replace=False)
        asked.append(
            {
                str(a): frozenset(
                    int(v)
                    for v in rng.choice(
                        len(domains[a]),
                        size=int(rng.integers(1, len(domains[a]) + 1)),
                        replace=False,
                    )
                )
                for a in attrs
            }
        )
    want = [queries.Estimator(built, n, domains).count(q) for q in asked]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(queries, "CUBE_CELLS", cube_cells)
        patch.setattr(queries, "COVER_CELLS", cover_cells)
        patch.setattr(models, "_joint_fits", lambda *_: whole)
        got = queries.Estimator(built, n, domains).counts(asked)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_a_cube_with_s_counts_a_row_whose_other_qi_code_is_outside():
    """A QIT row with a code outside its domain (-1) on b is in no cell of b, yet counts
    in a cube without b, as `count` counts it: the cube is then not summed down from
    the joint over every QI attribute, which leaves that row out."""
    qit = pd.DataFrame({"group_id": [0, 0], "a": [0, 0], "b": [-1, 0]})
    st_ = pd.DataFrame({"group_id": [0], "s": [0], "count": [2]})
    model = AnatomyModel("t", ("a", "b", "s"), "s", qit, st_)
    sizes = {"a": 1, "b": 1, "s": 1}
    assert model.cube(["a", "s"], sizes).tolist() == [[2.0]]
    assert model.count({"a": frozenset({0}), "s": frozenset({0})}) == 2.0
    assert model.cube(["b", "s"], sizes).tolist() == [[1.0]]


def test_a_suppressed_code_meets_no_condition():
    """-1 (a suppressed value) is in no query's values, also when a query asks for the
    largest code: the lookup table read it as that code before."""
    from vpub_spark.estimate.codes import mask

    frame = pd.DataFrame({"a": np.array([-1, 0, 2, 2, -1], np.int32), "b": [1, 1, 1, 0, 1]})
    assert mask(frame, {"a": frozenset({2})}).tolist() == [False, False, True, True, False]
    assert mask(frame, {"a": frozenset({0, 2}), "b": frozenset({1})}).tolist() == [
        False,
        True,
        True,
        False,
        False,
    ]
