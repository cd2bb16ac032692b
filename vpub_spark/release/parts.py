"""Writing one partition of a release: the code both engines run per partition.

Each partition anatomizes every anatomy table of the schema with the kernel, decodes
the codes to labels and writes `tables/<table>/<qit|st>/part-<p>.parquet` itself
(pyarrow), so all tables of a release come out of ONE pass over ONE partitioning.
A file is written under a temporary name and renamed, and its name depends only on
the partition: a retried or speculative task rewrites the same bytes in the same
place. `run_partition` returns one small summary row per table.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..encoding import Dictionary, decode_batch
from ..kernels.anatomy import anatomize
from ..kernels.partitioning import PartitionPlan, partition_seed, shard_of
from ..model import Schema

SUMMARY_COLUMNS = {
    "table": "string",
    "part": "int32",
    "rows": "int64",
    "groups": "int64",
    "task": "int32",
}


def arrow_schema(columns: Mapping[str, str]) -> pa.Schema:
    """The Arrow schema of a summary frame's {column: dtype} (string or a numeric type)."""
    return pa.schema(
        [(n, pa.string() if t == "string" else getattr(pa, t)()) for n, t in columns.items()]
    )


SUMMARY_SCHEMA = arrow_schema(SUMMARY_COLUMNS)


@dataclass(frozen=True)
class PartitionJob:
    """Everything a partition task needs (small; shipped to the workers)."""

    stage: str
    schema: Schema
    l: int
    seed: int
    first_group: tuple[int, ...]
    dictionaries: Mapping[str, Dictionary]

    summary_schema = SUMMARY_SCHEMA

    def shards(self, frame: pd.DataFrame):
        return shard_of(frame, self.seed)

    def run(self, frame: pd.DataFrame, part: int, task: int = -1) -> pd.DataFrame:
        return run_partition(frame, part, self, task)

    @classmethod
    def of(
        cls, stage: Path, schema: Schema, l: int, seed: int, plan: PartitionPlan, dictionaries
    ) -> PartitionJob:
        return cls(
            str(stage), schema, l, seed, tuple(int(g) for g in plan.first_group), dict(dictionaries)
        )


def table_dir(root: str | Path, table: str, part: str) -> Path:
    return Path(root) / "tables" / table / part


def write_parquet(
    frame: pd.DataFrame, dictionaries: Mapping[str, Dictionary], directory: Path, name: str
) -> None:
    """Decode and write one file atomically (temporary name, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    batch = decode_batch(pa.Table.from_pandas(frame, preserve_index=False), dictionaries)
    tmp = directory / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    pq.write_table(pa.Table.from_batches([batch]), tmp)
    os.replace(tmp, directory / name)


def run_partition(
    frame: pd.DataFrame, part: int, job: PartitionJob, task: int = -1
) -> pd.DataFrame:
    """Anatomize and write every anatomy table for one partition; one summary row per table."""
    rows = []
    name = f"part-{part:05d}.parquet"
    for i, t in enumerate(job.schema.tables):
        if t.sensitive is None:
            continue
        qit, st = anatomize(
            frame[list(t.attributes)],
            t.sensitive,
            job.l,
            partition_seed(job.seed, i, part),
            first_group=job.first_group[part],
        )
        write_parquet(qit, job.dictionaries, table_dir(job.stage, t.name, "qit"), name)
        write_parquet(st, job.dictionaries, table_dir(job.stage, t.name, "st"), name)
        rows.append(
            {
                "table": t.name,
                "part": part,
                "rows": len(frame),
                "groups": len(frame) // job.l,
                "task": task,
            }
        )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS)).astype(SUMMARY_COLUMNS)
