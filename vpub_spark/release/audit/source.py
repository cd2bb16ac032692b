"""The audit's comparison of a table with its source (`vpub audit --source`), per table
kind (docs/explanation/auditor.md): `<kind>_source(counts, table, check)` gives the
(columns, published value counts) pairs that must equal the source's, plus any check of
its own; `release/kinds.py` puts them in the registry. pyarrow and pandas on the
published files and the source's counts only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from ...model import PublishedTable
from ..layout import COUNT, COUNTERFEITS, GROUP
from ..reader import ReleaseReader
from .checks import Checker


@dataclass(frozen=True)
class SourceCounts:
    """Value counts for the source comparison: `source(cols)` of the source rows,
    `release(table, part, cols, weight)` of a published part (weighted by `count`)."""

    rel: ReleaseReader
    source: Callable[[list[str]], pd.DataFrame]

    def release(
        self,
        table: str,
        part: str,
        cols: list[str],
        weight: str | None = None,
        drop_null: bool = False,
    ) -> pd.DataFrame:
        data = self.rel.read(table, part, [*cols, weight] if weight else cols)
        if drop_null:
            data = data.drop_null()
        spec: list = [(weight, "sum")] if weight else [([], "count_all")]
        agg = data.group_by(cols).aggregate(spec)
        return labels(agg.rename_columns([*cols, COUNT]).to_pandas())


Pairs = list[tuple[list[str], pd.DataFrame]]


def projection_source(counts: SourceCounts, t: PublishedTable, check: Checker) -> Pairs:
    return [(list(t.attributes), counts.release(t.name, "counts", list(t.attributes), COUNT))]


def anatomy_source(counts: SourceCounts, t: PublishedTable, check: Checker) -> Pairs:
    qi = [a for a in t.attributes if a != t.sensitive]
    s = [str(t.sensitive)]
    return [(qi, counts.release(t.name, "qit", qi)), (s, counts.release(t.name, "st", s, COUNT))]


def generalized_source(counts: SourceCounts, t: PublishedTable, check: Checker) -> Pairs:
    """Boxes hide QI values: the sensitive multiset must be the source's, and the source
    tuples must fit the boxes (`placement_check`). A marginal from a store version shows
    its counterfeits among the values (which ones is hidden): each value at least as
    often as the source has it, the surplus the groups' `counterfeits`."""
    s = [str(t.sensitive)]
    placement_check(counts, t, check)
    published = counts.release(t.name, "st", s, COUNT)
    groups = counts.rel.read(t.name, "groups")
    if COUNTERFEITS not in groups.column_names:
        return [(s, published)]
    merged = published.merge(counts.source(s), on=s, how="outer", suffixes=("", "_source"))
    merged = merged.fillna(0)
    fake = int(pc.sum(groups[COUNTERFEITS]).as_py() or 0)
    surplus = merged[COUNT] - merged[f"{COUNT}_source"]
    ok = bool((surplus >= 0).all()) and int(surplus.sum()) == fake
    check(
        f"{t.name}: sensitive values: the source's plus {fake} counterfeits",
        ok,
        "every value at least as often as in the source, the surplus the counterfeits"
        if ok
        else "the published values are not the source's plus the counterfeits",
    )
    return []


def multi_sa_source(counts: SourceCounts, t: PublishedTable, check: Checker) -> Pairs:
    """The QI multiset is the source's; no sensitive combination is published more often
    than the source has it (suppressed groups publish none)."""
    sa = list(t.sensitive_set)
    qi = [a for a in t.attributes if a not in sa]
    published = counts.release(t.name, "st", sa, COUNT, drop_null=True)
    merged = published.merge(counts.source(sa), on=sa, how="left", suffixes=("", "_source")).fillna(
        0
    )
    invented = merged[merged[COUNT] > merged[f"{COUNT}_source"]]
    check(
        f"{t.name}: ({', '.join(sa)}) within the source",
        invented.empty,
        "every published combination occurs as often in the source"
        if invented.empty
        else f"{len(invented)} combinations published more often than the source has them",
    )
    return [(qi, counts.release(t.name, "qit", qi))] if qi else []


def labels(frame: pd.DataFrame) -> pd.DataFrame:
    """A value-count frame in a canonical form: string labels, sorted rows."""
    cols = [c for c in frame.columns if c != COUNT]
    out = frame.astype({c: str for c in cols}).astype({COUNT: np.int64})
    return out.sort_values(cols, kind="stable").reset_index(drop=True)


def difference(published: pd.DataFrame, expected: pd.DataFrame) -> str:
    cols = [c for c in expected.columns if c != COUNT]
    merged = published.merge(
        expected, on=cols, how="outer", suffixes=("_release", "_source")
    ).fillna(0)
    diff = merged[merged[f"{COUNT}_release"] != merged[f"{COUNT}_source"]]
    row = diff.iloc[0] if len(diff) else None
    example = (
        ""
        if row is None
        else f"; e.g. {dict(row[cols])}: release {int(row[f'{COUNT}_release'])}, source {int(row[f'{COUNT}_source'])}"
    )
    return f"{len(diff)} value combinations differ{example}"


def placement_check(counts: SourceCounts, t: PublishedTable, check: Checker) -> None:
    """The source tuples fit the published boxes: for every sensitive value v, the tuples
    with v can be placed one-to-one into groups whose box contains their QI values and
    whose ST count of v holds them (a maximum flow per value: source -> QI combination
    (its count) -> every group whose box contains it -> sink (the group's count of v);
    scipy's Dinic, in C). A box narrowed, moved or swapped after publication fails it."""
    s = str(t.sensitive)
    qi = [a for a in t.attributes if a != s]
    domains = counts.rel.table(t.name).get("domains") or {}
    if not qi or any(a not in domains for a in qi):
        return  # the box checks already report a missing domain
    pos = {a: {v: i for i, v in enumerate(domains[a])} for a in qi}
    tuples = counts.source([*qi, s])
    groups = counts.rel.read(t.name, "groups").to_pandas()
    lo = np.column_stack([groups[f"{a}_min"].astype(str).map(pos[a]).to_numpy(float) for a in qi])
    hi = np.column_stack([groups[f"{a}_max"].astype(str).map(pos[a]).to_numpy(float) for a in qi])
    st = counts.rel.read(t.name, "st").to_pandas()
    st[s] = st[s].astype(str)
    index = {g: i for i, g in enumerate(groups[GROUP])}
    short, worst = 0, ""
    st = st[st[GROUP].isin(index)]  # an ST group without a box: "same groups" reports it
    for value, own in tuples.groupby(s, sort=True):
        held = st[st[s] == value]
        missing = _unplaced(
            own, qi, pos, lo, hi, held[GROUP].map(index).to_numpy(), held[COUNT].to_numpy()
        )
        if missing:
            short, worst = short + missing, worst or f"{missing} tuples with {s} = {value}"
    check(
        f"{t.name}: source tuples fit the boxes",
        short == 0,
        "every tuple placed in a group whose box holds it"
        if short == 0
        else f"{short} tuples fit no box, e.g. {worst}",
    )


def _unplaced(
    own: pd.DataFrame,
    qi: list[str],
    pos,
    lo: np.ndarray,
    hi: np.ndarray,
    rows: np.ndarray,
    held: np.ndarray,
) -> int:
    """How many of the tuples `own` (QI labels + count) no flow places (see placement_check)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    points = np.column_stack([own[a].map(pos[a]).to_numpy(float) for a in qi])
    n = own[COUNT].to_numpy().astype(np.int64)
    total = int(n.sum())
    if np.isnan(points).any() or not len(rows):
        return total
    box_lo, box_hi = lo[rows], hi[rows]
    combo, group = [], []
    for start in range(0, len(points), 512):  # blocks of QI combinations x groups
        p = points[start : start + 512, None, :]
        i, j = np.nonzero(np.all((box_lo[None] <= p) & (p <= box_hi[None]), axis=2))
        combo.append(i + start)
        group.append(j)
    k, g = len(n), len(rows)
    ci, gj = np.concatenate(combo), np.concatenate(group)
    src, dst = 0, k + g + 1  # nodes: source, combinations 1..k, groups k+1..k+g, sink
    tails = np.concatenate([np.zeros(k, np.int64), 1 + ci, k + 1 + np.arange(g)])
    heads = np.concatenate([1 + np.arange(k), k + 1 + gj, np.full(g, dst)])
    caps = np.concatenate([n, np.full(len(ci), total), held.astype(np.int64)])
    graph = csr_matrix((caps.astype(np.int32), (tails, heads)), shape=(dst + 1, dst + 1))
    return total - int(maximum_flow(graph, src, dst, method="dinic").flow_value)
