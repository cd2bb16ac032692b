import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.errors import PrivacyError, SpecError
from vpub_spark.model import Rule
from vpub_spark.rules import (
    check_eligibility,
    implies,
    ineligibility,
    is_irreducible,
    parse_rule,
    parse_rules,
    random_rules,
    reduce_rules,
)

ATTRS = ["hospital", "age", "gender", "zipcode", "race", "icd9"]


def test_parse_string_and_mapping_agree():
    a = parse_rule("hospital, gender -> zipcode", ATTRS)
    b = parse_rule({"lhs": ["gender", "hospital"], "rhs": "zipcode"}, ATTRS)
    assert a == b == Rule(frozenset({"hospital", "gender"}), "zipcode")
    assert str(a) == "gender, hospital -> zipcode"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("hospital, salary -> zipcode", "unknown attribute salary"),
        ("zipcode, gender -> zipcode", "also appears on the LHS"),
        (" -> zipcode", "LHS is empty"),
        ("gender, gender -> zipcode", "appears twice"),
        ("gender -> zipcode, race", "exactly one RHS"),
        ("gender zipcode", "exactly one '->'"),
    ],
)
def test_bad_rules_name_the_rule(text, fragment):
    with pytest.raises(SpecError) as e:
        parse_rules([text], ATTRS)
    assert fragment in str(e.value) and "rule 1" in str(e.value)


def test_reduction_theorem_3_1():
    rules = parse_rules(
        ["age -> race", "age, gender -> race", "age, gender -> race", "age -> zipcode"]
    )
    red = reduce_rules(rules)
    assert red.kept == (rules[1], rules[3])
    assert [(d, by) for d, by in red.dropped] == [(rules[0], rules[1]), (rules[2], rules[1])]


def test_eligibility_names_value_and_share():
    freq = {"gender": (["F", "M"], np.array([70, 30]))}
    with pytest.raises(PrivacyError) as e:
        check_eligibility(parse_rules(["age -> gender"]), freq, 2)
    assert "'F'" in str(e.value) and "70 of 100 rows (70.00%)" in str(e.value)
    assert ineligibility("gender", ["F", "M"], [50, 50], 2) is None


@st.composite
def rule_lists(draw):
    out = []
    for _ in range(draw(st.integers(0, 8))):
        rhs = draw(st.sampled_from(ATTRS))
        lhs = draw(st.sets(st.sampled_from([a for a in ATTRS if a != rhs]), min_size=1))
        out.append(Rule(frozenset(lhs), rhs))
    return out


@given(rule_lists())
@settings(max_examples=200, deadline=None)
def test_reduction_is_irreducible_and_equivalent(rules):
    red = reduce_rules(rules)
    assert is_irreducible(red.kept)
    # every dropped rule is implied by a kept rule (nothing is lost) ...
    for r in rules:
        assert any(implies(k, r) for k in red.kept)
    # ... and the kept rules are a subset of the input, in input order
    it = iter(rules)
    assert all(any(k == r for r in it) for k in red.kept)  # a subsequence of the input
    assert len(red.kept) + len(red.dropped) == len(rules)
    assert reduce_rules(red.kept).kept == red.kept


@given(st.integers(1, 6), st.integers(1, 4), st.integers(0, 10_000))
@settings(max_examples=50, deadline=None)
def test_random_rules_deterministic_and_irreducible(c, lhs, seed):
    eligible = ["zipcode", "race", "icd9"]
    a = random_rules(ATTRS, c, lhs, seed, eligible)
    assert a == random_rules(ATTRS, c, lhs, seed, eligible)
    assert len(a) == c and is_irreducible(a)
    assert all(r.rhs in eligible and len(r.lhs) == lhs for r in a)


def test_random_rules_impossible_request_is_clear():
    with pytest.raises(SpecError, match="lhs = 6"):
        random_rules(ATTRS, 1, 6, 0)
    with pytest.raises(PrivacyError):
        random_rules(ATTRS, 1, 2, 0, eligible_rhs=[])


def test_an_ineligible_share_just_above_the_limit_reads_as_above_it():
    from vpub_spark.rules import ineligibility

    bad = ineligibility("s", ["a", "b"], [1001, 999], 2)
    assert str(bad) == "value 'a' of s covers 1,001 of 2,000 rows (50.05%), more than 1/l = 50.00%"
