"""002 §4's comparison: the vectorized estimators equal the reference ones of
estimate/generalized.py (Zhang et al.; ANGEL), the workload follows 002's recipe, and a
small run produces both methods' errors and plots."""

import numpy as np
import pandas as pd
import pytest
from release_helpers import write_table

from vpub_bench.compare import write_results
from vpub_bench.compare_marginals import (
    MarginalsCompareConfig,
    angel,
    bucketize_table,
    marginal_workload,
    ours,
    run_marginals_compare,
)
from vpub_spark.errors import SpecError
from vpub_spark.estimate.generalized import angel_count, generalized_count
from vpub_spark.kernels.angel import angel_batches, angel_tables, boxes
from vpub_spark.kernels.marginal_groups import decompose
from vpub_spark.options import parse_file


def _frame(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 30, n)
    return pd.DataFrame(
        {
            "a": a,
            "b": rng.integers(0, 3, n),
            "c": rng.integers(0, 8, n),
            "s": (a // 4 + rng.integers(0, 6, n)) % 12,
        }
    )


SIZES = {"a": 30, "b": 3, "c": 8, "s": 12}


def test_vectorized_estimates_equal_the_reference_estimators():
    f = _frame()
    qi = ("a", "b", "c")
    canon, bucket, info = bucketize_table(
        f, qi, "s", 4, SIZES, seed=1, chunk_rows=400, tries=5, blocks=32
    )
    assert info["subtables"] >= 1 and len(info["leftover"]) == len(f)
    assert sorted(map(tuple, canon.to_numpy())) == sorted(
        map(tuple, f[list(qi) + ["s"]].to_numpy())
    )  # the same rows
    extents = {a: SIZES[a] - 1 for a in qi}
    batch = angel_batches(f[list(qi)], f["s"].to_numpy(), 4, extents)
    for attrs in (["a"], ["a", "c"]):
        mine = ours(canon, bucket, attrs, "s", SIZES)
        group = decompose(canon[attrs], canon["s"].to_numpy(), bucket, extents)
        groups = boxes(canon[attrs], group).drop(columns="count")
        st = (
            pd.DataFrame({"group_id": group, "s": canon["s"]})
            .groupby(["group_id", "s"])
            .size()
            .rename("count")
            .reset_index()
        )
        theirs = angel(f, batch, qi, attrs, "s", 4, SIZES)
        gt, bt = angel_tables(f[list(qi)], attrs, f["s"].to_numpy(), 4, extents, batch)
        queries, exact, _ = marginal_workload(f, attrs, "s", SIZES, None, 0.2, 25, seed=3)
        for ranges, (lo, hi) in queries:
            values = set(range(lo, hi + 1))
            assert mine.estimate(ranges, (lo, hi)) == pytest.approx(
                generalized_count(groups, st, "s", ranges, values)
            )
            assert theirs.estimate(ranges, (lo, hi)) == pytest.approx(
                angel_count(gt, bt, "s", ranges, values)
            )
        full = {a: (0, SIZES[a] - 1) for a in attrs}
        assert mine.estimate(full, (0, 11)) == pytest.approx(len(f)) and theirs.estimate(
            full, (0, 11)
        ) == pytest.approx(len(f))


def test_workload_follows_002():
    f = _frame()
    queries, exact, redrawn = marginal_workload(
        f, ["a", "b", "c"], "s", SIZES, 3, 0.125, 200, seed=2
    )
    for ranges, (lo, hi) in queries:
        assert len(ranges) == 2 and hi - lo + 1 == int(
            12 * 0.125 ** (1 / 3)
        )  # w - 1 QI attributes + the sensitive one
        for a, (x, y) in ranges.items():
            assert y - x + 1 == max(1, int(SIZES[a] * 0.5)) and 0 <= x and y < SIZES[a]
    assert (exact > 0).all() and redrawn >= 0
    with pytest.raises(SpecError, match="between 1 and 4"):
        marginal_workload(f, ["a", "b", "c"], "s", SIZES, 5, 0.1, 1, seed=2)


def test_small_comparison_run(tmp_path):
    data = write_table(_frame(900).astype(str).apply(lambda c: c.str.zfill(2)), tmp_path / "t")
    cfg = parse_file(
        MarginalsCompareConfig,
        {
            "input": {"path": str(data)},
            "privacy": {"model": "m-invariance", "m": 4},
            "marginals": {
                "sensitive": "s",
                "schemas": {"M1": ["a"], "M2": ["a", "b"]},
                "chunk_rows": 300,
            },
            "compare": {
                "queries": 30,
                "sweeps": [
                    {"vary": "m", "values": [3, 4]},
                    {"vary": "marginal", "values": ["M1", "M2"]},
                ],
            },
            "output": {"path": str(tmp_path / "cmp")},
        },
    )
    res = run_marginals_compare(cfg)
    assert len(res) == 8 and set(res["method"]) == {"marginals", "angel"}
    assert (
        (res["relative_error"] >= 0).all()
        and res["relative_error"].notna().all()
        and res["time_s"].notna().all()
    )
    files = write_results(res, cfg, "t", {"relative_error": "error", "time_s": "time"})
    assert len(files) == 4 and all(f.stat().st_size > 0 for f in files)


def test_skewed_points_fixed_parameters_and_the_local_dealing(tmp_path):
    """`skew` makes the top value's share skew / m at each point (the same table, skewed
    in memory), a sweep may hold m at its own value (its rows are labelled by it), and
    `marginals_local` is ours with the QI-local dealing beside the random one."""
    data = write_table(_frame(900).astype(str).apply(lambda c: c.str.zfill(2)), tmp_path / "t")
    cfg = parse_file(
        MarginalsCompareConfig,
        {
            "input": {"path": str(data)},
            "privacy": {"model": "m-invariance", "m": 4},
            "marginals": {"sensitive": "s", "schemas": {"M1": ["a"], "M2": ["a", "b"]}},
            "compare": {
                "methods": ["marginals", "marginals_local", "angel"],
                "queries": 20,
                "skew": 0.95,
                "sweeps": [
                    {"vary": "skew", "values": [0.9, 0.99], "m": 2},
                    {"vary": "marginal", "values": ["M1", "M2"], "m": 3},
                ],
            },
            "output": {"path": str(tmp_path / "cmp")},
        },
    )
    res = run_marginals_compare(cfg)
    assert len(res) == 12 and set(res["sweep"]) == {"skew_m2", "marginal_m3"}
    assert set(res["method"]) == {"marginals", "marginals_local", "angel"}
    skews = res[res["sweep"] == "skew_m2"]
    assert (skews["m"] == 2).all()
    share = lambda skew, m: round(skew / m * 900) / 900  # noqa: E731
    assert skews["top_share"].tolist() == [share(0.9, 2)] * 3 + [share(0.99, 2)] * 3
    assert (res.loc[res["sweep"] == "marginal_m3", "top_share"] == share(0.95, 3)).all()
    ours = res[res["method"] != "angel"]
    assert (ours["subtables"] >= 1).all() and ours["box_width"].between(0, 1).all()
    files = write_results(res, cfg, "t", {"relative_error": "error", "time_s": "time"})
    assert {f.name for f in files} >= {"skew_m2_relative_error.png", "marginal_m3_time_s.png"}
    bad = {"input": {"path": "x"}, "marginals": {"sensitive": "s", "schemas": {"M1": ["a"]}}}
    for compare, message in (
        ({"skew": 1.0}, r"skew \(the top value's share times m\) must be in \(0, 1\)"),
        ({"sweeps": [{"vary": "m", "values": [2], "k": 3}]}, "a sweep takes vary, values"),
        ({"sweeps": [{"vary": "m", "values": [2], "marginal": "M9"}]}, "must be among M1"),
    ):
        with pytest.raises(SpecError, match=message):
            parse_file(MarginalsCompareConfig, {**bad, "compare": compare}, "t")


def test_other_comparisons_refuse_fixed_sweep_parameters():
    from vpub_bench.common import read_sweeps

    with pytest.raises(SpecError, match="a sweep takes vary, values and nothing, not c"):
        read_sweeps([{"vary": "l", "values": [2], "c": 3}], "t", parameters=("c", "l"))
    with pytest.raises(SpecError, match="t must be a non-empty list"):
        read_sweeps([], "t", parameters=("c", "l"))


def test_shipped_configs_parse():
    from pathlib import Path

    from vpub_spark.config import load_config
    from vpub_spark.tablespec import load_yaml

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "conf" / "census_marginals.yaml")
    root = root / "vpub_bench" / "conf"
    assert cfg.method == "marginals" and cfg.privacy.m == 6 and len(cfg.marginals.schemas) == 3
    for name in ("compare_marginals.yaml", "compare_marginals_adult.yaml"):
        c = parse_file(MarginalsCompareConfig, load_yaml(root / name), name)
        assert (root / c.input_path).resolve().is_relative_to(root.parents[1])
        assert [k for k, _ in c.marginals] == ["M1", "M2", "M3", "M4", "M5"]
        assert c.methods == (
            "marginals",
            "marginals_local",
            "marginals_ends",
            "marginals_ml",
            "angel",
        )
        assert c.partitioning == "mondrian"
    skew = parse_file(
        MarginalsCompareConfig, load_yaml(root / "compare_marginals_skew.yaml"), "skew"
    )
    assert skew.methods == ("marginals", "marginals_local", "angel")
    assert {(v, f.get("m")) for v, _, f in skew.sweeps} == {
        (v, m) for v in ("skew", "marginal") for m in (2, 3, 4)
    }
    for name, how in (("ncp", "ncp"), ("stop", "ncp+mondrian"), ("tries20", "ncp")):
        c = parse_file(
            MarginalsCompareConfig, load_yaml(root / f"compare_marginals_{name}.yaml"), name
        )
        assert c.partitioning == how
    with pytest.raises(SpecError, match="partitioning must be one of"):
        parse_file(
            MarginalsCompareConfig,
            {
                "input": {"path": "x"},
                "marginals": {"sensitive": "s", "schemas": {"M1": ["a"]}, "partitioning": "kd"},
            },
            "t",
        )


def test_ends_estimator_on_a_worked_box():
    """A group of 4 tuples in age box [10, 19] (a minimum bounding box: one tuple at 10,
    one at 19, two spread over the 10 points): a query age in [19, 30] holds the tuple at
    19 and 2 * 1/10 of the others, 1.2 tuples; uniform spread says 4 * 1/10."""
    from vpub_bench.box_estimators import EndsPublished, Published

    box = pd.DataFrame({"group_id": [0], "age_min": [10], "age_max": [19], "count": [4]})
    cum = np.array([[0.0, 1, 2, 3, 4]])  # four sensitive values, one tuple each
    ends = EndsPublished(box, cum)  # n = 4 from the box's count
    assert ends.estimate({"age": (19, 30)}, (0, 3)) == pytest.approx(1.2)
    assert Published(box, cum).estimate({"age": (19, 30)}, (0, 3)) == pytest.approx(0.4)
    assert ends.estimate({"age": (12, 17)}, (0, 3)) == pytest.approx(1.2)  # no end inside
    assert Published(box, cum).estimate({"age": (12, 17)}, (0, 3)) == pytest.approx(2.4)
    assert ends.estimate({"age": (0, 40)}, (0, 1)) == pytest.approx(2.0)  # whole box


def test_turnbull_is_the_interval_censored_maximum_likelihood():
    """Values known to be 0 (twice) and in [0, 1] (once): the likelihood f0^2 (f0 + f1) is
    largest at f0 = 1; values in [0, 2] only: any distribution is optimal and EM keeps
    the uniform start; exact values give their histogram."""
    from vpub_bench.box_estimators import turnbull

    f = turnbull(np.array([0, 0]), np.array([0, 1]), np.array([2.0, 1.0]), 3)
    assert f == pytest.approx([1, 0, 0], abs=1e-3)
    assert turnbull(np.array([0]), np.array([2]), np.array([5.0]), 3) == pytest.approx([1 / 3] * 3)
    exact = turnbull(np.array([0, 1, 2]), np.array([0, 1, 2]), np.array([1.0, 3.0, 4.0]), 3)
    assert exact == pytest.approx([1 / 8, 3 / 8, 4 / 8])


def test_partitionings_give_m_eligible_subtables_and_mondrian_is_tighter():
    """Every partitioning step makes m-eligible sub-tables; Mondrian's median cuts give
    narrower boxes than 002 Figure 1's NCP-greedy splits, and
    continuing 002's sub-tables with Mondrian only refines them."""
    from vpub_bench.compare_marginals import box_width
    from vpub_spark.kernels.angel import boxes as box_of
    from vpub_spark.publishing.marginals import canonical, subtables

    f = canonical(_frame(3000, seed=4))
    qi, s = ["a", "b", "c"], f["s"].to_numpy()
    extents = {a: SIZES[a] - 1 for a in qi}
    made = {
        how: subtables(f[qi], s, 4, extents, 7, 5, 32, how)
        for how in ("ncp", "mondrian", "ncp+mondrian", "none")
    }
    for how, sub in made.items():
        per = pd.DataFrame({"sub": sub, "s": s}).groupby(["sub", "s"]).size()
        top, size = per.groupby(level=0).max(), per.groupby(level=0).sum()
        assert (top * 4 <= size).all(), how
    assert made["none"].max() == 0
    pairs = pd.DataFrame({"n": made["ncp"], "r": made["ncp+mondrian"]}).drop_duplicates()
    assert not pairs["r"].duplicated().any()  # each refined sub-table inside one of 002's
    # at m = 2 both cut (at m = 4 this table's top value stops every cut: kernels/mondrian.py)
    width = {
        how: box_width(box_of(f[qi], subtables(f[qi], s, 2, extents, 7, 5, 32, how)), qi, SIZES)
        for how in ("ncp", "mondrian")
    }
    assert width["mondrian"] < width["ncp"] < 1


def test_the_two_bounds_on_a_worked_example():
    """Groups {(a 0, b 0, s 0), (a 1, b 1, s 1)} and {(a 5, b 0, s 0), (a 6, b 1, s 2)}.
    Query a = 0, b = 1, s in {0, 1}: no tuple matches, and knowing the QI values
    (`bound_exact_qi`) says 0; knowing each attribute's distribution in the group but
    not their joint (`bound_group_marginals`) says 2 values * 1/2 * 1/2 = 0.5."""
    from vpub_bench.box_estimators import Bound

    codes = pd.DataFrame({"a": [0, 1, 5, 6], "b": [0, 1, 0, 1]})
    s, group = np.array([0, 1, 0, 2]), np.array([0, 0, 1, 1])
    exact = Bound(pd.DataFrame(), np.zeros((2, 4)), codes, s, group, True)
    indep = Bound(pd.DataFrame(), np.zeros((2, 4)), codes, s, group, False)
    q = {"a": (0, 0), "b": (1, 1)}
    assert exact.estimate(q, (0, 1)) == 0 and indep.estimate(q, (0, 1)) == pytest.approx(0.5)
    assert exact.estimate({"a": (0, 5)}, (0, 0)) == pytest.approx(1.5)  # all of group 0, half of 1
