"""000 Algorithm 3's program (kernels/bip.py) with real CBC and HiGHS: optima equal
enumeration on tiny tables, every group meets the multi-SA condition, the residue of
eligible rows stays eligible, an empty selection suppresses the residue, and a
time-limited solve is never called optimal."""

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vpub_spark.kernels.bip import (
    leaves_eligible,
    meets_constraints,
    multi_sa_groups,
    solve_group,
)


def _combos(rows: np.ndarray):
    combos, counts = np.unique(rows, axis=0, return_counts=True)
    return combos, counts


def _best_by_enumeration(rows: np.ndarray, l: int) -> int:
    """The largest subset of rows meeting Appendix B's condition and, when the rows are
    l-eligible, leaving an l-eligible residue (every subset tried)."""
    combos, counts = _combos(rows)
    index = {tuple(c): k for k, c in enumerate(combos)}
    keep_residue = leaves_eligible(combos, counts, np.zeros_like(counts), l)
    best = 0
    for mask in itertools.product([0, 1], repeat=len(rows)):
        picked = rows[np.asarray(mask, dtype=bool)]
        selected = np.zeros(len(combos), dtype=np.int64)
        for r in picked:
            selected[index[tuple(r)]] += 1
        if (
            len(picked) > best
            and meets_constraints(combos, selected, l)
            and (not keep_residue or leaves_eligible(combos, counts, selected, l))
        ):
            best = len(picked)
    return best


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 9), s=st.integers(1, 2), l=st.integers(2, 3))
def test_optimum_equals_enumeration(seed, n, s, l):
    rows = np.random.default_rng(seed).integers(0, 3, (n, s))
    combos, counts = _combos(rows)
    best = _best_by_enumeration(rows, l)
    for solver in ("cbc", "highs"):
        solve = solve_group(combos, counts, l, solver, 30)
        assert solve.status == "optimal"
        assert solve.selected.sum() == best
        assert meets_constraints(combos, solve.selected, l)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 40), l=st.integers(2, 3))
def test_the_residue_of_eligible_rows_is_eligible(seed, n, l):
    """The repaired step: on rows l-eligible for every attribute, every group meets the
    condition and the suppressed residue is l-eligible (no value over 1/l of it)."""
    rows = np.random.default_rng(seed).integers(0, 2 * l, (n, 2))
    combos, counts = _combos(rows)
    assume(leaves_eligible(combos, counts, np.zeros_like(counts), l))  # as publishing solves
    plan = multi_sa_groups(combos, counts, l, "highs", 30)
    for g in plan.groups:
        assert g.sum() > 0 and meets_constraints(combos, g, l)
    assert leaves_eligible(combos, plan.suppressed, np.zeros_like(counts), l)


def test_groups_meet_the_condition_and_residue_is_suppressed():
    rng = np.random.default_rng(4)
    rows = rng.integers(0, 4, (300, 2))
    rows = np.vstack(
        [rows, np.tile([[3, 3]], (40, 1))]
    )  # a heavy combination that cannot all be grouped
    combos, counts = _combos(rows)
    plan = multi_sa_groups(combos, counts, 2, "highs", 30)
    assert plan.groups and plan.all_optimal
    for g in plan.groups:
        assert g.sum() > 0 and meets_constraints(combos, g, 2)
    assert sum(g.sum() for g in plan.groups) + plan.suppressed.sum() == len(rows)
    assert plan.suppressed.sum() > 0  # the residue is suppressed, not dropped
    assert plan.solves[-1].selected.sum() == 0  # the loop ended on an empty selection


def test_everything_suppressed_when_nothing_can_be_grouped():
    combos, counts = _combos(np.tile([[1, 2]], (10, 1)))  # one combination: never 2-diverse
    plan = multi_sa_groups(combos, counts, 2, "cbc", 30)
    assert plan.groups == [] and plan.suppressed.tolist() == [10]


@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_time_limit_is_reported_not_called_optimal(solver):
    rng = np.random.default_rng(0)
    combos = np.unique(rng.integers(0, 10, (1000, 3)), axis=0)
    available = rng.integers(1, 50, len(combos))
    solve = solve_group(combos, available, 3, solver, time_limit=0.01)
    assert solve.status != "optimal" and not solve.proven
    assert meets_constraints(combos, solve.selected, 3)  # whatever came back is still safe
