"""Equivalence-class measures of a table: k-anonymity, the l-diversity variants and
t-closeness, per class of rows that share their quasi-identifiers, computed from the
counts of (QI combination, sensitive value). Pure pandas/NumPy, vectorized.

The formulas, their citations and the conventions shared with pyCANON:
docs/explanation/privacy-models.md, "`vpub check`".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

COUNT = "__n"
CLASS = "__class"
MEASURES = ("k", "distinct_l", "entropy_l", "recursive_c", "t")
CELLS = 4_000_000  # ordered EMD: classes x values per dense block


def class_counts(frame: pd.DataFrame, qi: list[str], sensitive: str) -> pd.DataFrame:
    """Rows per (QI combination, sensitive value): the kernel's input."""
    return (
        frame.groupby([*qi, sensitive], sort=False, observed=True)
        .size()
        .rename(COUNT)
        .reset_index()
    )


def _ordered_t(
    cls: np.ndarray, s: np.ndarray, q: np.ndarray, p: np.ndarray, classes: int
) -> np.ndarray:
    """Ordered EMD per class, in dense blocks of classes x len(p) (`CELLS`)."""
    m = len(p)
    out = np.zeros(classes)
    if m < 2:
        return out
    cum_p = np.cumsum(p)
    step = max(1, CELLS // m)
    order = np.argsort(cls, kind="stable")
    cls, s, q = cls[order], s[order], q[order]
    bounds = np.searchsorted(cls, np.arange(0, classes + step, step))
    for b, lo in enumerate(range(0, classes, step)):
        hi = min(classes, lo + step)
        dense = np.zeros((hi - lo, m))
        i, j = bounds[b], bounds[b + 1]
        np.add.at(dense, (cls[i:j] - lo, s[i:j]), q[i:j])
        out[lo:hi] = np.abs(np.cumsum(dense, axis=1) - cum_p).sum(axis=1) / (m - 1)
    return out


def _rank_in_class(cls: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Each row's rank within its class by count, largest first (0-based)."""
    order = np.lexsort((-n, cls))
    starts = np.r_[0, np.flatnonzero(np.diff(cls[order])) + 1]
    rank = np.empty(len(n), dtype=np.int64)
    rank[order] = np.arange(len(n)) - np.repeat(starts, np.diff(np.r_[starts, len(n)]))
    return rank


def class_measures(
    counts: pd.DataFrame, qi: list[str], sensitive: str, p: pd.Series, l: int, ordered: bool
) -> pd.DataFrame:
    """Per class: its QI values and measures (docs/explanation/privacy-models.md). `counts` holds
    every row of a class (a whole class per call); `p` is the whole table's sensitive
    distribution, indexed by value (in order, when `ordered`)."""
    if counts.empty:
        return pd.DataFrame(columns=[*qi, *MEASURES])
    cls = counts.groupby(qi, sort=False, observed=True).ngroup().to_numpy()
    n, classes = counts[COUNT].to_numpy(np.int64), int(cls.max()) + 1
    size = np.bincount(cls, weights=n, minlength=classes)
    share = n / size[cls]
    entropy = -np.bincount(cls, weights=share * np.log(share), minlength=classes)
    ranked = _rank_in_class(cls, n)
    top = np.bincount(cls, weights=np.where(ranked == 0, n, 0), minlength=classes)
    head = np.bincount(cls, weights=np.where(ranked < l - 1, n, 0), minlength=classes)
    tail = size - head
    with np.errstate(divide="ignore"):
        recursive = np.where(tail > 0, top / np.where(tail > 0, tail, 1), np.inf)
    codes = pd.Index(p.index).get_indexer(counts[sensitive])
    pv = p.to_numpy(float)
    if ordered:
        t = _ordered_t(cls, codes, share, pv, classes)
    else:
        present = np.bincount(cls, weights=np.abs(share - pv[codes]), minlength=classes)
        covered = np.bincount(cls, weights=pv[codes], minlength=classes)
        t = 0.5 * (present + 1.0 - covered)
    first = counts.groupby(qi, sort=False, observed=True).head(1)[qi].reset_index(drop=True)
    return first.assign(
        k=size.astype(np.int64),
        distinct_l=np.bincount(cls, minlength=classes),
        entropy_l=np.exp(entropy),
        recursive_c=recursive,
        t=t,
    )


def distribution(totals: pd.Series) -> pd.Series:
    """The whole table's sensitive distribution over the values it holds, by code."""
    totals = totals[totals > 0].sort_index().astype(float)
    return totals / totals.sum()


@dataclass(frozen=True)
class ClassJob:
    """What `Engine.class_summary` measures: the classes of `qi` with their `sensitive`
    distributions, counted by `weigh` (a frame of codes -> (QI, sensitive, COUNT) in
    1/`unit` of a row) or one per row; `failing` names each model's failing classes
    (it works on pandas and Spark columns alike); the `worst` smallest classes kept;
    `levels` says per measure whether a table's level is its least (`min`) or its
    largest (`max`) class measure (`privacy.worst_of`)."""

    qi: list[str]
    sensitive: str
    weigh: Callable[[pd.DataFrame], pd.DataFrame] | None
    unit: int
    l: int
    ordered: bool
    failing: Callable[[Any], dict[str, Any]]
    worst: int
    levels: Mapping[str, str]


@dataclass(frozen=True)
class ClassSummary:
    """The table's level of every measure (`levels`: its worst class's, as
    `ClassJob.levels` reads it), per model its failing classes and their rows, the
    number of classes, the smallest classes and the (weighted) row total."""

    levels: dict[str, float]
    fails: dict[str, tuple[int, float]]
    classes: int
    smallest: pd.DataFrame
    total: float


def summarize(m: pd.DataFrame, job: ClassJob, total: float) -> ClassSummary:
    """A summary of the measured classes `m` (the in-process side of `ClassSummary`)."""
    levels = {c: float(m[c].min() if job.levels[c] == "min" else m[c].max()) for c in MEASURES}
    fails = {
        name: (int(bad.sum()), float(m.loc[bad, "k"].sum())) for name, bad in job.failing(m).items()
    }
    smallest = m.nsmallest(job.worst, ["k", "distinct_l"])
    return ClassSummary(levels, fails, len(m), smallest, total)
