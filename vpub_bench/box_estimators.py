"""The box estimators the marginals comparison measures (compare_marginals.py): Zhang
et al.'s uniform spread inside a box (`Published`, the release's own estimator), a
tuple at each end of every interval (`EndsPublished`), each attribute's distribution
fitted by Turnbull's EM (`FittedPublished`), and two bounds that read the private
table (`Bound`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from vpub_spark.kernels.anatomy import COUNT
from vpub_spark.kernels.angel import box_fraction


@dataclass(frozen=True)
class Published:
    """One marginal as the estimator sees it: boxes per row of `boxes`, and per row the
    cumulative sensitive counts (`cum[:, v]` = tuples with value < v) times a weight."""

    boxes: pd.DataFrame
    cum: np.ndarray

    def share(self, ranges: dict[str, tuple[int, int]]) -> np.ndarray:
        """Per box, the share of its tuples inside `ranges` (Zhang et al.: uniform)."""
        return box_fraction(self.boxes, ranges)

    def estimate(self, ranges: dict[str, tuple[int, int]], s_range: tuple[int, int]) -> float:
        lo, hi = s_range
        return float((self.share(ranges) * (self.cum[:, hi + 1] - self.cum[:, lo])).sum())


@dataclass(frozen=True)
class EndsPublished(Published):
    """`marginals_ends`: a group of n >= 2 tuples has one at each end of its box's
    interval on every attribute and n - 2 spread uniformly over the interval."""

    def share(self, ranges) -> np.ndarray:
        share = np.ones(len(self.boxes))
        n = self.boxes[COUNT].to_numpy(dtype=np.float64)
        for a, (ql, qh) in ranges.items():
            bmin, bmax = self.boxes[f"{a}_min"].to_numpy(), self.boxes[f"{a}_max"].to_numpy()
            w = bmax - bmin + 1
            cover = np.clip(np.minimum(bmax, qh) - np.maximum(bmin, ql) + 1, 0, None)
            ends = ((bmin >= ql) & (bmin <= qh)).astype(float) + ((bmax >= ql) & (bmax <= qh))
            share *= np.where(
                (w == 1) | (n < 2), cover / w, (ends + (n - 2) * cover / w) / np.maximum(n, 1)
            )
        return share


def turnbull(
    lo: np.ndarray, hi: np.ndarray, weight: np.ndarray, size: int, rounds: int = 200
) -> np.ndarray:
    """The maximum-likelihood distribution over 0..size-1 of values known only to lie in
    [lo, hi] (Turnbull's EM for interval-censored data): f <- f * E[share of each
    interval at x] / n, from the uniform distribution."""
    f = np.full(size, 1.0 / size)
    total = float(weight.sum())
    for _ in range(rounds):
        c = np.concatenate([[0.0], np.cumsum(f)])
        per = weight / np.maximum(c[hi + 1] - c[lo], 1e-300)
        diff = np.bincount(lo, per, size + 1) - np.bincount(hi + 1, per, size + 1)
        f = f * np.cumsum(diff)[:size] / total
    return f


@dataclass(frozen=True)
class FittedPublished(Published):
    """`marginals_ml`: each attribute's fitted distribution (`turnbull`) spread inside a box."""

    cdf: dict = field(default_factory=dict)

    def share(self, ranges) -> np.ndarray:
        share = np.ones(len(self.boxes))
        for a, (ql, qh) in ranges.items():
            c = self.cdf[a]
            bmin, bmax = self.boxes[f"{a}_min"].to_numpy(), self.boxes[f"{a}_max"].to_numpy()
            a0, a1 = np.maximum(bmin, ql), np.minimum(bmax, qh)
            inside = np.where(a1 >= a0, c[np.maximum(a1, a0 - 1) + 1] - c[a0], 0.0)
            share *= inside / np.maximum(c[bmax + 1] - c[bmin], 1e-300)
        return share


@dataclass(frozen=True)
class Bound(Published):
    """`bound_exact_qi` / `bound_group_marginals` (see the module docstring)."""

    codes: pd.DataFrame = field(default_factory=pd.DataFrame)
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    group: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    exact_qi: bool = True

    def estimate(self, ranges, s_range) -> float:
        lo, hi = s_range
        g, size = self.group, np.bincount(self.group).astype(np.float64)
        chosen = np.bincount(g, (self.values >= lo) & (self.values <= hi), len(size))
        inside = [
            (self.codes[a].to_numpy() >= ql) & (self.codes[a].to_numpy() <= qh)
            for a, (ql, qh) in ranges.items()
        ]
        if self.exact_qi:
            share = (
                np.bincount(g, np.logical_and.reduce(inside) if inside else None, len(size)) / size
            )
        else:
            share = (
                np.prod([np.bincount(g, m, len(size)) / size for m in inside], axis=0)
                if inside
                else np.ones(len(size))
            )
        return float((chosen * share).sum())


def fitted(pub: Published, attrs, sizes) -> FittedPublished:
    b, n = pub.boxes, pub.cum[:, -1]
    cdf = {
        a: np.concatenate(
            [
                [0.0],
                np.cumsum(
                    turnbull(b[f"{a}_min"].to_numpy(), b[f"{a}_max"].to_numpy(), n, sizes[a])
                ),
            ]
        )
        for a in attrs
    }
    return FittedPublished(pub.boxes, pub.cum, cdf)


def cumulative(
    keys: np.ndarray, values: np.ndarray, weights: np.ndarray, rows: int, domain: int
) -> np.ndarray:
    mat = np.zeros((rows, domain + 1))
    np.add.at(mat, (keys, values + 1), weights)
    return np.cumsum(mat, axis=1)
