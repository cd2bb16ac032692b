"""What every publishing method implements (docs/explanation/architecture.md): the
strategy protocol the pipeline runs, and the pieces the method families share.

A method is a small object with
- `design(cfg, engine, loaded) -> Design`: the rules, the tables and the GNF verdict
  (schema level, before any row is touched but for small aggregates or samples);
- `plan(cfg, engine, loaded, design) -> Plan`: the partitioning, from one counting
  pass over the rows (its shard counts also fingerprint the source);
- `job(cfg, loaded, design, plan, stage, store) -> PartitionJob`: what every partition
  task does (kernels, then its part files);
- `table_entries(stage, design, loaded, summary)` and `cost(cfg, design, plan,
  summary)`: the manifest's tables and the method's `method_cost`;
- `store(cfg)` and `record(...)`: the private store staged beside the release, if the
  method keeps one (marginals).
`publishing/registry.py` maps method names to methods; `publishing/pipeline.py` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import pyarrow as pa

from ..config import PublishConfig, RandomRules
from ..engines.base import Engine, LoadedTable, PartitionJob
from ..kernels.partitioning import PartitionPlan, ShardCounts
from ..model import PublishedTable, Rule
from ..release.layout import public_path
from ..release.secret import draw_seed, keyed, read_seed_file
from ..rules import check_eligibility, ineligibility, parse_rules, random_rules, reduce_rules
from ..tablespec import table_spec_to_dict


def with_secret_seed(cfg: PublishConfig) -> PublishConfig:
    """The config with its seed fixed: given, read from `seed_file`, or drawn
    (release/secret.py); the config itself only names them."""
    if cfg.seed is not None:
        return cfg
    seed = read_seed_file(cfg.seed_file) if cfg.seed_file else draw_seed()
    return replace(cfg, seed=seed, seed_file=None)


@dataclass(frozen=True)
class Design:
    """A method's decisions before the rows: the rules it enforces (with the ones the
    reduction dropped), the tables it publishes, the GNF verdict for the manifest, the
    design's cost (GD) and anything else its later steps need (`detail`)."""

    rules: tuple[Rule, ...]
    tables: tuple[PublishedTable, ...]
    gnf: dict
    dropped: Sequence[dict] = ()
    cost: dict | None = None
    store_id: str | None = None
    detail: Any = None

    @property
    def projections(self) -> list[PublishedTable]:
        """Tables published as aggregated projections (they enforce no rule)."""
        return [t for t in self.tables if t.kind == "projection"]


@dataclass(frozen=True)
class Plan:
    """The partitioning (`partitions`), the shard counts it was made from (`counts`,
    also the source's fingerprint) and what else the job needs (`detail`)."""

    counts: ShardCounts
    partitions: PartitionPlan
    detail: Any = None


class Method(Protocol):
    """One publishing method family (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def privacy_model(self) -> str:
        """l-diversity | m-invariance"""
        ...

    @property
    def needs_rules(self) -> bool:
        """Privacy rules Q -> S must be in the config."""
        ...

    @property
    def section(self) -> str | None:
        """The config section the method needs (`marginals`), if any."""
        ...

    @property
    def generalizes(self) -> bool:
        """It publishes generalized groups (boxes of QI values) whatever the anonymizer."""
        ...

    @property
    def anonymizers(self) -> tuple[str, ...]:
        """The `anonymizer` values it takes (how a rule's sub-table is anonymized)."""
        ...

    @property
    def suppresses(self) -> bool:
        """It honours `privacy.suppression` (suppressing rows to make rules eligible)."""
        ...

    @property
    def also_models(self) -> bool:
        """It meets `privacy.also` (entropy, recursive, k) through its group shares."""
        ...

    @property
    def design_step(self) -> str: ...

    @property
    def plan_step(self) -> str: ...

    @property
    def run_step(self) -> str: ...

    def design(self, cfg: PublishConfig, engine: Engine, loaded: LoadedTable) -> Design: ...

    def plan(
        self, cfg: PublishConfig, engine: Engine, loaded: LoadedTable, design: Design
    ) -> Plan: ...

    def job(
        self,
        cfg: PublishConfig,
        loaded: LoadedTable,
        design: Design,
        plan: Plan,
        stage: str,
        store: str | None,
    ) -> PartitionJob | None: ...

    def table_entries(
        self, stage: Path, design: Design, loaded: LoadedTable, summary: pd.DataFrame | None
    ) -> list[dict]: ...

    def cost(
        self, cfg: PublishConfig, design: Design, plan: Plan, summary: pd.DataFrame | None
    ) -> dict | None: ...

    def store(self, cfg: PublishConfig) -> str | Path | None: ...

    def record(
        self,
        cfg: PublishConfig,
        design: Design,
        loaded: LoadedTable,
        store: Path,
        manifest: dict,
        target: str | Path,
    ) -> None: ...


@dataclass
class PublishResult:
    """What `publish` returns: the committed release's path, its manifest, the audit it
    passed, the time of each step (seconds) and, per partition, its size."""

    path: Path | str  # a URI for an object store
    manifest: dict
    audit: Any  # release.audit.checks.AuditReport
    timings: dict[str, float] = field(default_factory=dict)
    partitions: pd.DataFrame | None = None  # per partition: table, part, rows, groups, task


def summary_schema(columns: Mapping[str, str]) -> pa.Schema:
    """The Arrow schema of a job's summary frame {column: dtype} (string or numeric)."""
    return pa.schema(
        [(n, pa.string() if t == "string" else getattr(pa, t)()) for n, t in columns.items()]
    )


def summary_frame(rows: list[dict], columns: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(columns)).astype(dict(columns))


def choose_rules(cfg: PublishConfig, loaded: LoadedTable) -> tuple[tuple[Rule, ...], list[dict]]:
    """The configured rules, reduced (000 Theorem 3.1); every RHS must be l-eligible
    (docs/explanation/architecture.md, "The data model"). Random rules (000 §6.1) draw
    their RHS among the eligible attributes."""
    names, frequencies = loaded.names, loaded.frequencies()
    if isinstance(cfg.rules, RandomRules):
        eligible = [a for a in names if ineligibility(a, *frequencies[a], cfg.diversity) is None]
        rules = random_rules(names, cfg.rules.c, cfg.rules.lhs, cfg.rules.seed, eligible)
    else:
        rules = parse_rules(list(cfg.rules), names)
    red = reduce_rules(rules)
    check_eligibility(red.kept, frequencies, cfg.diversity)
    dropped = [{"rule": d.as_dict(), "implied_by": by.as_dict()} for d, by in red.dropped]
    return red.kept, dropped


def source_entry(cfg: PublishConfig, loaded: LoadedTable, fingerprint: str) -> dict:
    """The manifest's `source`: where it was read, its rows and columns, its table spec,
    and its fingerprint keyed by the secret seed (unkeyed, it would let an adversary
    test a candidate table; release/secret.py); a Delta or Iceberg input's version read."""
    version = {"version": cfg.input_version} if cfg.input_version is not None else {}
    return {
        "path": public_path(cfg.input_path),
        **version,
        "rows": loaded.rows,
        "rows_read": loaded.rows_read,
        "rows_dropped": loaded.rows_dropped,
        "columns": list(loaded.names),
        "table_spec": table_spec_to_dict(loaded.spec),
        "fingerprint": keyed(cfg.secret_seed, fingerprint.encode()),
    }


def sizes_of(loaded: LoadedTable) -> dict[str, int]:
    return {a: loaded.dictionaries[a].size for a in loaded.names}


def rule_design(cfg: PublishConfig, engine: Engine, loaded: LoadedTable) -> Design:
    """000's design for the rule-based methods: reduced rules, the method's schema
    (decompose/methods.py; GD's add-back in a seeded order, or by KL on a seeded sample
    under `gd.score: kl-unsafe`), GNF verdicts."""
    from ..decompose.gd import in_order
    from ..decompose.methods import design
    from ..gnf import check_gnf
    from ..model import UNSAFE_GD_SCORE
    from ..utility.score import kl_scorer

    rules, dropped = choose_rules(cfg, loaded)
    scored_on: list[int] = []

    def scorer():
        if cfg.gd_score != UNSAFE_GD_SCORE:
            return in_order  # reads no data (decompose/gd.py)
        frame = engine.rows_sample(loaded, cfg.gd_sample_rows, cfg.secret_seed)
        scored_on.append(len(frame))
        return kl_scorer(frame, sizes_of(loaded), cfg.diversity, cfg.secret_seed)

    schema, gd_cost = design(
        cfg.method, loaded.names, rules, cfg.secret_seed, scorer, cfg.gd_budget_s
    )
    cost = None
    if gd_cost is not None:
        cost = gd_cost.as_dict() | {"score": cfg.gd_score, "scored_on_rows": sum(scored_on)}
    gnf = check_gnf(schema, rules)
    verdicts = {"ok": gnf.ok, "verdicts": [v.as_dict() for v in gnf.verdicts]}
    return Design(rules, schema.tables, verdicts, dropped, cost)


def covered(plan: Plan, loaded: LoadedTable) -> None:
    """The shard counts must cover every row (a plan from a partial count would drop rows)."""
    from ..errors import PrivacyError

    if plan.counts.total != loaded.rows:
        raise PrivacyError(
            f"shard counts cover {plan.counts.total} rows, the table has {loaded.rows}"
        )


class NoStore:
    """For methods that keep no private state: nothing to stage, nothing to record.
    Also the capabilities most methods share (the anatomy methods and multi-SA differ)."""

    generalizes = True
    anonymizers: tuple[str, ...] = ("anatomy",)
    suppresses = False
    also_models = True

    def store(self, cfg: PublishConfig) -> str | Path | None:
        return None

    def record(
        self,
        cfg: PublishConfig,
        design: Design,
        loaded: LoadedTable,
        store: Path,
        manifest: dict,
        target: str | Path,
    ) -> None:
        return None


class RuleBased(NoStore):
    """What 000's rule-based methods share: l-diversity, privacy rules, no section of
    their own, and the design (`rule_design`)."""

    privacy_model = "l-diversity"
    needs_rules = True
    section: str | None = None
    generalizes = False  # exact QIs (anatomy), unless an anonymizer generalizes
    design_step = "rules and schema"

    def design(self, cfg: PublishConfig, engine: Engine, loaded: LoadedTable) -> Design:
        return rule_design(cfg, engine, loaded)
