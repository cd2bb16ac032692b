"""One grouping for several anatomy tables (kernels/shared_grouping.py) on random
tables: every group of at least l rows and at most a 1/l share of any value of any
attribute, ids dense, never more groups than anatomy's n // l, the plan a function of
the combination counts alone, and a clear error for rows that are not eligible."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vpub_spark.kernels.shared_grouping import plan_slots, shared_groups


@st.composite
def eligible(draw):
    """(k columns of codes, l): every column l-eligible, values skewed at times."""
    l = draw(st.integers(2, 4))
    n = draw(st.integers(l, 60))
    k = draw(st.integers(2, 3))
    columns = [
        np.array(draw(st.lists(st.integers(0, draw(st.integers(1, 6))), min_size=n, max_size=n)))
        for _ in range(k)
    ]
    assume(all(np.bincount(c).max() * l <= n for c in columns))
    return columns, l


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(case=eligible(), seed=st.integers(0, 2**32))
def test_every_group_is_l_diverse_in_every_attribute(case, seed):
    columns, l = case
    group = shared_groups(columns, l, seed)
    n = len(columns[0])
    ids = np.unique(group)
    assert (ids == np.arange(len(ids))).all() and len(ids) <= n // l
    for g in ids:
        rows = group == g
        assert rows.sum() >= l
        for c in columns:
            assert np.bincount(c[rows]).max() * l <= rows.sum()
    assert (shared_groups(columns, l, seed) == group).all()  # a retried task repeats it


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(case=eligible(), data=st.data())
def test_the_plan_reads_only_the_combination_counts(case, data):
    """Rows moved about give the same slots: which combination goes to which group
    never depends on where the values lie."""
    columns, l = case
    rows = np.stack(columns, axis=1)
    moved = rows[data.draw(st.permutations(range(len(rows))))]
    plans = []
    for table in (rows, np.array(moved)):
        combos, counts = np.unique(table, axis=0, return_counts=True)
        plans.append(plan_slots(combos, counts, l))
    assert (plans[0] == plans[1]).all()


def test_rows_with_no_group_of_l_distinct_values_form_one_group():
    """Each pair of these four rows shares a value of one attribute: one group of four."""
    columns = [np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([0, 1, 1, 0])]
    assert (shared_groups(columns, 2, 7) == 0).all()


def test_rows_that_are_not_eligible_are_refused():
    with pytest.raises(ValueError, match="not 2-eligible"):
        shared_groups([np.array([0, 0, 1]), np.array([0, 1, 2])], 2, 1)
