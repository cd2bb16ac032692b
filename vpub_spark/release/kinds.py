"""The registry of table kinds: per kind, its parts, its audit checks, its comparison
with the source and its estimate model.

A new kind is one entry here (plus its checks in `release/audit/checks.py` and its model in
`estimate/`). A few readers still branch on a kind's name for what differs by layout:
export's flat files (release/export.py), the k-anonymity checks of `privacy.also`
(release/audit/release.py), the distributed audit's row counts (release/audit/distributed.py), the
risk measures (utility/risk.py) and the anatomy view of SQL (lake/sql.py). The models live in `estimate/`,
below `release/`, so this registry names them without importing from above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

from ..errors import DataError
from ..estimate.generalized import GeneralizedModel
from ..estimate.models import AnatomyModel, EstimateModel, ProjectionModel
from ..estimate.multi_sa import MultiSaModel
from ..model import PublishedTable
from .audit import checks, source
from .audit.checks import Checker
from .audit.source import Pairs, SourceCounts
from .reader import ReleaseReader

TableCheck = Callable[[ReleaseReader, dict, PublishedTable, int, int, Checker], None]
SourceCheck = Callable[[SourceCounts, PublishedTable, Checker], Pairs]
ModelBuilder = Callable[[dict, Mapping[str, pd.DataFrame], Mapping], EstimateModel]


@dataclass(frozen=True)
class KindHandlers:
    """What the code does with a table of one kind (`model.TableKind` names the kinds):
    `parts`: the part directories of a table of this kind; `check(rel, entry, table,
    l, rows, check)`: the audit of its files; `source(counts, table, check)`: the value
    counts that must equal the source's; `model(entry, parts, domains)`: its estimate
    model from its parts (labels) and the release's domains."""

    name: str
    parts: tuple[str, ...]
    check: TableCheck
    source: SourceCheck
    model: ModelBuilder


KINDS: dict[str, KindHandlers] = {
    k.name: k
    for k in (
        KindHandlers(
            "anatomy",
            ("qit", "st"),
            checks.anatomy_checks,
            source.anatomy_source,
            AnatomyModel.from_parts,
        ),
        KindHandlers(
            "projection",
            ("counts",),
            checks.projection_checks,
            source.projection_source,
            ProjectionModel.from_parts,
        ),
        KindHandlers(
            "multi_sa",
            ("qit", "st"),
            checks.multi_sa_checks,
            source.multi_sa_source,
            MultiSaModel.from_parts,
        ),
        KindHandlers(
            "generalized",
            ("groups", "st"),
            checks.generalized_checks,
            source.generalized_source,
            GeneralizedModel.from_parts,
        ),
    )
}


def table_kind(name: str) -> KindHandlers:
    if name not in KINDS:
        raise DataError(f"unknown table kind {name!r}; this version reads {', '.join(KINDS)}")
    return KINDS[name]
