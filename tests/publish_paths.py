"""Helpers of the whole-path adversary tests (tests/kernels/test_adversary_paths.py and
test_adversary_publishers.py): the chunk plan a publisher makes of a small table on the
rows x = 0..n-1, and such a table published through the public API."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from vpub_spark.kernels.partitioning import shard_counts
from vpub_spark.publishing.marginals import plan_marginal_chunks

LABELS = "abcdefgh"  # the sensitive values' labels, in code order


def frame_of(t) -> pd.DataFrame:
    """The rows x = 0..n-1 with sensitive codes t."""
    return pd.DataFrame({"x": np.arange(len(t)), "s": np.asarray(t)})


def chunks_of(t: np.ndarray, m: int, chunk_rows: int) -> np.ndarray:
    """Each row's chunk on x = 0..n-1, planned as the publishers plan them (from shard
    counts, `plan_marginal_chunks`)."""
    return np.array(_plan(tuple(np.asarray(t).tolist()), m, chunk_rows))


@functools.cache
def _plan(t: tuple, m: int, chunk_rows: int) -> tuple:
    frame = frame_of(t)
    sizes = {"x": len(t), "s": len(t)}
    sharding, _, plan = plan_marginal_chunks(
        lambda sh: shard_counts(frame, ["s"], sh), sizes, ("x",), "s", m, chunk_rows
    )
    return tuple(plan.part_of(sharding.of(frame[["x"]])).tolist())


def small_input(tmp_path: Path, x, values) -> Path:
    """A CSV table of QI labels x<i> (in code order for up to 10 values) and sensitive
    labels a, b, ..., with its table.yaml; returns its directory."""
    data = tmp_path / "t"
    (data / "data").mkdir(parents=True)
    table = pd.DataFrame({"x": [f"x{i}" for i in x], "s": [LABELS[v] for v in values]})
    table.to_csv(data / "data" / "part.csv", index=False)
    (data / "table.yaml").write_text("name: t\nattributes: [{name: x}, {name: s}]\n")
    return data


def row_sets(group_of: dict[int, int]) -> set[frozenset]:
    """Which rows share a group (ids dropped)."""
    out: dict[int, set] = {}
    for row, g in group_of.items():
        out.setdefault(g, set()).add(row)
    return {frozenset(v) for v in out.values()}
