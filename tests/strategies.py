"""Hypothesis strategies shared by the tests."""

from hypothesis import strategies as st

from vpub_spark.model import Rule


@st.composite
def rule_sets(draw, max_attrs: int = 9, max_rules: int = 9):
    """(attributes a0.., random rules over them), rules possibly reducible."""
    attrs = [f"a{i}" for i in range(draw(st.integers(2, max_attrs)))]
    rules = []
    for _ in range(draw(st.integers(1, max_rules))):
        rhs = draw(st.sampled_from(attrs))
        lhs = draw(st.sets(st.sampled_from([a for a in attrs if a != rhs]), min_size=1))
        rules.append(Rule(frozenset(lhs), rhs))
    return attrs, rules
