"""The matching decomposition (`marginal_groups.matched`) and its place in `decompose`: a
golden case where 002's halving pairs far tuples and the matching does not, and
properties over random nodes (one tuple per value per group; optimal for two values)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.kernels.marginal_groups import decompose, halved, matched
from vpub_spark.kernels.minvariance import group_ncp

EXTENTS = {"a": 4, "b": 4}


def _total(codes: pd.DataFrame, group: np.ndarray) -> float:
    return float(group_ncp(codes, group, EXTENTS).sum())


def test_matching_pairs_what_halving_splits():
    """One bucket, values x (rows 0-2) and y (rows 3-5), three tuples each. Halving takes
    the lowest tuple of each value on one attribute as a group first: on a it pairs x
    (0, 0) with y (1, 4), 4 apart on b, and ends at total NCP 4.5 (on b no better). The
    matching pairs x (4, 2) with y (4, 0), x (0, 0) with y (1, 0) and x (1, 4) with
    y (1, 4): 1.5, the least any pairing reaches. `decompose` keeps it."""
    codes = pd.DataFrame({"a": [4, 0, 1, 4, 1, 1], "b": [2, 0, 4, 0, 4, 0]})
    s, bucket = np.array([0, 0, 0, 1, 1, 1]), np.zeros(6, dtype=np.int64)
    assert _total(codes, halved(codes, s, bucket, EXTENTS)) == pytest.approx(4.5)
    g = matched(codes, s, bucket, EXTENTS)
    assert g[0] == g[3] and g[1] == g[5] and g[2] == g[4]
    assert _total(codes, g) == pytest.approx(1.5)
    assert _total(codes, decompose(codes, s, bucket, EXTENTS)) == pytest.approx(1.5)


def test_matched_rejects_a_node_of_unequal_counts():
    codes = pd.DataFrame({"a": [0, 1, 2]})
    with pytest.raises(ValueError, match="equally often"):
        matched(codes, np.array([0, 0, 1]), np.zeros(3, dtype=np.int64), EXTENTS)


@st.composite
def nodes(draw, most: int = 4):
    """Balanced nodes: each node holds c tuples of each of its k values (2 <= k <= most)."""
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    parts = []
    for n in range(draw(st.integers(1, 4))):
        k, c = draw(st.integers(2, most)), draw(st.integers(1, 9))
        vals = rng.choice(8, size=k, replace=False)
        parts.append(pd.DataFrame({"node": n, "s": np.repeat(vals, c)}))
    frame = pd.concat(parts, ignore_index=True).sample(frac=1, random_state=1)
    frame["a"] = rng.integers(0, 5, len(frame))
    frame["b"] = rng.integers(0, 5, len(frame))
    return frame.reset_index(drop=True)


@settings(max_examples=60, deadline=None)
@given(nodes(), st.sampled_from([2, 3, 128]))
def test_matched_groups_hold_one_tuple_per_value_of_their_node(frame, cap):
    """Whatever the cap (nodes above it are halved first), every group holds one tuple
    of each value of its node and nothing else."""
    codes, s, node = frame[["a", "b"]], frame["s"].to_numpy(), frame["node"].to_numpy()
    g = matched(codes, s, node, EXTENTS, cap=cap)
    per = frame.assign(g=g).groupby("g")
    assert (per["node"].nunique() == 1).all()
    values = frame.groupby("node")["s"].nunique()
    assert (per["s"].nunique() == per.size()).all()
    assert (per.size().to_numpy() == values[per["node"].first()].to_numpy()).all()
    assert sorted(np.unique(g)) == list(range(len(per)))  # dense ids


@settings(max_examples=60, deadline=None)
@given(nodes(most=2))
def test_matching_two_values_is_never_wider_than_halving(frame):
    """With two values the matching is a minimum-cost perfect matching of pairs, so no
    grouping, 002's halving included, has a lower total NCP."""
    codes, s, node = frame[["a", "b"]], frame["s"].to_numpy(), frame["node"].to_numpy()
    assert (
        _total(codes, matched(codes, s, node, EXTENTS))
        <= _total(codes, halved(codes, s, node, EXTENTS)) + 1e-9
    )


@settings(max_examples=30, deadline=None)
@given(nodes())
def test_costing_in_slices_changes_nothing(frame):
    """`_assign` costs runs of one size in slices of bounded memory; one run per slice
    gives the same groups as all at once."""
    from vpub_spark.kernels import marginal_groups

    codes, s, node = frame[["a", "b"]], frame["s"].to_numpy(), frame["node"].to_numpy()
    whole = matched(codes, s, node, EXTENTS)
    cells = marginal_groups._COST_CELLS
    try:
        marginal_groups._COST_CELLS = 1
        assert (matched(codes, s, node, EXTENTS) == whole).all()
    finally:
        marginal_groups._COST_CELLS = cells
