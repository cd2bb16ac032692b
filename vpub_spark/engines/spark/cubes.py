"""Contingency cubes of a source on Spark (`SparkEngine.count_cubes`, `count_matching`):
the exact answers of a query workload (000 §6.1) counted in the engine's tasks, one pass
over the source per round of draws, each task summing its rows into one cube per
attribute set (`cubes`, the caller's kernel), and only the cubes' cells (bounded by the
domains, not the rows) reaching the driver."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ...kernels.arrays import pack_counts, unpack_counts
from .errors import spark_errors
from .kl import CHUNK_ROWS, KEY, Packing, chunks, packed_rows, per_core, unpacked
from .schema import struct_type

CUBES = pa.schema([("set", pa.int32()), ("counts", pa.binary())])
Cubes = Callable[..., dict[tuple[str, ...], np.ndarray]]
"""`cubes(codes, sets, sizes)`: the cube of each attribute set over columns of codes."""


def zero_cubes(
    sets: Sequence[tuple[str, ...]], sizes: Mapping[str, int]
) -> dict[tuple[str, ...], np.ndarray]:
    """One flat int64 cube of zeros per attribute set."""
    return {cols: np.zeros(int(np.prod([sizes[c] for c in cols])), np.int64) for cols in sets}


def _task_cubes(
    sets: list[tuple[str, ...]],
    luts: dict[str, np.ndarray],
    sizes: dict[str, int],
    packing: Packing | None,
    cubes: Cubes,
):
    """mapInArrow over the encoded source: the task's cubes, summed over its chunks of
    rows, then each cube as one row of its dense counts, packed (`pack_counts`). At 1M
    source rows a task's cubes took 7.4 MB as the int64 indexes and counts of their
    non-zero cells, and moving them to the driver took about half of the job (0.45 of
    0.87 s); packed, 0.83 MB. One row per cell moved a million rows back into the JVM;
    one row per cube and chunk sent a 10M task's cells three times (measured; docs/explanation/performance.md)."""

    def run(batches):
        held = zero_cubes(sets, sizes)
        for chunk in chunks(batches, CHUNK_ROWS):
            codes = (
                {a: chunk.column(a).to_numpy() for a in luts}
                if packing is None
                else unpacked(chunk.column(KEY).to_numpy(), packing)
            )
            recoded = {a: lut[codes[a]] for a, lut in luts.items()}
            for cols, counted in cubes(recoded, sets, sizes).items():
                held[cols] += counted.ravel()
        packed = [pack_counts(held[cols]) for cols in sets]
        yield pa.RecordBatch.from_pydict(
            {"set": list(range(len(sets))), "counts": packed}, schema=CUBES
        )

    return run


def count_cubes(loaded, luts, sizes, sets, cubes: Cubes) -> dict[tuple[str, ...], np.ndarray]:
    """The cube of each of `sets` over the source recoded by `luts` (code -> the
    release's code), each of the shape of its attributes' `sizes`."""
    from .direct import direct_frame

    if loaded.direct is not None:  # the tasks read the source: no JVM rows
        run = _task_cubes(sets, luts, sizes, None, cubes)
        got = direct_frame(loaded.data.sparkSession, loaded.direct, run, struct_type(CUBES))
    else:
        packed = packed_rows(loaded)
        rows, packing = packed if packed is not None else (loaded.data, None)
        got = per_core(rows).mapInArrow(
            _task_cubes(sets, luts, sizes, packing, cubes), struct_type(CUBES)
        )
    out = zero_cubes(sets, sizes)
    with spark_errors("workload counts"):
        # the cubes are bounded by the domains, not the rows: summed here rather than
        # by a Spark aggregation, which adds a shuffle and a stage; as Arrow, not as
        # pickled rows (docs/explanation/performance.md)
        table = got.toArrow()
    for i, blob in zip(
        table.column("set").to_pylist(), table.column("counts").to_pylist(), strict=True
    ):
        out[sets[i]] += unpack_counts(blob)
    return {cols: dense.reshape([sizes[c] for c in cols]) for cols, dense in out.items()}


def count_matching(loaded, codes: Mapping[str, Sequence[int]]) -> int:
    """The rows whose every attribute of `codes` holds one of its codes (a query whose
    attribute set is too large for a cube)."""
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for a, values in codes.items():
        cond = cond & F.col(a).isin([int(v) for v in values])
    with spark_errors("workload counts"):
        return int(loaded.data.where(cond).count())
