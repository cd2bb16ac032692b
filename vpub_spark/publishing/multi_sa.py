"""Publishing the multi-SA baseline (000 Appendix B) in the release format (kind
`multi_sa`), in `exact` or `partitioned` mode (`multi_sa.mode`).

The layout, the modes and the decision on each chunk's eligibility:
docs/explanation/multi-sa.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..config import MultiSaSettings
from ..decompose.multi_sa import split
from ..encoding import Dictionary, write_decoded
from ..kernels.bip import MultiSaPlan, multi_sa_chunk, multi_sa_groups
from ..kernels.partitioning import (
    SHARDS,
    ContentShards,
    PartitionPlan,
    QiShards,
    combine_counts,
    partition_seed,
    plan_chunks,
)
from ..release.layout import part_file, part_location
from .anatomy import entries
from .method import Plan, RuleBased, sizes_of, summary_frame, summary_schema

SUMMARY_COLUMNS = {
    "table": "string",
    "part": "int32",
    "rows": "int64",
    "groups": "int64",
    "suppressed": "int64",
    "solves": "int32",
    "optimal": "int32",
    "time_limited": "int32",
    "solve_s": "float64",
    "task": "int32",
}


@dataclass(frozen=True)
class MultiSaJob:
    """What a partition task needs (small; shipped to the workers)."""

    stage: str
    table: str
    qi: tuple[str, ...]
    sa: tuple[str, ...]
    l: int
    seed: int
    settings: MultiSaSettings
    first_group: tuple[int, ...]
    dictionaries: Mapping[str, Dictionary]
    sharding: ContentShards | QiShards
    driver: tuple[MultiSaPlan, np.ndarray] | None = None  # exact: the solution, its combinations

    summary_schema = summary_schema(SUMMARY_COLUMNS)

    def shards(self, frame: pd.DataFrame) -> np.ndarray:
        return self.sharding.of(frame)

    def run(self, frame: pd.DataFrame, part: int, task: int = -1) -> pd.DataFrame:
        plan, combos = self.driver if self.driver else (None, None)
        s = self.settings
        res = multi_sa_chunk(
            frame,
            self.qi,
            self.sa,
            self.l,
            partition_seed(self.seed, 0, part),
            s.solver,
            s.time_limit_s,
            self.first_group[part],
            plan,
            combos,
        )
        name = part_file(part)
        write_decoded(
            res.qit, self.dictionaries, part_location(self.stage, self.table, "qit"), name
        )
        write_decoded(res.st, self.dictionaries, part_location(self.stage, self.table, "st"), name)
        solves = [] if self.driver else res.plan.solves  # the driver's are counted by the driver
        row = {
            "table": self.table,
            "part": part,
            "rows": len(frame),
            "groups": res.groups,
            "suppressed": res.suppressed_rows,
            "solves": len(solves),
            "optimal": sum(x.status == "optimal" for x in solves),
            "time_limited": sum("time limit" in x.status for x in solves),
            "solve_s": sum(x.seconds for x in solves),
            "task": task,
        }
        return summary_frame([row], SUMMARY_COLUMNS)


@dataclass(frozen=True)
class Solved:
    """The plan's extra for the job: how rows map to shards, and in exact mode the
    driver's solution with its combinations and every solve's account."""

    sharding: ContentShards | QiShards
    driver: tuple[MultiSaPlan, np.ndarray] | None
    solves: list[dict]


def exact_plan(cfg, engine, loaded, sa: list[str]) -> Plan:
    """One partition; the driver solves Algorithm 3 on the table's SA combinations."""
    s: MultiSaSettings = cfg.multi_sa
    sharding = ContentShards(cfg.secret_seed)
    counts = combine_counts(engine.shard_counts(loaded, sa, sharding), sa, sizes_of(loaded))
    one = PartitionPlan(
        np.zeros(SHARDS, dtype=np.int32), np.array([counts.total]), np.zeros(1, dtype=np.int64)
    )
    combos = engine.combination_counts(loaded, sa)
    codes = combos[sa].to_numpy()
    solution = multi_sa_groups(
        codes, combos["count"].to_numpy(), cfg.diversity, s.solver, s.time_limit_s
    )
    solves = [
        {"status": x.status, "seconds": round(x.seconds, 3), "selected": int(x.selected.sum())}
        for x in solution.solves
    ]
    return Plan(counts, one, Solved(sharding, (solution, codes), solves))


def partitioned_plan(cfg, engine, loaded, qi: list[str], sa: list[str]) -> Plan:
    """QI-local chunks of >= chunk_rows rows, each l-eligible for every SA attribute."""
    sizes = sizes_of(loaded)
    order = tuple(sorted(qi, key=lambda a: (-sizes[a], a)))  # the finest attribute first
    sharding = QiShards(order, tuple(sizes[a] for a in order))
    counts = combine_counts(engine.shard_counts(loaded, sa, sharding), sa, sizes)
    return Plan(
        counts,
        plan_chunks(counts, cfg.diversity, cfg.multi_sa.chunk_rows),
        Solved(sharding, None, []),
    )


def multi_sa_cost(
    settings: MultiSaSettings, plan: PartitionPlan, summary: pd.DataFrame, driver_solves: list[dict]
) -> dict:
    """The manifest's `method_cost` of a multi-SA release: every solve's status counted;
    `all_optimal` is false as soon as one solve stopped at its time limit."""
    statuses = [d["status"] for d in driver_solves]
    optimal = sum(s == "optimal" for s in statuses) + int(summary["optimal"].sum())
    limited = sum("time limit" in s for s in statuses) + int(summary["time_limited"].sum())
    total = len(statuses) + int(summary["solves"].sum())
    return {
        "mode": settings.mode,
        "solver": settings.solver,
        "time_limit_s": settings.time_limit_s,
        "chunk_rows": settings.chunk_rows if settings.mode == "partitioned" else None,
        "chunks": plan.parts,
        "solves": total,
        "optimal": optimal,
        "time_limited": limited,
        "other": total - optimal - limited,
        "all_optimal": optimal == total,
        "solve_seconds": round(
            sum(d["seconds"] for d in driver_solves) + float(summary["solve_s"].sum()), 3
        ),
        "suppressed_rows": int(summary["suppressed"].sum()),
        "driver_solves": driver_solves,
    }


class MultiSaMethod(RuleBased):
    """`multi_sa_bip`: 000 Appendix B, Algorithm 3 (docs/explanation/multi-sa.md)."""

    name = "multi_sa_bip"
    also_models = False  # Appendix B's condition only
    plan_step = "plan and solve"
    run_step = "anonymize and write"

    def plan(self, cfg, engine, loaded, design) -> Plan:
        qi, sa = split(design.tables[0])
        if cfg.multi_sa.mode == "exact":
            return exact_plan(cfg, engine, loaded, sa)
        return partitioned_plan(cfg, engine, loaded, qi, sa)

    def job(self, cfg, loaded, design, plan, stage, store) -> MultiSaJob:
        table, solved = design.tables[0], plan.detail
        qi, sa = split(table)
        first = tuple(int(g) for g in plan.partitions.first_group)
        return MultiSaJob(
            str(stage),
            table.name,
            tuple(qi),
            tuple(sa),
            cfg.diversity,
            cfg.secret_seed,
            cfg.multi_sa,
            first,
            dict(loaded.dictionaries),
            solved.sharding,
            solved.driver,
        )

    def table_entries(self, stage, design, loaded, summary) -> list[dict]:
        (entry,) = entries(stage, design.tables, loaded.rows, summary)
        return [entry | {"suppressed_rows": int(summary["suppressed"].sum())}]

    def cost(self, cfg, design, plan, summary) -> dict:
        return multi_sa_cost(cfg.multi_sa, plan.partitions, summary, plan.detail.solves)
