"""Re-identification risk and information loss of a release's tables, from
the published files alone.

An **equivalence class** is the set of published rows an attacker cannot tell apart by
their quasi-identifiers: rows with the same QI values (anatomy's QIT, a projection's
combinations) or the same box (a generalized table's groups). With n rows and classes
E_1 .. E_c:
- **prosecutor risk** (the attacker knows the target is in the data): a target in E is
  re-identified with probability 1/|E|; reported as the highest, 1 / min |E|, and the
  average over rows, c / n (El Emam and Dankar 2008; ARX's "risk" model).
- **journalist risk** (the target is drawn from a population): needs the population's
  class sizes; without a population model it is taken equal to the prosecutor risk, an
  upper bound (decision, as ARX does when no population is given).
- **marketer risk** (the expected share of rows re-identified when all are attacked):
  c / n (ibid.).
- **sample uniqueness**: the share of rows alone in their class.
- **average class size**: n / c.
- **discernibility** DM = sum |E|^2 (Bayardo and Agrawal 2005).
- **NCP / GCP** (Xu et al. 2006): a generalized group's NCP on attribute A is
  (max - min) / (|dom A| - 1) over the positions of A's published domain; GCP is the
  row-weighted mean NCP over groups and QI attributes, in [0, 1]. Anatomy and projections
  publish exact QIs: GCP 0.

Anatomy protects the sensitive value, not the identity: its QIT's prosecutor risk is
often 1, which these figures make visible (no l-diversity figure is lowered by it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..release.layout import COUNT, GROUP, SIZE
from ..release.reader import ReleaseReader


def class_risks(sizes: np.ndarray) -> dict[str, float]:
    """The risk figures of the module docstring from the classes' sizes."""
    sizes = np.asarray(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    n, c = int(sizes.sum()), len(sizes)
    if n == 0:
        return {}
    return {
        "prosecutor_max": 1.0 / float(sizes.min()),
        "prosecutor_avg": c / n,
        "journalist_max": 1.0 / float(sizes.min()),
        "marketer": c / n,
        "sample_uniqueness": float(sizes[sizes == 1].sum()) / n,
        "avg_class_size": n / c,
        "discernibility": float((sizes.astype(float) ** 2).sum()),
    }


def _ncp(groups: pd.DataFrame, qi: list[str], domains: dict[str, list[str]]) -> float:
    """Row-weighted mean NCP of generalized groups over `qi` (see the module docstring)."""
    per_attr = []
    for a in qi:
        labels = {v: i for i, v in enumerate(domains[a])}
        lo = groups[f"{a}_min"].astype(str).map(labels).to_numpy(float)
        hi = groups[f"{a}_max"].astype(str).map(labels).to_numpy(float)
        per_attr.append((hi - lo) / max(len(labels) - 1, 1))
    weights = groups[SIZE].to_numpy(float)
    return float(np.average(np.mean(per_attr, axis=0), weights=weights)) if per_attr else 0.0


def table_risk(rel: ReleaseReader, entry: dict) -> dict[str, float]:
    """The figures for one table of the release."""
    kind, s = entry.get("kind"), entry.get("sensitive")
    qi = [a for a in entry["attributes"] if a != s]
    if kind == "projection":
        counts = rel.read(entry["name"], "counts").to_pandas()
        cols = [a for a in qi if a in counts.columns]
        sizes = (
            counts.groupby(cols, observed=True)[COUNT].sum().to_numpy()
            if cols
            else counts[COUNT].to_numpy()
        )
        return class_risks(sizes) | {"gcp": 0.0}
    if kind == "generalized":
        groups = rel.read(entry["name"], "groups").to_pandas()
        box = [f"{a}_{e}" for a in qi for e in ("min", "max")]
        sizes = groups.groupby(box, observed=True)[SIZE].sum().to_numpy()
        domains = entry.get("domains") or {
            a: sorted(set(groups[f"{a}_min"].astype(str)) | set(groups[f"{a}_max"].astype(str)))
            for a in qi
        }
        return class_risks(sizes) | {"gcp": _ncp(groups, qi, domains)}
    qit = rel.read(entry["name"], "qit").to_pandas()  # anatomy, multi_sa: exact QIs
    cols = [a for a in qit.columns if a != GROUP]
    return class_risks(qit.groupby(cols, observed=True).size().to_numpy()) | {"gcp": 0.0}


def release_risk(rel: ReleaseReader) -> dict[str, dict[str, float]]:
    """Per table, the figures of the module docstring."""
    return {t["name"]: table_risk(rel, t) for t in rel.tables}
