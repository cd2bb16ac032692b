"""Anatomy (Xiao & Tao, VLDB 2006; docs/explanation/algorithms.md), vectorized, on one
encoded chunk.

Decision: instead of the loop "take one tuple from each of the l largest S-buckets",
which costs a Python iteration per group, we use its closed form. Sort the tuples by
S value (values by decreasing frequency, ties by code; tuples within a value in a
seeded random order) and deal them round-robin into g = floor(n/l) groups: tuple at
position i joins group i mod g. A value's tuples are consecutive and, the chunk being
l-eligible, number at most n/l, hence at most g, so they land in distinct groups.
Every group therefore holds >= l tuples with pairwise distinct S values — the same
guarantee (Pr[t[S] | QI, release] = 1/|group| <= 1/l) in O(n log n) with no loop.

Rows are first put in a canonical order (by all codes), so the groups depend only on
the chunk's content and the seed, never on the order rows arrived in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import PrivacyError

GROUP = "group_id"
COUNT = "count"


def anatomize(
    chunk: pd.DataFrame,
    sensitive: str,
    l: int,
    seed: int,
    qi: Sequence[str] | None = None,
    first_group: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(QIT, ST) of one chunk: QIT has `group_id` and the QI codes (one row per tuple,
    sorted by group then values, so row order reveals nothing); ST has `group_id`, the
    sensitive code and `count`. Group ids start at `first_group`."""
    qi = [c for c in (qi if qi is not None else chunk.columns) if c != sensitive]
    n = len(chunk)
    if n == 0:
        return pd.DataFrame(columns=[GROUP, *qi]), pd.DataFrame(columns=[GROUP, sensitive, COUNT])
    s = chunk[sensitive].to_numpy()
    values, counts = np.unique(s, return_counts=True)
    if counts.max() * l > n:
        top = values[np.argmax(counts)]
        raise PrivacyError(
            f"chunk of {n} rows is not {l}-eligible: {sensitive} = {top} covers {counts.max() / n:.1%}"
        )
    canon = chunk.sort_values([sensitive, *qi], kind="stable").reset_index(drop=True)
    rng = np.random.default_rng(seed)
    codes = canon[sensitive].to_numpy()
    freq = np.zeros(int(values.max()) + 1, dtype=np.int64)
    freq[values] = counts
    order = np.lexsort((rng.random(n), codes, -freq[codes]))
    dealt = canon.iloc[order].reset_index(drop=True)
    groups = n // l
    gid = np.arange(n) % groups + first_group
    qit = dealt[qi].assign(**{GROUP: gid})[[GROUP, *qi]]
    qit = qit.sort_values([GROUP, *qi], kind="stable").reset_index(drop=True)
    st = (
        pd.DataFrame({GROUP: gid, sensitive: dealt[sensitive].to_numpy()})
        .groupby([GROUP, sensitive], sort=True)
        .size()
        .rename(COUNT)
        .reset_index()
    )
    return qit, st


def max_share(st: pd.DataFrame, sensitive: str) -> pd.Series:
    """Per group, the largest share of one sensitive value (l-diversity holds iff <= 1/l)."""
    per = st.groupby([GROUP, sensitive])[COUNT].sum()
    size = per.groupby(level=0).sum()
    return per.groupby(level=0).max() / size
