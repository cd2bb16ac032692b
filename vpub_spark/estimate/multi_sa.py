"""Estimates from a multi-SA table (000 Appendix B) in code space.

Within a group, QI values and the combination of sensitive values are independent
(the bucketization's estimate): est(x_Q, x_S) = sum_g n_g(x_Q) * c_g(x_S) / |g|.
Decision for suppressed groups (sensitive values not published): every sensitive
attribute is uniform over its domain and independent of the others, the
maximum-entropy reading of "unknown", so a suppressed group contributes
n_g(x_Q) * prod_{A in S} 1 / |dom A|.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ..kernels.arrays import dense_ids
from .codes import EST, Part, Query, mask, to_codes
from .columns import COUNT, GROUP


@dataclass(frozen=True)
class MultiSaModel:
    """`qit`: group_id + QI codes; `st`: group_id + SA codes (-1 where suppressed) + count."""

    name: str
    attributes: tuple[str, ...]
    sensitive_set: tuple[str, ...]
    qit: pd.DataFrame
    st: pd.DataFrame
    domain_sizes: Mapping[str, int]
    view = False

    @property
    def qi(self) -> list[str]:
        return [a for a in self.attributes if a not in self.sensitive_set]

    @cached_property
    def _parts(self) -> tuple[pd.DataFrame, np.ndarray]:
        """(published ST rows with `w` = c_g(s)/|g|, the suppressed group ids)."""
        sa = list(self.sensitive_set)
        hidden = (self.st[sa] < 0).all(axis=1).to_numpy()
        size = self.st.groupby(GROUP)[COUNT].sum().rename("size")
        shown = self.st.loc[~hidden].join(size, on=GROUP)
        return shown.assign(w=shown[COUNT] / shown["size"])[[GROUP, *sa, "w"]], self.st.loc[
            hidden, GROUP
        ].unique()

    def rows(self) -> int:
        return len(self.qit)

    def marginal(self, keys: pd.DataFrame) -> np.ndarray:
        """Estimated count of each row of `keys` (codes of some of the attributes)."""
        cols = list(keys.columns)
        q = [c for c in cols if c not in self.sensitive_set]
        s = [c for c in cols if c in self.sensitive_set]
        share, hidden = self._parts
        per_q = self.qit.groupby([GROUP, *q], sort=False).size().rename("n").reset_index()
        if not s:
            est = per_q.groupby(q, sort=False)["n"].sum().rename(EST).reset_index() if q else None
            return (
                np.full(len(keys), float(self.rows()))
                if est is None
                else keys.merge(est, on=q, how="left")[EST].fillna(0.0).to_numpy(float)
            )
        w = share.groupby([GROUP, *s], sort=False)["w"].sum().reset_index()
        needed = keys.drop_duplicates()
        joined = needed.merge(per_q, on=q, how="inner") if q else needed.merge(per_q, how="cross")
        joined = joined.merge(w, on=[GROUP, *s], how="inner")
        est = (
            (joined["n"] * joined["w"])
            .groupby([joined[c] for c in cols], sort=False)
            .sum()
            .rename(EST)
            .reset_index()
        )
        out = keys.merge(est, on=cols, how="left")[EST].fillna(0.0).to_numpy(float)
        if len(hidden):
            sup = per_q[per_q[GROUP].isin(hidden)]
            n_q = sup.groupby(q, sort=False)["n"].sum().rename(EST).reset_index() if q else None
            base = (
                np.full(len(keys), float(sup["n"].sum()))
                if n_q is None
                else keys.merge(n_q, on=q, how="left")[EST].fillna(0.0).to_numpy(float)
            )
            out = out + base / float(np.prod([self.domain_sizes[a] for a in s]))
        return out

    def count(self, query: Query) -> float:
        """COUNT(*) of `query`'s conditions on this table's attributes."""
        in_q = mask(self.qit, {a: v for a, v in query.items() if a in self.qi})
        s_query = {a: v for a, v in query.items() if a in self.sensitive_set}
        if not s_query:
            return float(in_q.sum())
        ids, gidx = dense_ids(self.qit[GROUP].to_numpy())
        n_g = np.bincount(gidx[in_q], minlength=len(ids))
        share, hidden = self._parts
        in_s = mask(share, s_query)
        c_g = np.bincount(
            np.searchsorted(ids, share[GROUP].to_numpy()[in_s]),
            weights=share["w"].to_numpy()[in_s],
            minlength=len(ids),
        )
        frac = float(np.prod([len(v) / self.domain_sizes[a] for a, v in s_query.items()]))
        is_hidden = np.isin(ids, hidden)
        return float(np.sum(n_g * c_g) + frac * n_g[is_hidden].sum())

    @cached_property
    def joint(self) -> pd.DataFrame:
        """Every QI combination of a group with every published sensitive combination of
        it; a suppressed group's with every combination of the domains (uniform)."""
        sa, cols = list(self.sensitive_set), list(self.attributes)
        share, hidden = self._parts
        per_q = self.qit.groupby([GROUP, *self.qi], sort=False).size().rename("n").reset_index()
        grid = np.indices([self.domain_sizes[a] for a in sa]).reshape(len(sa), -1)
        uniform = pd.DataFrame({a: grid[i].astype(np.int32) for i, a in enumerate(sa)})
        uniform = uniform.assign(w=1.0 / len(uniform))
        j = pd.concat(
            [
                per_q.merge(share, on=GROUP),
                per_q[per_q[GROUP].isin(hidden)].merge(uniform, how="cross"),
            ],
            ignore_index=True,
        )
        return (
            (j["n"] * j["w"])
            .groupby([j[c] for c in cols], sort=False)
            .sum()
            .rename(EST)
            .reset_index()
        )

    @classmethod
    def from_parts(cls, entry: dict, parts: Mapping[str, Part], domains) -> MultiSaModel:
        sizes = {a: len(domains[a]) for a in entry["sensitive"]}
        qit, st = to_codes(parts["qit"], domains), to_codes(parts["st"], domains)
        return cls(
            entry["name"], tuple(entry["attributes"]), tuple(entry["sensitive"]), qit, st, sizes
        )


def multi_sa_model(
    qit: pd.DataFrame,
    st: pd.DataFrame,
    attributes: Sequence[str],
    sensitive: Sequence[str],
    domain_sizes,
    name: str = "multi_sa",
) -> MultiSaModel:
    """The model of a chunk result or a release's parts (SA nulls become code -1)."""
    st = st.copy()
    for a in sensitive:
        st[a] = (
            pd.to_numeric(st[a]).fillna(-1).astype(np.int32)
            if st[a].isna().any()
            else st[a].astype(np.int32)
        )
    return MultiSaModel(name, tuple(attributes), tuple(sensitive), qit, st, dict(domain_sizes))
