"""Rule-based publishing (000): `uad`, `gd` and `single_attribute`, every table of the
schema anonymized by anatomy in one pass over one partitioning (kernels/partitioning.py),
or generalized by 003's RDA or GDA (`anonymizer: rda | gda`); every group is l-diverse
either way, so the GNF guarantee (000 Theorem 4.1) holds.

The steps: docs/explanation/publishing.md; `anonymizer`: docs/explanation/streamliner.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import ANONYMIZERS, PublishConfig
from ..encoding import Dictionary, write_decoded
from ..engines.base import Engine, LoadedTable
from ..errors import PrivacyError
from ..gnf import check_gnf
from ..kernels.anatomy import GROUP, anatomize, grouped_tables
from ..kernels.partitioning import (
    ContentShards,
    combine_counts,
    partition_seed,
    plan_partitions,
)
from ..kernels.shared_grouping import partition_grouping
from ..kernels.streamliner import streamline
from ..model import SHARED_GROUPING, PublishedTable, Schema
from ..release.kinds import table_kind
from ..release.layout import part_file, part_location
from ..release.manifest import table_entry
from .marginals import canonical, write_generalized
from .method import Design, Plan, RuleBased, rule_design, sizes_of, summary_frame, summary_schema

SUMMARY_COLUMNS = {
    "table": "string",
    "part": "int32",
    "rows": "int64",
    "groups": "int64",
    "task": "int32",
}


@dataclass(frozen=True)
class AnatomyJob:
    """Everything a partition task needs (small; shipped to the workers)."""

    stage: str
    tables: tuple[PublishedTable, ...]
    l: int
    seed: int
    first_group: tuple[int, ...]
    dictionaries: Mapping[str, Dictionary]
    anonymizer: str = "anatomy"
    hashed: tuple[str, ...] = ()  # the columns a row's shard hashes (`hashed_columns`)

    summary_schema = summary_schema(SUMMARY_COLUMNS)

    @property
    def sharding(self) -> ContentShards:
        """The plan's sharding (`AnatomyMethod.plan`)."""
        return ContentShards(self.seed, self.hashed, occurrence=True)

    def shards(self, frame: pd.DataFrame):
        return self.sharding.of(frame)

    def run(self, frame: pd.DataFrame, part: int, task: int = -1) -> pd.DataFrame:
        """Anonymize and write every table of one partition that has a sensitive
        attribute; a summary row each. Two or more anatomy tables publish one grouping
        (`shared_grouping`)."""
        rows = []
        shared = self.shared_grouping(frame, part)
        for i, t in enumerate(self.tables):
            if t.sensitive is None:
                continue
            if t.generalized:
                groups = self.generalize(frame, t, partition_seed(self.seed, i, part), part)
            else:
                groups = self.anatomize(frame, t, partition_seed(self.seed, i, part), part, shared)
            rows.append(
                {"table": t.name, "part": part, "rows": len(frame), "groups": groups, "task": task}
            )
        return summary_frame(rows, SUMMARY_COLUMNS)

    def anatomize(
        self, frame: pd.DataFrame, t: PublishedTable, seed: int, part: int, shared
    ) -> int:
        """Anatomy on one table of one partition (its own grouping, or the `shared` one),
        written as its QIT and ST parts; the number of groups."""
        assert t.sensitive is not None
        chunk = frame[list(t.attributes)]
        first = self.first_group[part]
        if shared is None:
            qit, st = anatomize(chunk, t.sensitive, self.l, seed, first_group=first)
        else:
            qi = [a for a in t.attributes if a != t.sensitive]
            qit, st = grouped_tables(chunk, t.sensitive, qi, shared, first)
        for kind, table in (("qit", qit), ("st", st)):
            write_decoded(
                table, self.dictionaries, part_location(self.stage, t.name, kind), part_file(part)
            )
        return int(st[GROUP].nunique()) if shared is not None else len(frame) // self.l

    def shared_grouping(self, frame: pd.DataFrame, part: int) -> np.ndarray | None:
        """One grouping of the partition for every anatomy table (`schema_grouping`),
        seeded as the first such table; None for a release of at most one."""
        names = sharing_tables(self.tables)
        if not names or len(frame) == 0:
            return None
        first = next(i for i, t in enumerate(self.tables) if t.name in names)
        return schema_grouping(self.tables, frame, self.l, partition_seed(self.seed, first, part))

    def generalize(self, frame: pd.DataFrame, t: PublishedTable, seed: int, part: int) -> int:
        """003's RDA or GDA on one table of one partition, written as a generalized part."""
        assert t.sensitive is not None
        qi = [a for a in t.attributes if a != t.sensitive]
        canon = canonical(frame[[*qi, t.sensitive]])
        codes, s = canon[qi], canon[t.sensitive].to_numpy(dtype=np.int64)
        sizes = {a: self.dictionaries[a].size for a in qi}
        group = streamline(self.anonymizer, codes, s, self.l, seed, sizes).group
        return write_generalized(
            self.stage,
            t.name,
            codes,
            t.sensitive,
            s,
            group,
            self.first_group[part],
            self.dictionaries,
            part,
        )


def sharing_tables(tables) -> list[str]:
    """The anatomy tables that publish one grouping (`AnatomyJob.shared_grouping`): all
    of them when there are two or more, else none."""
    names = [t.name for t in tables if t.sensitive is not None and not t.generalized]
    return names if len(names) > 1 else []


def schema_grouping(tables, frame: pd.DataFrame, l: int, seed: int) -> np.ndarray | None:
    """The one grouping every anatomy table of `tables` publishes on the rows of `frame`
    (one partition), diverse in each of their sensitive attributes
    (kernels/shared_grouping.py); None when `sharing_tables` names none.

    Args:
        tables: the schema's tables.
        frame: the partition's encoded rows.
        l: the diversity.
        seed: the seed of the dealing.

    Returns:
        Each row's group, from 0, or None.
    """
    names = sharing_tables(tables)
    if not names:
        return None
    sensitive = dict.fromkeys(str(t.sensitive) for t in tables if t.name in names)
    return partition_grouping(frame, list(sensitive), l, seed)


def hashed_columns(design: Design, loaded: LoadedTable) -> tuple[str, ...]:
    """The columns that decide a row's partition: those no table holds as sensitive, so
    which rows share a partition never depends on a sensitive value
    (kernels/partitioning.py)."""
    sensitive = {a for t in design.tables for a in (t.sensitive_set or (t.sensitive,)) if a}
    return tuple(a for a in loaded.names if a not in sensitive)


def entries(
    stage: Path,
    tables,
    rows: int,
    summary: pd.DataFrame | None,
    dictionaries: Mapping[str, Dictionary] | None = None,
) -> list[dict]:
    """The manifest entries of a rule-based schema's tables (groups from the summary;
    a generalized table lists its QI domains, the ruler its boxes are read with)."""
    out, shared = [], sharing_tables(tables)
    for t in tables:
        extra: dict = {}
        if t.kind != "projection" and summary is not None:
            extra["groups"] = int(summary.loc[summary["table"] == t.name, "groups"].sum())
        if t.kind == "generalized" and dictionaries is not None:
            extra["domains"] = {
                a: list(dictionaries[a].labels) for a in t.attributes if a != t.sensitive
            }
        if t.name in shared:
            extra["grouping"] = SHARED_GROUPING
        sensitive = t.sensitive_set if t.sensitive_set else t.sensitive
        out.append(
            table_entry(
                stage,
                name=t.name,
                kind=t.kind,
                parts=table_kind(t.kind).parts,
                attributes=t.attributes,
                sensitive=sensitive,
                enforces=t.enforces,
                rows=rows,
                **extra,
            )
        )
    return out


@dataclass(frozen=True)
class AnatomyMethod(RuleBased):
    """`uad`, `gd`, `single_attribute` (000 Algorithms 1-2 and the single-attribute baseline)."""

    name: str
    anonymizers = ANONYMIZERS  # anatomy, or generalized by a streamliner (rda, gda)
    suppresses = True
    plan_step = "plan partitions"
    run_step = "anonymize and write"

    def plan(self, cfg: PublishConfig, engine: Engine, loaded: LoadedTable, design: Design) -> Plan:
        sensitive = [t.sensitive for t in design.tables if t.sensitive]
        sharding = ContentShards(cfg.secret_seed, hashed_columns(design, loaded), occurrence=True)
        shards = engine.shard_counts(loaded, sensitive, sharding)
        counts = combine_counts(shards, sensitive, sizes_of(loaded))
        return Plan(counts, plan_partitions(counts, cfg.diversity, cfg.partitions))

    def design(self, cfg: PublishConfig, engine: Engine, loaded: LoadedTable) -> Design:
        """000's design; with `anonymizer: rda | gda` its sub-tables are generalized, and
        a design of two or more generalized tables is refused (their groupings would
        combine; anatomy's tables share one grouping instead).

        Raises:
            PrivacyError: `rda | gda` with two or more tables that enforce rules.
        """
        d = rule_design(cfg, engine, loaded)
        if cfg.anonymizer == "anatomy":
            return d
        tables = tuple(replace(t, generalized=True) if t.kind == "anatomy" else t for t in d.tables)
        generalized = [t.name for t in tables if t.generalized]
        if len(generalized) > 1:
            raise PrivacyError(
                f"anonymizer {cfg.anonymizer}: the rules give {len(generalized)} generalized tables "
                f"({', '.join(generalized)}) over the same people, each grouped on its own, and a "
                "reader who knows how their sensitive attributes go together can combine them; "
                "use anonymizer: anatomy (its tables share one grouping) or rules of one table"
            )
        gnf = check_gnf(Schema(tables), d.rules)
        verdicts = {"ok": gnf.ok, "verdicts": [v.as_dict() for v in gnf.verdicts]}
        return replace(d, tables=tables, gnf=verdicts)

    def job(self, cfg, loaded, design, plan, stage, store) -> AnatomyJob | None:
        if not any(t.sensitive for t in design.tables):
            return None
        first = tuple(int(g) for g in plan.partitions.first_group)
        return AnatomyJob(
            str(stage),
            design.tables,
            cfg.diversity,
            cfg.secret_seed,
            first,
            dict(loaded.dictionaries),
            cfg.anonymizer,
            hashed_columns(design, loaded),
        )

    def table_entries(self, stage, design, loaded, summary) -> list[dict]:
        return entries(stage, design.tables, loaded.rows, summary, loaded.dictionaries)

    def cost(self, cfg, design, plan, summary) -> dict | None:
        return design.cost
