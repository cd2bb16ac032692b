"""Re-identification risk and information loss of a release's tables, from the published
files alone: prosecutor, journalist and marketer risk, sample uniqueness, the average
class size, discernibility and NCP / GCP.

Definitions, citations and decisions: docs/explanation/privacy-models.md, "Risk and
information loss".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..release.layout import COUNT, GROUP, SIZE
from ..release.reader import ReleaseReader

FIGURES = (
    "prosecutor_max",
    "prosecutor_avg",
    "journalist_max",
    "marketer",
    "sample_uniqueness",
    "avg_class_size",
    "discernibility",
    "gcp",
)
"""The figures of a table, in the order the reports show them."""


def class_risks(sizes: np.ndarray) -> dict[str, float]:
    """The risk figures of docs/explanation/privacy-models.md from the classes' sizes."""
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
    """Row-weighted mean NCP of generalized groups over `qi`
    (docs/explanation/privacy-models.md)."""
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
    qit = rel.read(entry["name"], "qit")  # anatomy, multi_sa: exact QIs
    cols = [a for a in qit.column_names if a != GROUP]
    shown = qit.select(cols).drop_null()  # a row with a missing QI is in no class
    if not cols:
        return class_risks(np.array([shown.num_rows])) | {"gcp": 0.0}
    classes = shown.group_by(cols).aggregate([([], "count_all")])["count_all"]
    return class_risks(classes.to_numpy()) | {"gcp": 0.0}


def release_risk(rel: ReleaseReader) -> dict[str, dict[str, float]]:
    """Per table, the figures of docs/explanation/privacy-models.md."""
    return {t["name"]: table_risk(rel, t) for t in rel.tables}
