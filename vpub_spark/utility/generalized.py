"""COUNT estimates from generalized tables (ALGORITHMS.md §1, §2), in code space.

A query is {attribute: (lo, hi)} ranges on QI attributes (inclusive codes) plus a set
of sensitive codes. frac(I, R) = |I ∩ R| / |I| counts domain points, both ends
included; several attributes multiply.
- Zhang et al. (ICDE 2007), one generalized table of QI-groups: est = sum_G
  n_G(sensitive in V) * prod_A frac(box_G(A), R_A) — tuples uniform inside their box,
  independent of the sensitive value.
- ANGEL (Tao et al. TKDE 2009): GT rows (box, batch, cnt) and BT (batch, v, c_b(v)):
  est = sum_rows cnt * prod_A frac(box(A), R_A) * sum_{v in V} c_b(v) / |b|.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..release.reader import COUNT, GROUP

Ranges = Mapping[str, tuple[int, int]]


def box_fraction(boxes: pd.DataFrame, ranges: Ranges) -> np.ndarray:
    """prod_A frac([A_min, A_max], R_A) per row of `boxes` (columns `<A>_min`, `<A>_max`)."""
    out = np.ones(len(boxes))
    for a, (lo, hi) in ranges.items():
        bmin, bmax = boxes[f"{a}_min"].to_numpy(), boxes[f"{a}_max"].to_numpy()
        inside = np.minimum(bmax, hi) - np.maximum(bmin, lo) + 1
        out *= np.clip(inside, 0, None) / (bmax - bmin + 1)
    return out


def generalized_count(
    groups: pd.DataFrame, st: pd.DataFrame, sensitive: str, ranges: Ranges, values: set[int] | None
) -> float:
    """Zhang et al.: `groups` has group_id and the boxes; `st` group_id, sensitive, count."""
    chosen = st if values is None else st[st[sensitive].isin(values)]
    n = chosen.groupby(GROUP)[COUNT].sum()
    g = groups.set_index(GROUP)
    return float((n.reindex(g.index, fill_value=0).to_numpy() * box_fraction(g, ranges)).sum())


def angel_count(
    gt: pd.DataFrame, bt: pd.DataFrame, sensitive: str, ranges: Ranges, values: set[int] | None
) -> float:
    """ANGEL: `gt` has the boxes, `batch`, `count`; `bt` has `batch`, sensitive, `count`."""
    size = bt.groupby("batch")[COUNT].sum()
    chosen = bt if values is None else bt[bt[sensitive].isin(values)]
    share = chosen.groupby("batch")[COUNT].sum().reindex(size.index, fill_value=0) / size
    return float(
        (
            gt[COUNT].to_numpy() * box_fraction(gt, ranges) * share.reindex(gt["batch"]).to_numpy()
        ).sum()
    )


def boxes(
    codes: pd.DataFrame, group: np.ndarray, extra: Mapping[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """Aggregated boxes: one row per (group, extra keys) with `<A>_min`, `<A>_max`, `count`."""
    frame = codes.assign(**{GROUP: group}, **(extra or {}))
    keys = [GROUP, *(extra or {})]
    box = frame.groupby(GROUP)[list(codes.columns)].agg(["min", "max"])
    box.columns = [f"{a}_{f}" for a, f in box.columns]
    counts = frame.groupby(keys).size().rename(COUNT).reset_index()
    return counts.merge(box.reset_index(), on=GROUP)


def angel_batches(
    qi: pd.DataFrame, sensitive: np.ndarray, m: int, extents: Mapping[str, int]
) -> np.ndarray:
    """ANGEL's batch partition (ALGORITHMS.md §1): Mondrian m-diverse on every QI attribute;
    one BT serves every marginal."""
    from ..kernels.mondrian import mondrian

    return mondrian(qi, extents, sensitive, l=m)


def angel_tables(
    qi: pd.DataFrame,
    marginal: list[str],
    sensitive: np.ndarray,
    m: int,
    extents: Mapping[str, int],
    batch: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """ANGEL for one marginal (ALGORITHMS.md §1): the batches (`angel_batches`, computed
    here unless given); groups = strict Mondrian with k = m on the marginal's attributes
    (002's setup: ANGEL's parameter equals m). GT = (box, batch, count); BT = (batch, value, count)."""
    from ..kernels.mondrian import mondrian

    batch = angel_batches(qi, sensitive, m, extents) if batch is None else batch
    group = mondrian(qi[marginal], extents, k=m)
    gt = boxes(qi[marginal], group, {"batch": batch})
    bt = (
        pd.DataFrame({"batch": batch, "s": sensitive})
        .groupby(["batch", "s"])
        .size()
        .rename(COUNT)
        .reset_index()
    )
    return gt, bt
