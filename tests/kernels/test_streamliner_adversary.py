"""003 §1's adversary, simulated: she knows the algorithm, every tuple's QI and the
release (the groups and each group's sensitive values), not the private seed. Her
posterior for "tuple i has value v" weighs every table t' the release allows (the same
values, placed anyhow) by how likely the algorithm is to publish this release from t':
the share of its random choices (all permutations of the row priorities, enumerated
exactly) that give it. Privacy asks that it stays <= 1/l for every tuple and value.
The adversary is shared with test_adversary.py (tests/adversary.py)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from adversary import every_order, worst_posterior

from vpub_spark.kernels.mondrian import mondrian
from vpub_spark.kernels.streamliner import gda, rda

PRIORITIES = every_order(5)
TABLE_1 = (pd.DataFrame({"dob": [4, 3, 2, 1, 0]}), np.array([0, 0, 1, 1, 2]))  # 003 Table 1


@pytest.mark.parametrize(
    "codes, values",
    [
        TABLE_1,
        (pd.DataFrame({"x": [0, 3, 1, 2, 4]}), np.array([1, 0, 2, 0, 2])),
    ],
)
def test_rda_and_gda_keep_every_posterior_at_most_one_over_l(codes, values):
    size = {a: int(codes[a].max()) + 1 for a in codes.columns}
    runs = {
        "rda": lambda t, p: rda(codes, t, 2, 0, priority=p).group,
        "gda": lambda t, p: gda(codes, t, 2, 0, size, priority=p).group,
    }
    for name, run in runs.items():
        assert worst_posterior(run, values, PRIORITIES) <= 0.5 + 1e-9, name


def test_gda_dealt_in_weighted_rank_order_would_leak():
    """The decision in kernels/streamliner.py: with a color's tuples taken in weighted-rank
    order (Table 7 line 5) instead of at random, one release pins a tuple's value (the
    second table of the test above, where random dealing keeps 1/2)."""
    codes = pd.DataFrame({"x": [0, 3, 1, 2, 4]})
    values = np.array([1, 0, 2, 0, 2])
    order = np.argsort(np.argsort(codes["x"].to_numpy(), kind="stable"))  # priority = wr rank
    run = lambda t, _p: gda(codes, t, 2, 0, {"x": 5}, priority=order).group  # noqa: E731
    assert worst_posterior(run, values, [None]) == 1.0


def test_l_diverse_mondrian_is_not_algorithm_safe():
    """A counter-example (found by search): l-diverse Mondrian (kernels/mondrian) keeps a
    group whole when a median cut fails, and whether it fails depends on values the
    release does not show, so the adversary rules tables out and learns a value."""
    codes = pd.DataFrame({"x": [2, 1, 1, 1, 1, 3], "y": [0, 3, 1, 0, 3, 0]})
    values = np.array([0, 2, 0, 1, 2, 3])
    run = lambda t, _p: mondrian(codes, {"x": 3, "y": 3}, t, l=2)  # noqa: E731
    groups = run(values, None)
    assert all(
        np.bincount(values[groups == g]).max() * 2 <= (groups == g).sum() for g in np.unique(groups)
    )
    assert worst_posterior(run, values, [None]) == 1.0  # every group 2-diverse, yet certain


def _gda_nearest_leftover(codes: pd.DataFrame, sensitive, l: int, priority, distance) -> np.ndarray:
    """GDA's steps on one segment (5 rows < the default segment of 8 l), except that the
    leftover joins the compatible group nearest in weighted rank (003 Table 7 line 11)
    instead of the one holding the least priority; `distance` reduces the leftover's
    distances to a group's members to one number."""
    from vpub_spark.kernels import streamliner as sl
    from vpub_spark.kernels.minvariance import assign_buckets

    wr = sl.weighted_rank(codes, {a: int(codes[a].max()) + 1 for a in codes.columns})
    canon = sl._canonical(codes, sensitive)
    canon = canon[np.argsort(wr[canon], kind="stable")]
    s, w = sensitive[canon].astype(np.int64), wr[canon]
    key = sl._priority(len(s), 0, priority, canon)
    group = sl._groups_of_buckets(assign_buckets(s, l, 0, np.zeros_like(s), key), s, key)
    cand, members = sl._cyclic_candidates(group, s, l)

    def nearest(row: int, groups: np.ndarray) -> int:
        return int(groups[np.argmin(distance(np.abs(w[members[groups]] - w[row]), axis=1))])

    sl._append(group, s, cand, members, np.flatnonzero(group < 0), nearest)
    return sl._restore(canon, group, cand).group


@pytest.mark.parametrize("distance, leaked", [(np.min, Fraction(2, 3)), (np.mean, Fraction(1))])
def test_gda_with_nearest_group_leftovers_would_leak(distance, leaked):
    """The decision in kernels/streamliner.py: a leftover that joins the group nearest in
    weighted rank (to its nearest member, or to the members' mean) lets the adversary
    learn a value of 003 Table 1 beyond 1/2, where gda's least-priority choice keeps 1/2
    (the first test of this module)."""
    codes, values = TABLE_1
    run = lambda t, p: _gda_nearest_leftover(codes, t, 2, p, distance)  # noqa: E731
    assert worst_posterior(run, values, PRIORITIES) == leaked
