"""Publishing a release (DESIGN.md §4): plan, anonymize, write, audit, commit.

`publish` is the one library call behind `vpub publish` and `jobs/publish.py`:
1. read and encode the input (engine), draw or parse the rules, reduce them (000
   Theorem 3.1) and reject any rule no publication can meet;
2. design the schema (decompose/methods.py), which must be GNF;
3. count shards and plan l-eligible partitions (kernels/partitioning.py; the
   multi-SA baseline plans and solves in release/multi_sa.py);
4. in a staging directory beside the target: every anatomy table in one pass
   (release/parts.py) or the multi-SA table, every projection aggregated, then the
   manifest;
5. audit the staged files (release/audit.py); only if the audit passes, record it,
   write `_SUCCESS` and rename the staging directory into place.
Any failure removes the staging directory; a committed release is never overwritten
unless `overwrite` is set.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from .. import __version__
from ..config import PublishConfig, RandomRules, resolve_table
from ..decompose.methods import design
from ..errors import PrivacyError, SpecError
from ..gnf import check_gnf
from ..kernels.partitioning import ContentShards, combine_counts, fingerprint, plan_partitions
from ..model import Rule, Schema
from ..rules import check_eligibility, ineligibility, parse_rules, random_rules, reduce_rules
from ..staging import check_target, staged_directory
from ..tablespec import table_spec_to_dict
from ..utility.score import kl_scorer
from .audit import AuditReport, audit_release
from .multi_sa import multi_sa_cost, plan_multi_sa
from .parts import PartitionJob, table_dir
from .reader import COUNT, FORMAT_VERSION, GROUP, MANIFEST, PARTS, SUCCESS

RESERVED = (GROUP, COUNT)


@dataclass
class PublishResult:
    path: Path
    manifest: dict
    audit: AuditReport
    timings: dict[str, float] = field(default_factory=dict)
    partitions: object = None  # the per-partition summary (table, part, rows, groups, task)


class Steps:
    """Times named steps and tells an optional observer (the CLI's progress display)."""

    def __init__(self, observer: Callable[[str], object] | None = None):
        self.observer = observer
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        ctx = self.observer(name) if self.observer else None
        t0 = time.perf_counter()
        if ctx is not None:
            with ctx:  # type: ignore[attr-defined]
                yield
        else:
            yield
        self.timings[name] = time.perf_counter() - t0


def choose_rules(cfg: PublishConfig, names, frequencies) -> tuple[tuple[Rule, ...], list]:
    """The configured rules, reduced; every RHS must be l-eligible (DESIGN.md §3)."""
    if isinstance(cfg.rules, RandomRules):
        eligible = [a for a in names if ineligibility(a, *frequencies[a], cfg.l) is None]
        rules = random_rules(names, cfg.rules.c, cfg.rules.lhs, cfg.rules.seed, eligible)
    else:
        rules = parse_rules(list(cfg.rules), names)
    red = reduce_rules(rules)
    check_eligibility(red.kept, frequencies, cfg.l)
    return red.kept, [{"rule": d.as_dict(), "implied_by": by.as_dict()} for d, by in red.dropped]


def design_schema(cfg: PublishConfig, engine, loaded, rules) -> tuple[Schema, dict | None]:
    """The method's schema and, for GD, its cost (for the manifest)."""
    scored_on: list[int] = []

    def scorer():
        frame = engine.rows_sample(loaded, cfg.gd_sample_rows, cfg.seed)
        scored_on.append(len(frame))
        return kl_scorer(
            frame, {a: loaded.dictionaries[a].size for a in loaded.names}, cfg.l, cfg.seed
        )

    schema, cost = design(cfg.method, loaded.names, rules, cfg.seed, scorer, cfg.gd_budget_s)
    return schema, None if cost is None else cost.as_dict() | {"scored_on_rows": scored_on[0]}


def publish(
    cfg: PublishConfig, engine, observer: Callable[[str], object] | None = None
) -> PublishResult:
    step = Steps(observer)
    t_start = time.perf_counter()
    path, spec = resolve_table(cfg)
    letter = "m" if cfg.method == "marginals" else "l"
    release_id = cfg.release_id or f"{spec.name}-{cfg.method}-{letter}{cfg.l}-seed{cfg.seed}"
    target = Path(cfg.output_path) / release_id
    check_target(
        target, cfg.overwrite
    )  # fail before any work: committed release, unwritable output
    reserved = [a for a in spec.names if a in RESERVED]
    if reserved:
        raise SpecError(
            f"attribute names {', '.join(RESERVED)} are reserved for release columns; rename {', '.join(reserved)}"
        )
    with step("read and encode"):
        loaded = engine.persist(engine.load(path, spec, cfg.input_format))
    try:
        if cfg.method == "marginals":
            from .marginals import publish_marginals

            return publish_marginals(
                cfg, engine, loaded, release_id, target, step, _source(cfg, loaded, spec), t_start
            )
        return _publish(cfg, engine, loaded, spec, release_id, target, step, t_start)
    finally:
        engine.unpersist(loaded)


def _publish(
    cfg: PublishConfig,
    engine,
    loaded,
    spec,
    release_id: str,
    target: Path,
    step: Steps,
    t_start: float,
) -> PublishResult:
    with step("rules and schema"):
        rules, dropped = choose_rules(cfg, loaded.names, loaded.frequencies())
        schema, method_cost = design_schema(cfg, engine, loaded, rules)
        gnf = check_gnf(schema, rules)
    sensitive = [t.sensitive for t in schema.tables if t.sensitive]
    multi = next((t for t in schema.tables if t.kind == "multi_sa"), None)
    with staged_directory(target, cfg.overwrite) as stage:
        with step("plan partitions" if multi is None else f"plan and solve ({cfg.multi_sa.mode})"):
            if multi is not None:
                counts, plan, job, driver_solves = plan_multi_sa(cfg, engine, loaded, multi, stage)
            else:
                domains = {a: loaded.dictionaries[a].size for a in loaded.names}
                counts = combine_counts(
                    engine.shard_counts(loaded, sensitive, ContentShards(cfg.seed)),
                    sensitive,
                    domains,
                )
                plan = plan_partitions(counts, cfg.l, cfg.partitions)
                job = PartitionJob.of(stage, schema, cfg.l, cfg.seed, plan, loaded.dictionaries)
            if counts.total != loaded.rows:
                raise PrivacyError(
                    f"shard counts cover {counts.total} rows, the table has {loaded.rows}"
                )
        with step("anonymize and write"):
            summary = engine.run_partitions(loaded, plan, job) if sensitive or multi else None
            for t in schema.tables:
                if t.kind == "projection":
                    engine.write_projection(
                        loaded, t.attributes, table_dir(stage, t.name, "counts")
                    )
        if multi is not None:
            method_cost = multi_sa_cost(cfg.multi_sa, plan, summary, driver_solves)
        manifest = {
            "format_version": FORMAT_VERSION,
            "release_id": release_id,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "software_version": __version__,
            "seed": cfg.seed,
            "engine": engine.name,
            "source": _source(cfg, loaded, spec)
            | {
                "fingerprint": fingerprint(
                    counts, {a: loaded.dictionaries[a].labels for a in loaded.names}
                )
            },
            "privacy": cfg.privacy.as_dict(),
            "rules": [r.as_dict() for r in rules],
            "rules_dropped": dropped,
            "method": cfg.method,
            "method_cost": method_cost,
            "partitions": plan.parts,
            "tables": [_table_entry(stage, t, loaded.rows, cfg.l, summary) for t in schema.tables],
            "gnf": {"ok": gnf.ok, "verdicts": [v.as_dict() for v in gnf.verdicts]},
            "config": cfg.effective(),
            "audit": None,
        }
        report = audit_and_commit(stage, manifest, step, t_start)
    return PublishResult(target, manifest, report, dict(step.timings), summary)


def audit_and_commit(stage: Path, manifest: dict, step: Steps, t_start: float) -> AuditReport:
    """Write the manifest, audit the staged files, record the audit and the timings, and
    mark the stage complete (`_SUCCESS`); a failed audit raises and commits nothing."""
    write_manifest(stage, manifest)
    with step("audit"):
        report = audit_release(stage, require_committed=False)
    if not report.passed:
        raise PrivacyError(
            "the audit of the staged release failed, nothing was committed: "
            + "; ".join(report.as_dict()["failures"][:5])
        )
    manifest["audit"] = report.as_dict()
    manifest["timings_s"] = {k: round(v, 3) for k, v in step.timings.items()} | {
        "total": round(time.perf_counter() - t_start, 3)
    }
    write_manifest(stage, manifest)
    (stage / SUCCESS).write_text("")
    return report


def _source(cfg: PublishConfig, loaded, spec) -> dict:
    return {
        "path": str(cfg.input_path),
        "rows": loaded.rows,
        "rows_read": loaded.rows_read,
        "rows_dropped": loaded.rows_dropped,
        "columns": list(loaded.names),
        "table_spec": table_spec_to_dict(spec),
    }


def _table_entry(stage: Path, t, rows: int, l: int, summary) -> dict:
    parts = {}
    for part in PARTS[t.kind]:
        d = table_dir(stage, t.name, part)
        files = sorted(d.glob("*.parquet"))
        parts[part] = {
            "path": str(d.relative_to(stage)),
            "files": len(files),
            "rows": sum(pq.ParquetFile(f).metadata.num_rows for f in files),
        }
    entry = {
        "name": t.name,
        "kind": t.kind,
        "attributes": list(t.attributes),
        "sensitive": list(t.sensitive_set) if t.kind == "multi_sa" else t.sensitive,
        "enforces": list(t.enforces),
        "rows": rows,
        "parts": parts,
    }
    if t.kind in ("anatomy", "multi_sa"):
        entry["groups"] = int(summary.loc[summary["table"] == t.name, "groups"].sum())
    if t.kind == "multi_sa":
        entry["suppressed_rows"] = int(summary["suppressed"].sum())
    return entry


def write_manifest(stage: Path, manifest: dict) -> None:
    tmp = stage / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    tmp.replace(stage / MANIFEST)
