"""Publishing the multi-SA baseline (000 Appendix B) in the release format.

Layout (kind `multi_sa`, one table `multi_sa` of every attribute): part `qit` has
`group_id` and the QI attributes, one row per tuple (every tuple, suppressed ones
included: suppression hides only sensitive values); part `st` has `group_id`, every
sensitive attribute and `count`, one row per (group, combination of sensitive values).
A group of suppressed tuples has one ST row whose sensitive values are all null and
whose count is the group's size. The manifest's table entry lists the sensitive
attributes (`sensitive`), `groups` and `suppressed_rows`; `method_cost` records the
mode, the solver, the time limit and every solve's status.

Modes (config `multi_sa.mode`):
- `exact`: the paper's global algorithm. The driver aggregates the table's sensitive
  combinations (one small Spark aggregate), solves Algorithm 3's programs on them, and
  one task places the rows and writes the files.
- `partitioned`: QI-local chunks (kernels/partitioning.QiShards: runs of the QI
  order), each of at least `chunk_rows` rows and l-eligible for every sensitive
  attribute (`plan_chunks`); every chunk solves its own programs in its own task
  (applyInPandas), in parallel. Decision: l-eligibility of each sensitive attribute is
  what we can guarantee per chunk from aggregates; it is necessary for a non-empty
  group, not sufficient with several sensitive attributes, so a chunk may still
  suppress rows, and the manifest counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..config import MultiSaSettings
from ..decompose.multi_sa import split
from ..encoding import Dictionary
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
from ..model import PublishedTable
from .parts import arrow_schema, table_dir, write_parquet

SUMMARY_COLUMNS = {
    "table": "string", "part": "int32", "rows": "int64", "groups": "int64", "suppressed": "int64",
    "solves": "int32", "optimal": "int32", "time_limited": "int32", "solve_s": "float64", "task": "int32",
}  # fmt: skip
SUMMARY_SCHEMA = arrow_schema(SUMMARY_COLUMNS)


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
    driver: tuple[MultiSaPlan, np.ndarray] | None = (
        None  # exact mode: the solution and its combinations
    )

    summary_schema = SUMMARY_SCHEMA

    def shards(self, frame: pd.DataFrame) -> np.ndarray:
        return self.sharding.of(frame)

    def run(self, frame: pd.DataFrame, part: int, task: int = -1) -> pd.DataFrame:
        plan, combos = self.driver if self.driver else (None, None)
        s = self.settings
        res = multi_sa_chunk(
            frame, self.qi, self.sa, self.l, partition_seed(self.seed, 0, part), s.solver, s.time_limit_s,
            self.first_group[part], plan, combos,
        )  # fmt: skip
        name = f"part-{part:05d}.parquet"
        write_parquet(res.qit, self.dictionaries, table_dir(self.stage, self.table, "qit"), name)
        write_parquet(res.st, self.dictionaries, table_dir(self.stage, self.table, "st"), name)
        solves = (
            [] if self.driver else res.plan.solves
        )  # the driver's solves are counted once, by the driver
        row = {
            "table": self.table, "part": part, "rows": len(frame), "groups": res.groups, "suppressed": res.suppressed_rows,
            "solves": len(solves), "optimal": sum(x.status == "optimal" for x in solves),
            "time_limited": sum("time limit" in x.status for x in solves), "solve_s": sum(x.seconds for x in solves), "task": task,
        }  # fmt: skip
        return pd.DataFrame([row], columns=list(SUMMARY_COLUMNS)).astype(SUMMARY_COLUMNS)


def plan_multi_sa(
    cfg, engine, loaded, table: PublishedTable, stage
) -> tuple[object, PartitionPlan, MultiSaJob, list[dict]]:
    """(shard counts, partition plan, job, the driver's solves) for the multi-SA table."""
    qi, sa = split(table)
    sizes = {a: loaded.dictionaries[a].size for a in loaded.names}
    s: MultiSaSettings = cfg.multi_sa
    driver, solves = None, []
    if s.mode == "exact":
        sharding: ContentShards | QiShards = ContentShards(cfg.seed)
        counts = combine_counts(engine.shard_counts(loaded, sa, sharding), sa, sizes)
        plan = PartitionPlan(
            np.zeros(SHARDS, dtype=np.int32), np.array([counts.total]), np.zeros(1, dtype=np.int64)
        )
        combos = engine.combination_counts(loaded, sa)
        codes = combos[sa].to_numpy()
        solution = multi_sa_groups(
            codes, combos["count"].to_numpy(), cfg.l, s.solver, s.time_limit_s
        )
        driver = (solution, codes)
        solves = [
            {"status": x.status, "seconds": round(x.seconds, 3), "selected": int(x.selected.sum())}
            for x in solution.solves
        ]
    else:
        order = tuple(
            sorted(qi, key=lambda a: (-sizes[a], a))
        )  # the finest attribute first: finer cuts
        sharding = QiShards(order, tuple(sizes[a] for a in order))
        counts = combine_counts(engine.shard_counts(loaded, sa, sharding), sa, sizes)
        plan = plan_chunks(counts, cfg.l, s.chunk_rows)
    job = MultiSaJob(
        str(stage), table.name, tuple(qi), tuple(sa), cfg.l, cfg.seed, s, tuple(int(g) for g in plan.first_group),
        dict(loaded.dictionaries), sharding, driver,
    )  # fmt: skip
    return counts, plan, job, solves


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
