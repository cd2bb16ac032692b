"""A release's tables as estimate models, from its files (docs/explanation/algorithms.md):
each part read once, the kind's model (release/kinds.py) built in one code space."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ..estimate.codes import shown_labels, sort_labels
from ..estimate.models import EstimateModel
from ..release.kinds import table_kind
from ..release.reader import Release


def release_domains(
    rel: Release, parts: Mapping[tuple[str, str], pd.DataFrame]
) -> dict[str, list[str]]:
    """Each attribute's labels as the release shows them (every table covers every row),
    or as a table's manifest entry lists them (`domains` of a generalized marginal)."""
    labels: dict[str, set] = {}
    listed: dict[str, list[str]] = {}
    for t in rel.tables:
        listed |= {a: list(v) for a, v in (t.get("domains") or {}).items()}
        for part in t["parts"]:
            frame = parts[(t["name"], part)]
            for a, shown in shown_labels(
                frame, [c for c in frame.columns if c in t["attributes"]]
            ).items():
                labels.setdefault(a, set()).update(shown)
    return {a: sort_labels(v) for a, v in labels.items() if a not in listed} | listed


def release_models(
    rel: Release, domains: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[EstimateModel], dict[str, list[str]]]:
    """The models of a release's tables in code space, and the domains used: the given
    ones, or those the release shows."""
    parts = {
        (t["name"], p): rel.read(t["name"], p).to_pandas() for t in rel.tables for p in t["parts"]
    }
    used = (
        {a: list(v) for a, v in domains.items()}
        if domains is not None
        else release_domains(rel, parts)
    )
    models = [
        table_kind(t["kind"]).model(t, {p: parts[(t["name"], p)] for p in t["parts"]}, used)
        for t in rel.tables
    ]
    return models, used
