"""The auditor's signature multisets of m-invariant marginals (release/audit/invariance.py),
against a plain recount: each group's labels sorted and joined, counted per marginal."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.release.audit.invariance import _same, signature_counts

LABELS = [f"v{i:02d}" for i in range(60)]  # 62 ranks: 10 to a word, so rows of 2+ words


def _st(groups: list[list[str]], offset: int = 0) -> pa.Table:
    ids = [g + offset for g, values in enumerate(groups) for _ in values]
    values = [v for values in groups for v in values]
    return pa.table({"group_id": pa.array(ids, pa.int64()), "s": pa.array(values)})


def _recount(groups: list[list[str]]) -> Counter:
    return Counter("\x1f".join(sorted(g)) for g in groups)


signatures = st.lists(
    st.lists(st.sampled_from(LABELS), min_size=1, max_size=25, unique=True), max_size=40
)


@settings(max_examples=200, deadline=None)
@given(a=signatures, b=signatures, data=st.data())
def test_equal_multisets_and_only_they_compare_equal(a, b, data):
    rank = {v: i for i, v in enumerate(LABELS)}
    shuffled = data.draw(st.permutations(a))  # other group ids, other row order
    rows_a = signature_counts(_st(a), "s", rank)
    assert _same(rows_a, signature_counts(_st([list(reversed(g)) for g in shuffled], 7), "s", rank))
    assert _same(rows_a, signature_counts(_st(b), "s", rank)) == (_recount(a) == _recount(b))
    assert len(rows_a[0]) == len(_recount(a)) and sorted(rows_a[1]) == sorted(_recount(a).values())
