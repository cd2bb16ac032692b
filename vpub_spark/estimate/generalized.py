"""COUNT estimates from generalized tables (docs/explanation/algorithms.md), in code space.

A query is {attribute: (lo, hi)} ranges on QI attributes (inclusive codes) plus a set
of sensitive codes. frac(I, R) = |I ∩ R| / |I| counts domain points, both ends
included; several attributes multiply.
- Zhang et al. (ICDE 2007), one generalized table of QI-groups: est = sum_G
  n_G(sensitive in V) * prod_A frac(box_G(A), R_A) — tuples uniform inside their box,
  independent of the sensitive value.
  `GeneralizedModel` reads a published marginal this way, with value sets.
- ANGEL (Tao et al. TKDE 2009; the algorithm is kernels/angel.py): GT rows (box, batch, cnt) and BT (batch, v, c_b(v)):
  est = sum_rows cnt * prod_A frac(box(A), R_A) * sum_{v in V} c_b(v) / |b|.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ..errors import DataError
from ..kernels.angel import Ranges, box_fraction
from .codes import Part, Query, to_codes
from .columns import COUNT, COUNTERFEITS, GROUP, SIZE


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


@dataclass(frozen=True)
class GeneralizedModel:
    """A generalized marginal of the m-invariant publisher (002) in code space:
    `groups` (group_id, `<A>_min`, `<A>_max` codes, size) and `st` (group_id, S code,
    count), read with Zhang et al.'s estimate: a group's tuples are spread uniformly over
    the domain points of its box, independently of the sensitive value.
    Decisions: a marginal is a `view` (002 §4: a query is answered by the smallest
    marginal holding its attributes, not by combining marginals); `joint` (needed only
    to pass messages between overlapping tables) is refused: a box spreads over every
    cell it covers, which the estimate never enumerates. KL uses `marginal`."""

    name: str
    attributes: tuple[str, ...]
    sensitive: str
    groups: pd.DataFrame
    st: pd.DataFrame
    view = True  # each marginal covers every row on its own attributes

    @property
    def qi(self) -> list[str]:
        return [a for a in self.attributes if a != self.sensitive]

    def rows(self) -> int:
        return int(self.groups[SIZE].sum())

    @cached_property
    def _by_value(self) -> np.ndarray:
        """Count per (group position, sensitive code): groups x |S| (dense, small).
        Decision: a group with counterfeits (a store version's, m-invariance) shows its
        values with them, not which ones are counterfeit; its real tuples are spread
        over its values in proportion, so each count is scaled by size / (size +
        counterfeits) and a group's counts sum to its real size."""
        pos = np.searchsorted(self.groups[GROUP].to_numpy(), self.st[GROUP].to_numpy())
        s = self.st[self.sensitive].to_numpy()
        out = np.zeros((len(self.groups), int(s.max(initial=0)) + 1))
        np.add.at(out, (pos, s), self.st[COUNT].to_numpy())
        if COUNTERFEITS in self.groups:
            size = self.groups[SIZE].to_numpy(dtype=np.float64)
            out *= (size / (size + self.groups[COUNTERFEITS].to_numpy()))[:, None]
        return out

    def _box(self, a: str) -> tuple[np.ndarray, np.ndarray]:
        return self.groups[f"{a}_min"].to_numpy(), self.groups[f"{a}_max"].to_numpy()

    def count(self, query: Query) -> float:
        """sum_G n_G(S in V) * prod_A |box_G(A) ∩ V_A| / |box_G(A)| (domain points)."""
        frac = np.ones(len(self.groups))
        for a in self.qi:
            if a in query:
                lo, hi = self._box(a)
                inside = np.zeros(max(int(hi.max(initial=0)), max(query[a], default=0)) + 2)
                inside[[v + 1 for v in query[a]]] = 1.0
                cum = np.cumsum(inside)
                frac *= (cum[hi + 1] - cum[lo]) / (hi - lo + 1)
        if self.sensitive in query:
            values = [v for v in query[self.sensitive] if v < self._by_value.shape[1]]
            n = self._by_value[:, values].sum(axis=1)
        else:
            n = self.groups[SIZE].to_numpy()
        return float((n * frac).sum())

    def marginal(self, keys: pd.DataFrame, cells: int = 4_000_000) -> np.ndarray:
        """At each row of `keys`: sum_G n_G(x_S) * prod_A [x_A in box_G(A)] / |box_G(A)|,
        computed for the distinct rows in blocks of at most `cells` (row, group) pairs."""
        cols = list(keys.columns)
        if not cols:
            return np.full(len(keys), float(self.rows()))
        distinct, back = np.unique(keys.to_numpy(), axis=0, return_inverse=True)
        out = np.zeros(len(distinct))
        step = max(1, cells // max(len(self.groups), 1))
        for start in range(0, len(distinct), step):
            x = distinct[start : start + step]
            w = np.ones((len(x), len(self.groups)))
            for i, a in enumerate(cols):
                if a == self.sensitive:
                    s = np.clip(x[:, i], 0, self._by_value.shape[1] - 1)
                    w *= self._by_value[:, s].T * (x[:, i] < self._by_value.shape[1])[:, None]
                else:
                    lo, hi = self._box(a)
                    xa = x[:, i][:, None]
                    w *= ((lo <= xa) & (xa <= hi)) / (hi - lo + 1)
            if self.sensitive not in cols:
                w *= self.groups[SIZE].to_numpy()[None, :]
            out[start : start + step] = w.sum(axis=1)
        return out[back.reshape(-1)]

    @property
    def joint(self) -> pd.DataFrame:
        raise DataError(
            f"{self.name}: a generalized marginal has no finite joint table to pass messages"
            " with; ask a query on one marginal's attributes"
        )

    @classmethod
    def from_parts(cls, entry: dict, parts: Mapping[str, Part], domains) -> GeneralizedModel:
        qi = [a for a in entry["attributes"] if a != entry["sensitive"]]
        ends = {f"{a}_{e}": domains[a] for a in qi for e in ("min", "max")}
        groups = to_codes(parts["groups"], ends).sort_values(GROUP).reset_index(drop=True)
        st = to_codes(parts["st"], domains)
        return cls(entry["name"], tuple(entry["attributes"]), entry["sensitive"], groups, st)
