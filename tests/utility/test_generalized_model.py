"""The estimate model of a generalized marginal (estimate/generalized.py): Zhang et al.'s
estimate with value sets, checked against the range estimator, enumeration and a
published marginals release."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.errors import DataError
from vpub_spark.estimate.generalized import GeneralizedModel, generalized_count


def _model(
    seed: int, groups: int = 6, age: int = 10, zips: int = 5, s: int = 4
) -> GeneralizedModel:
    rng = np.random.default_rng(seed)
    lo_a = rng.integers(0, age, groups)
    lo_z = rng.integers(0, zips, groups)
    box = pd.DataFrame(
        {
            "group_id": np.arange(groups) * 3 + 1,  # ids need not be dense
            "age_min": lo_a,
            "age_max": lo_a + rng.integers(0, age - lo_a),
            "zip_min": lo_z,
            "zip_max": lo_z + rng.integers(0, zips - lo_z),
        }
    )
    rows = [
        (g, v, int(rng.integers(1, 4)))
        for g in box["group_id"]
        for v in rng.choice(s, 2, replace=False)
    ]
    stt = pd.DataFrame(rows, columns=["group_id", "disease", "count"])
    sizes = stt.groupby("group_id")["count"].sum()
    box["size"] = sizes.reindex(box["group_id"]).to_numpy()
    return GeneralizedModel("m", ("age", "zip", "disease"), "disease", box, stt)


def _cells(m: GeneralizedModel) -> pd.DataFrame:
    """Every (age, zip, disease) cell with its estimate, by enumeration of the boxes."""
    out = []
    for g in m.groups.itertuples():
        ages, zips = range(g.age_min, g.age_max + 1), range(g.zip_min, g.zip_max + 1)
        per_cell = 1.0 / (len(ages) * len(zips))
        for r in m.st[m.st["group_id"] == g.group_id].itertuples():
            out += [(a, z, r.disease, r.count * per_cell) for a, z in itertools.product(ages, zips)]
    cells = pd.DataFrame(out, columns=["age", "zip", "disease", "est"])
    return cells.groupby(["age", "zip", "disease"], as_index=False)["est"].sum()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    lo=st.integers(0, 9),
    width=st.integers(0, 9),
    v=st.sets(st.integers(0, 3), min_size=1),
)
def test_count_is_zhang_et_al_and_the_enumeration(seed, lo, width, v):
    m = _model(seed)
    hi = min(lo + width, 9)
    q = {"age": frozenset(range(lo, hi + 1)), "disease": frozenset(v)}
    zhang = generalized_count(m.groups, m.st, "disease", {"age": (lo, hi)}, set(v))
    cells = _cells(m)
    brute = cells.loc[cells["age"].between(lo, hi) & cells["disease"].isin(v), "est"].sum()
    assert m.count(q) == pytest.approx(zhang) == pytest.approx(brute)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_marginal_at_any_keys_is_the_enumeration(seed):
    m = _model(seed)
    cells = _cells(m)
    for cols in (["age"], ["zip", "disease"], ["age", "zip", "disease"], ["disease"]):
        truth = cells.groupby(cols, as_index=False)["est"].sum()
        keys = truth[cols].sample(frac=1.0, random_state=seed).reset_index(drop=True)
        expected = keys.merge(truth, on=cols)["est"].to_numpy()
        assert np.allclose(m.marginal(keys, cells=7), expected)  # small blocks: many of them
    outside = pd.DataFrame({"age": [0], "disease": [9]})  # a value no group shows
    assert m.marginal(outside).tolist() == [0.0]
    assert m.rows() == m.marginal(pd.DataFrame(index=range(2))).tolist()[0]


def test_joint_is_refused_with_a_clear_error():
    with pytest.raises(DataError, match="ask a query on one marginal's attributes"):
        _model(0).joint  # noqa: B018


def test_a_release_of_views_answers_from_the_smallest_covering_marginal():
    from vpub_spark.errors import SpecError
    from vpub_spark.utility.queries import Estimator

    small = _model(1)
    wide = GeneralizedModel(
        "w",
        ("age", "zip", "edu", "disease"),
        "disease",
        small.groups.assign(edu_min=0, edu_max=2),
        small.st,
    )
    est = Estimator(
        [wide, small],
        n=small.rows(),
        domains={
            "age": range(10),
            "zip": range(5),
            "edu": range(3),
            "disease": range(4),
            "other": range(7),
        },
    )
    q = {"age": frozenset({1, 2, 3}), "disease": frozenset({0})}
    assert est.count(q) == pytest.approx(small.count(q))
    q_edu = {"edu": frozenset({0}), "zip": frozenset({1})}
    assert est.count(q_edu) == pytest.approx(wide.count(q_edu))
    unpublished = q | {"other": frozenset({0, 1})}
    assert est.count(unpublished) == pytest.approx(small.count(q) * 2 / 7)
    edu_only = GeneralizedModel(
        "e",
        ("edu", "disease"),
        "disease",
        wide.groups[["group_id", "edu_min", "edu_max", "size"]],
        small.st,
    )
    split = Estimator(
        [small, edu_only],
        n=10,
        domains={"age": range(10), "zip": range(5), "edu": range(3), "disease": range(4)},
    )
    with pytest.raises(SpecError, match="no table of this release holds all of age, edu"):
        split.count({"age": frozenset({1}), "edu": frozenset({0})})
