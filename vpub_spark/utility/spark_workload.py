"""The utility of a release on Spark (000 §5.1, §6.1): the KL divergence
(`spark_kl.py`) and the exact answers of a query workload, counted in the engine's
tasks as contingency cubes (`queries.CubeCounts`): one pass over the source per round of
draws, each task summing its rows into one cube per attribute set, and only the cubes'
non-zero cells (bounded by the domains, not the rows) reaching the driver. The release's
estimates are computed in the driver from its models, as in process."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from ..estimate.codes import Query, recoding, with_unpublished
from ..kernels.arrays import pack_counts, unpack_counts
from ..release.reader import open_release
from ..tablespec import table_spec_from_dict
from .evaluate import Utility
from .queries import CubeCounts, cubes, draw_workload, relative_errors
from .release_models import release_models
from .spark_kl import CHUNK_ROWS, KEY, Packing, chunks, packed_rows, per_core, spark_kl, unpacked

CUBES = pa.schema([("set", pa.int32()), ("counts", pa.binary())])


def _zero_cubes(sets: list[tuple[str, ...]], sizes: dict[str, int]) -> dict[tuple[str, ...], np.ndarray]:  # fmt: skip
    """One flat int64 cube of zeros per attribute set."""
    return {cols: np.zeros(int(np.prod([sizes[c] for c in cols])), np.int64) for cols in sets}


def _task_cubes(sets: list[tuple[str, ...]], luts: dict[str, np.ndarray], sizes: dict[str, int], packing: Packing | None):  # fmt: skip
    """mapInArrow over the encoded source: the task's cubes, summed over its chunks of
    rows, then each cube as one row of its dense counts, packed (`pack_counts`). At 1M
    source rows a task's cubes took 7.4 MB as the int64 indexes and counts of their
    non-zero cells, and moving them to the driver took about half of the job (0.45 of
    0.87 s); packed, 0.83 MB. One row per cell moved a million rows back into the JVM;
    one row per cube and chunk sent a 10M task's cells three times (measured; README)."""

    def run(batches):
        held = _zero_cubes(sets, sizes)
        for chunk in chunks(batches, CHUNK_ROWS):
            codes = {a: chunk.column(a).to_numpy() for a in luts} if packing is None else unpacked(chunk.column(KEY).to_numpy(), packing)  # fmt: skip
            recoded = {a: lut[codes[a]] for a, lut in luts.items()}
            for cols, counted in cubes(recoded, sets, sizes).items():
                held[cols] += counted.ravel()
        packed = [pack_counts(held[cols]) for cols in sets]
        yield pa.RecordBatch.from_pydict({"set": list(range(len(sets))), "counts": packed}, schema=CUBES)  # fmt: skip

    return run


def spark_counts(loaded, luts: dict[str, np.ndarray], sizes: dict[str, int]) -> CubeCounts:
    """`CubeCounts` over a Spark LoadedTable whose codes `luts` map to the release's."""
    from pyspark.sql import functions as F

    from ..engines.spark.direct import direct_frame
    from ..engines.spark.engine import spark_errors
    from ..engines.spark.schema import struct_type

    def cubes(sets: list[tuple[str, ...]]) -> dict[tuple[str, ...], np.ndarray]:
        if loaded.direct is not None:  # the tasks read the source: no JVM rows
            run = _task_cubes(sets, luts, sizes, None)
            got = direct_frame(loaded.data.sparkSession, loaded.direct, run, struct_type(CUBES))
        else:
            packed = packed_rows(loaded)
            rows, packing = packed if packed is not None else (loaded.data, None)
            got = per_core(rows).mapInArrow(_task_cubes(sets, luts, sizes, packing), struct_type(CUBES))  # fmt: skip
        out = _zero_cubes(sets, sizes)
        with spark_errors("workload counts"):
            # the cubes are bounded by the domains, not the rows: summed here rather than
            # by a Spark aggregation, which adds a shuffle and a stage; as Arrow, not as
            # pickled rows (0.10-0.16 s less at 1M rows, measured; README)
            table = got.toArrow()
        for i, blob in zip(table.column("set").to_pylist(), table.column("counts").to_pylist(), strict=True):  # fmt: skip
            out[sets[i]] += unpack_counts(blob)
        return {cols: dense.reshape([sizes[c] for c in cols]) for cols, dense in out.items()}

    def exact(q: Query) -> int:  # a set too large for a cube: one filter per query
        cond = F.lit(True)
        for a, values in q.items():
            codes = [int(i) for i in np.flatnonzero(np.isin(luts[a], list(values)))]
            cond = cond & F.col(a).isin(codes)
        with spark_errors("workload counts"):
            return int(loaded.data.where(cond).count())

    return CubeCounts(sizes, cubes, exact)


def release_space(rel, loaded):
    """The release's models and domains (attributes it leaves out: the source's), and
    the source's recoding into them and their sizes (`spark_counts`' arguments)."""
    models, domains = release_models(rel)
    domains = with_unpublished(domains, loaded)
    return models, domains, recoding(loaded, domains), {a: len(domains[a]) for a in loaded.names}


def spark_utility(engine, release: str, source: str, qd: int, p: float, queries: int, seed: int) -> Utility:  # fmt: skip
    """`vpub utility --engine spark`: the same figures as `evaluate`, the source read and
    counted by Spark."""
    rel = open_release(release)
    loaded = engine.persist(engine.load(source, table_spec_from_dict(rel.manifest["source"]["table_spec"])))  # fmt: skip
    t0 = time.perf_counter()
    kl = spark_kl(engine, rel, loaded)
    t1 = time.perf_counter()
    models, domains, luts, sizes = release_space(rel, loaded)
    wl = draw_workload(
        list(loaded.names), domains, qd, p, queries, seed, spark_counts(loaded, luts, sizes)
    )
    errors = relative_errors(models, wl, loaded.rows, domains)
    t2 = time.perf_counter()
    return Utility(kl, float(errors.mean()), float(np.median(errors)), len(errors), wl.redrawn, t1 - t0, t2 - t1)  # fmt: skip
