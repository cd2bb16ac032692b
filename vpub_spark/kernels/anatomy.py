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
from .arrays import lex_order, packed, stable_order

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
    freq = np.bincount(s)
    if freq.max() * l > n:
        raise PrivacyError(
            f"chunk of {n} rows is not {l}-eligible: {sensitive} = {int(np.argmax(freq))} covers {freq.max() / n:.1%}"
        )
    return grouped_tables(
        chunk, sensitive, qi, anatomy_groups(chunk, sensitive, l, seed, qi), first_group
    )


def anatomy_groups(
    chunk: pd.DataFrame, sensitive: str, l: int, seed: int, qi: Sequence[str]
) -> np.ndarray:
    """The group (0..n//l - 1) of each row of an l-eligible chunk: the module's dealing,
    on the canonical order by the sensitive code, then the `qi` codes."""
    s = chunk[sensitive].to_numpy()
    keys = _qi_keys([chunk[c].to_numpy() for c in qi])
    canon = lex_order([s, *keys])
    dealt = canon[_deal(s[canon], np.bincount(s), np.random.default_rng(seed))]
    group = np.empty(len(s), dtype=np.int64)
    group[dealt] = np.arange(len(s)) % (len(s) // l)  # the i-th dealt tuple's group
    return group


def grouped_tables(
    chunk: pd.DataFrame,
    sensitive: str,
    qi: Sequence[str],
    group: np.ndarray,
    first_group: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(QIT, ST) of a chunk whose rows are grouped by `group` (`anatomy_groups`, or one
    grouping shared by several tables, kernels/shared_grouping.py).

    Args:
        chunk: the encoded rows.
        sensitive: the ST's attribute.
        qi: the QIT's attributes.
        group: each row's group, from 0.
        first_group: the offset of the published group ids.

    Returns:
        QIT (`group_id` and the QI codes, sorted by group then codes, so row order reveals
        nothing) and ST (`group_id`, the sensitive code, `count`).
    """
    cols = [chunk[c].to_numpy() for c in qi]
    rows = lex_order([group, *_qi_keys(cols)])
    qit = pd.DataFrame(
        {GROUP: group[rows] + first_group, **{a: c[rows] for a, c in zip(qi, cols, strict=True)}}
    )
    values = chunk[sensitive].to_numpy()
    cells = lex_order([group, values])
    g, v = group[cells], values[cells]
    starts = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (v[1:] != v[:-1])])
    st = pd.DataFrame(
        {
            GROUP: g[starts] + first_group,
            sensitive: v[starts],
            COUNT: np.diff(np.r_[starts, len(values)]).astype(np.int64),
        }
    )
    return qit, st


def _qi_keys(cols: list[np.ndarray]) -> list[np.ndarray]:
    """The QI codes as one packed column where their ranges fit in an int64 (one gather
    per reordering instead of one per attribute), else the columns themselves."""
    key = packed(cols) if cols else None
    return [key[0]] if key is not None else cols


def _deal(codes: np.ndarray, freq: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The dealing order of sorted `codes`: values by decreasing frequency (ties by code),
    a value's tuples in a seeded random order. A random permutation, then a stable radix
    sort by each value's rank: linear, where sorting random floats cost n log n."""
    values = np.flatnonzero(freq)
    rank = np.zeros(len(freq), dtype=np.int64)
    rank[values[np.lexsort((values, -freq[values]))]] = np.arange(len(values))
    shuffled = rng.permutation(len(codes))
    return shuffled[stable_order(rank[codes[shuffled]])]


def max_share(st: pd.DataFrame, sensitive: str) -> pd.Series:
    """Per group, the largest share of one sensitive value (l-diversity holds iff <= 1/l)."""
    per = st.groupby([GROUP, sensitive])[COUNT].sum()
    size = per.groupby(level=0).sum()
    return per.groupby(level=0).max() / size
