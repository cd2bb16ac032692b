"""ANGEL (Tao et al., TKDE 2009; the baseline of 002; docs/explanation/algorithms.md) and the boxes
of generalized tables, on encoded codes.

ANGEL publishes a generalized table GT of QI boxes with a batch id per row and a batch
table BT of sensitive counts per batch, the batches being l-diverse (here m-diverse
Mondrian on every QI attribute, one BT for every marginal) and the groups strict
Mondrian with k = m on each marginal's attributes (002's setup).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .anatomy import COUNT, GROUP
from .mondrian import mondrian

Ranges = Mapping[str, tuple[int, int]]


def box_fraction(boxes: pd.DataFrame, ranges: Ranges) -> np.ndarray:
    """prod_A frac([A_min, A_max], R_A) per row of `boxes` (columns `<A>_min`, `<A>_max`)."""
    out = np.ones(len(boxes))
    for a, (lo, hi) in ranges.items():
        bmin, bmax = boxes[f"{a}_min"].to_numpy(), boxes[f"{a}_max"].to_numpy()
        inside = np.minimum(bmax, hi) - np.maximum(bmin, lo) + 1
        out *= np.clip(inside, 0, None) / (bmax - bmin + 1)
    return out


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
    """ANGEL's batch partition: Mondrian m-diverse on every QI attribute;
    one BT serves every marginal."""
    return mondrian(qi, extents, sensitive, l=m)


def angel_tables(
    qi: pd.DataFrame,
    marginal: list[str],
    sensitive: np.ndarray,
    m: int,
    extents: Mapping[str, int],
    batch: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """ANGEL for one marginal: the batches (`angel_batches`, computed
    here unless given); groups = strict Mondrian with k = m on the marginal's attributes
    (002's setup: ANGEL's parameter equals m). GT = (box, batch, count); BT = (batch, value, count)."""
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
