"""The audit of `privacy.also`: each criterion the manifest claims (vpub_spark/privacy.py)
judged on every table it applies to, from measures computed here on the published
counts (`GROUP_MEASURES`), apart from the writers' and `vpub check`'s code."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...privacy import CRITERIA
from ..layout import GROUP
from ..reader import ReleaseReader
from .checks import Checker


def criteria_checks(rel: ReleaseReader, m: dict, check: Checker) -> None:
    """`privacy.also`: each criterion (vpub_spark/privacy.py) on every table it applies
    to, its measure computed here from the published counts (`GROUP_MEASURES`), apart
    from the writers' and `vpub check`'s code. A criterion of identities (k) reads a
    generalized table's group sizes or a projection's combination counts and fails on
    exact quasi-identifiers (anatomy); the others read each group's sensitive counts."""
    also, privacy = m["privacy"].get("also") or {}, m["privacy"]
    p = int(privacy.get("l") or privacy.get("m") or 2)
    also = _claims(also, check)
    if not also:
        return
    numeric = {
        a["name"] for a in m["source"]["table_spec"]["attributes"] if a.get("kind") == "numeric"
    }
    for entry in m["tables"]:
        name, kind = entry["name"], entry.get("kind")
        has_st = "st" in entry.get("parts", {}) and kind != "multi_sa"
        st = (
            rel.read(name, "st", [GROUP, entry["sensitive"], "count"]).to_pandas()
            if has_st
            else None
        )
        for key, value in also.items():
            found = CRITERIA[key]
            if not found.sensitive and kind in ("anatomy", "multi_sa"):
                check(
                    f"{name}: {found.title}",
                    False,
                    "exact quasi-identifiers (anatomy) protect no identity",
                )
            elif not found.sensitive and kind == "projection":
                counts = rel.read(name, "counts", ["count"]).column("count")
                _judge(check, name, found, value, pd.Series(counts.to_numpy()), "combination")
            elif st is not None and (found.sensitive or kind == "generalized"):
                ordered = entry["sensitive"] in numeric
                level = GROUP_MEASURES[found.column](st, entry["sensitive"], ordered, p)
                _judge(check, name, found, value, level, "group")


def _claims(also: object, check: Checker) -> dict:
    """The manifest's `privacy.also` that can be judged: a failed check for anything
    else (not a mapping, an unknown criterion, a threshold it does not accept)."""
    if not isinstance(also, dict):
        check("privacy.also", False, f"the manifest's privacy.also is not a mapping: {also!r}")
        return {}
    out = {}
    for key, value in also.items():
        found = CRITERIA.get(key) if isinstance(key, str) else None
        problem = "an unknown model" if found is None else found.problem(value)
        if problem:
            check(f"privacy.also.{key}", False, f"the manifest claims {value!r}: {problem}")
        else:
            out[key] = value
    return out


def _judge(check: Checker, name: str, found, value: float, per_group: pd.Series, unit: str):
    """One criterion's check from its measure per group (or per combination)."""
    level = float(per_group.min() if found.worst == "min" else per_group.max())
    worst = "least" if found.worst == "min" else "largest"
    check(
        f"{name}: {found.title}",
        bool(found.meets(level, value)),
        f"{worst} {found.column} per {unit} {level:.4f}; claimed {found.label(value)}",
    )


def _sizes(st: pd.DataFrame, s: str, ordered: bool, p: int) -> pd.Series:
    return st.groupby(GROUP)["count"].sum()


def _distinct(st: pd.DataFrame, s: str, ordered: bool, p: int) -> pd.Series:
    return st[st["count"] > 0].groupby(GROUP)[s].nunique()


def _entropy(st: pd.DataFrame, s: str, ordered: bool, p: int) -> pd.Series:
    share = st["count"] / st.groupby(GROUP)["count"].transform("sum")
    return np.exp((-share * np.log(share)).groupby(st[GROUP]).sum())


def _recursive(st: pd.DataFrame, s: str, ordered: bool, p: int) -> pd.Series:
    """r_1 / (r_p + ... + r_m) per group, p the release's l (or m); inf without r_p."""
    ranked = st.assign(r=st.groupby(GROUP)["count"].rank(method="first", ascending=False))
    top = ranked[ranked["r"] == 1].set_index(GROUP)["count"]
    tail = ranked[ranked["r"] >= p].groupby(GROUP)["count"].sum().reindex(top.index, fill_value=0)
    return (top / tail.where(tail > 0, np.nan)).fillna(np.inf)


def _emd(st: pd.DataFrame, s: str, ordered: bool, p: int) -> pd.Series:
    """The EMD between each group's sensitive distribution and the table's: equal
    distance 0.5 sum |q - p|, or ordered 1/(m - 1) sum |cumsum(q - p)| over the m values
    the table holds, in numeric order (Li et al. 2007)."""
    q = st.pivot_table(
        index=GROUP, columns=s, values="count", aggfunc="sum", fill_value=0, observed=True
    )
    if ordered:
        q = q[sorted(q.columns, key=float)]
    totals = q.sum(axis=0).to_numpy(float)
    shares = q.to_numpy(float)
    diff = shares / shares.sum(axis=1, keepdims=True) - totals / totals.sum()
    if not ordered:
        return pd.Series(0.5 * np.abs(diff).sum(axis=1), index=q.index)
    steps = max(q.shape[1] - 1, 1)
    return pd.Series(np.abs(np.cumsum(diff, axis=1)).sum(axis=1) / steps, index=q.index)


GROUP_MEASURES = {  # a criterion's measure -> per group, from (group, value, count) rows
    "k": _sizes,
    "distinct_l": _distinct,
    "entropy_l": _entropy,
    "recursive_c": _recursive,
    "t": _emd,
}
