"""002 §4's comparison (issue 6): the vectorized estimators equal the reference ones of
utility/generalized.py (Zhang et al.; ANGEL), the workload follows 002's recipe, and a
small run produces both methods' errors and plots."""

import numpy as np
import pandas as pd
import pytest
from release_helpers import write_table

from vpub_spark.errors import SpecError
from vpub_spark.experiments.compare import write_results
from vpub_spark.experiments.compare_marginals import (
    angel,
    bucketize_table,
    marginal_workload,
    marginals_compare_config_from_dict,
    ours,
    run_marginals_compare,
)
from vpub_spark.kernels.angel import angel_batches, angel_tables, boxes
from vpub_spark.kernels.minvariance import decompose
from vpub_spark.utility.generalized import angel_count, generalized_count


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
    canon, bucket = bucketize_table(
        f, qi, "s", 4, SIZES, seed=1, chunk_rows=400, tries=5, blocks=32
    )
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
    cfg = marginals_compare_config_from_dict({
        "input": {"path": str(data)}, "privacy": {"model": "m-invariance", "m": 4},
        "marginals": {"sensitive": "s", "schemas": {"M1": ["a"], "M2": ["a", "b"]}, "chunk_rows": 300},
        "compare": {"queries": 30, "sweeps": [{"vary": "m", "values": [3, 4]}, {"vary": "marginal", "values": ["M1", "M2"]}]},
        "output": {"path": str(tmp_path / "cmp")},
    })  # fmt: skip
    res = run_marginals_compare(cfg)
    assert len(res) == 8 and set(res["method"]) == {"marginals", "angel"}
    assert (
        (res["relative_error"] >= 0).all()
        and res["relative_error"].notna().all()
        and (res["time_s"] > 0).all()
    )
    files = write_results(res, cfg, "t", {"relative_error": "error", "time_s": "time"})
    assert len(files) == 4 and all(f.stat().st_size > 0 for f in files)


def test_shipped_configs_parse():
    from pathlib import Path

    from vpub_spark.config import load_config
    from vpub_spark.tablespec import load_yaml

    root = Path(__file__).resolve().parents[2] / "conf"
    cfg = load_config(root / "census_marginals.yaml")
    assert cfg.method == "marginals" and cfg.privacy.m == 6 and len(cfg.marginals.schemas) == 3
    for name in ("compare_marginals.yaml", "compare_marginals_adult.yaml"):
        c = marginals_compare_config_from_dict(load_yaml(root / name), name)
        assert [k for k, _ in c.marginals] == ["M1", "M2", "M3", "M4", "M5"] and c.methods == (
            "marginals",
            "angel",
        )
