import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import rule_sets

from vpub_spark.decompose.uad import single_attribute, uad
from vpub_spark.errors import PrivacyError
from vpub_spark.gnf import check_gnf
from vpub_spark.kernels.anatomy import COUNT, GROUP, anatomize, max_share
from vpub_spark.rules import parse_rules

ATTRS = ["hospital", "age", "gender", "zipcode", "race", "icd9"]


def test_one_rule_gives_one_table_of_everything():
    for seed in range(10):
        schema = uad(ATTRS, parse_rules(["hospital, gender -> zipcode"]), seed=seed)
        assert len(schema.tables) == 1
        t = schema.tables[0]
        assert set(t.attributes) == set(ATTRS) and t.sensitive == "zipcode" and t.enforces == (0,)


def test_running_example_rules_1_to_3():
    rules = parse_rules(
        ["age, icd9 -> race", "gender, icd9 -> zipcode", "hospital, race -> zipcode"]
    )
    schema = uad(ATTRS, rules, seed=0)
    assert check_gnf(schema, rules).ok
    assert sorted(a for t in schema.tables for a in t.attributes) == sorted(ATTRS)  # disjoint cover
    assert max(len(t.attributes) for t in schema.tables) >= 4


@given(rule_sets(), st.integers(0, 100), st.booleans())
@settings(max_examples=200, deadline=None)
def test_uad_is_gnf_disjoint_and_deterministic(case, seed, plain):
    attrs, rules = case
    schema = uad(attrs, rules, seed=seed, plain=plain)  # raises if not GNF
    assert check_gnf(schema, rules).ok
    assert sorted(a for t in schema.tables for a in t.attributes) == sorted(attrs)
    assert schema == uad(attrs, rules, seed=seed, plain=plain)
    assert check_gnf(single_attribute(attrs, rules), rules).ok


@st.composite
def eligible_chunks(draw):
    l = draw(st.integers(2, 6))
    d = draw(st.integers(l, 12))
    n = draw(st.integers(l, 300))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    s = rng.integers(0, d, n)
    # make the chunk l-eligible by capping each value at floor(n/l)
    cap = n // l
    keep = pd.Series(s).groupby(s).cumcount().to_numpy() < cap
    s = s[keep]
    if len(s) < l or pd.Series(s).value_counts().max() * l > len(s):
        s = np.arange(l * 3) % l
    chunk = pd.DataFrame({"s": s, "a": rng.integers(0, 5, len(s)), "b": rng.integers(0, 3, len(s))})
    return chunk, l


@given(eligible_chunks(), st.integers(0, 1000))
@settings(max_examples=200, deadline=None)
def test_anatomy_groups_are_l_diverse_and_lossless(case, seed):
    chunk, l = case
    qit, st_ = anatomize(chunk, "s", l, seed, first_group=7)
    assert (max_share(st_, "s") <= 1.0 / l + 1e-12).all()
    sizes = qit.groupby(GROUP).size()
    assert (sizes >= l).all() and sizes.index.min() == 7
    assert sizes.equals(st_.groupby(GROUP)[COUNT].sum().rename(None).astype(sizes.dtype))
    # nothing lost, nothing invented
    assert sorted(map(tuple, qit[["a", "b"]].to_numpy())) == sorted(
        map(tuple, chunk[["a", "b"]].to_numpy())
    )
    assert st_.groupby("s")[COUNT].sum().to_dict() == chunk["s"].value_counts().to_dict()
    # the same content in another row order gives the same release
    shuffled = chunk.sample(frac=1.0, random_state=1)
    q2, s2 = anatomize(shuffled, "s", l, seed, first_group=7)
    assert q2.equals(qit) and s2.equals(st_)


def test_anatomy_rejects_ineligible_chunk():
    with pytest.raises(PrivacyError, match="not 2-eligible"):
        anatomize(pd.DataFrame({"s": [1, 1, 1, 2], "a": [0, 1, 2, 3]}), "s", 2, 0)
