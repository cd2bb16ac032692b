"""`vpub bench update`: a store's next version against a full build (statdb/update.py), a
job that prints numbers.

A generated `sal` table with a record identifier (`pid`) of `rows` rows is built into a
store in process (timed: the full build), then a snapshot with `churn` of its records
replaced (half deleted, half inserted, drawn from the same generator with another seed)
updates it (timed), once with counterfeits-only balancing (ours), once from the change
set that snapshot makes (the records inserted, the identifiers deleted), and once, on a copy,
with m-invariance's filling of shortfalls by inserts (the paper's algorithm, for its
counterfeit count only: it is not safe, see kernels/dynamic.py). Then one 004 §9
workload is answered on version 1 and on version 2, the versions alternating query by
query (median latency each)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .common import BenchTable, timed, write_results

KEY = "pid"


@dataclass(frozen=True)
class BenchUpdate:
    rows: int = 6_000_000
    churn: float = 0.01
    m: int = 10
    queries: int = 500
    seed: int = 7
    out: str = "out/bench-update"


def _write(table: pa.Table, directory: Path) -> str:
    """A data directory the loaders read: data/part-0.parquet and table.yaml."""
    from vpub_spark.datasets.synthetic import table_spec
    from vpub_spark.tablespec import write_table_spec

    (directory / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / "data" / "part-0.parquet", row_group_size=1 << 20)
    write_table_spec(table_spec("sal"), directory / "table.yaml")
    return str(directory)


def _sal(rows: int, seed: int, first_id: int) -> pa.Table:
    """`rows` generated `sal` rows with identifiers first_id, first_id + 1, ..."""
    from vpub_spark.datasets.synthetic import blocks, generate_block

    batches = [generate_block("sal", seed, rows, b) for b in range(blocks(rows))]
    t = pa.Table.from_batches(batches)
    return t.append_column(KEY, pa.array(np.arange(first_id, first_id + rows, dtype=np.int64)))


def _snapshots(bench: BenchUpdate, work: Path) -> tuple[str, str, str, str]:
    """(version 1's data, the next snapshot's, its change set: the records inserted,
    the identifiers deleted)."""
    first = _sal(bench.rows, bench.seed, 0)
    half = int(bench.rows * bench.churn / 2)
    rng = np.random.default_rng(bench.seed)
    keep = np.ones(bench.rows, dtype=bool)
    keep[rng.choice(bench.rows, half, replace=False)] = False
    new = _sal(half, bench.seed + 1, bench.rows)
    nxt = pa.concat_tables([first.filter(pa.array(keep)), new])
    gone = first.filter(pa.array(~keep)).select([KEY])
    (work / "deletes" / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(gone, work / "deletes" / "data" / "part-0.parquet")
    v1, v2, ups = (_write(t, work / d) for t, d in ((first, "v1"), (nxt, "v2"), (new, "upserts")))
    return v1, v2, ups, str(work / "deletes")


def bench_update(bench: BenchUpdate) -> dict:
    from vpub_spark.config import config_from_dict
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.statdb.build import build_store
    from vpub_spark.statdb.update import Changes, update_store

    work = Path(bench.out)
    shutil.rmtree(work / "data", ignore_errors=True)
    v1, v2, ups, dels = _snapshots(bench, work / "data")
    state, paper, delta = (work / "data" / d for d in ("store", "store-paper", "store-delta"))
    qi = ["age", "gender", "marital", "birthplace", "education", "occupation", "race"]
    cfg = config_from_dict(
        {
            "input": {"path": v1},
            "privacy": {"model": "m-invariance", "m": bench.m},
            "engine": "inprocess",
            "marginals": {"sensitive": "salary", "qi": qi, "state": str(state), "key": KEY},
        }
    )
    built, build_s = timed(lambda: build_store(cfg, InProcessEngine()))
    shutil.copytree(state, paper)
    shutil.copytree(state, delta)
    ours, update_s = timed(lambda: update_store(state, v2))
    by_changes, changes_s = timed(lambda: update_store(delta, Changes(upserts=ups, deletes=dels)))
    theirs, paper_s = timed(lambda: update_store(paper, v2, fill="inserts"))
    shutil.rmtree(paper)
    shutil.rmtree(delta)
    latency = _latency(state, bench)
    results = {
        "rows": bench.rows,
        "churn": bench.churn,
        "m": bench.m,
        "deleted": ours.deleted,
        "inserted": ours.inserted,
        "build_s": build_s,
        "build_steps": built.timings,
        "update_s": update_s,
        "update_steps": ours.timings,
        "changes_update_s": changes_s,
        "changes_update_steps": by_changes.timings,
        "counterfeits": ours.counterfeits,
        "paper_update_s": paper_s,
        "paper_counterfeits": theirs.counterfeits,
        "query_p50_ms": latency,
    }
    return write_results(results, work / "update.json", _tables(results))


def _latency(state: Path, bench: BenchUpdate) -> dict[str, float]:
    """Median dyn-ana latency per query on versions 1 and 2, alternating."""
    from vpub_spark.statdb.db import StatDB
    from vpub_spark.statdb.workload import workload

    db = StatDB.open(state)
    sizes = {a: len(v) for a, v in db.domains.items()}
    queries = workload(sizes, db.qi, db.sensitive, 2, 0.06, bench.queries, bench.seed)
    times: dict[int, list[float]] = {1: [], 2: []}
    for v in (1, 2):
        db.bucketization(v)  # read once, before timing
    for q in queries:
        for v in (1, 2):
            times[v].append(timed(partial(db.count, q, version=v, log=False))[1])
    return {f"v{v}": 1000 * float(np.median(t)) for v, t in times.items()}


def _tables(r: dict) -> list[BenchTable]:
    t = BenchTable(
        f"An update with {r['churn']:.0%} churn ({r['deleted']:,} deleted, {r['inserted']:,} inserted) of a {r['rows']:,}-row `sal` store (m = {r['m']}), in process",
        ("measure", "value"),
        left=("measure",),
    )
    t.add_row("full build (s)", f"{r['build_s']:.2f}")
    t.add_row("update (s)", f"{r['update_s']:.2f}")
    t.add_row("update / full build", f"{r['update_s'] / r['build_s']:.1%}")
    for step, s in r["update_steps"].items():
        t.add_row(f"  update: {step} (s)", f"{s:.2f}")
    t.add_row("update from the change set (s)", f"{r['changes_update_s']:.2f}")
    t.add_row("change set / full build", f"{r['changes_update_s'] / r['build_s']:.1%}")
    for step, s in r["changes_update_steps"].items():
        t.add_row(f"  change set: {step} (s)", f"{s:.2f}")
    per = r["counterfeits"] / max(r["deleted"], 1)
    t.add_row(
        "counterfeits (ours: shortfalls by counterfeits)",
        f"{r['counterfeits']:,} ({per:.2f} per deleted tuple, {r['counterfeits'] / r['rows']:.3%} of the rows)",
    )
    paper = r["paper_counterfeits"]
    t.add_row(
        "counterfeits (m-invariance's filling by inserts)",
        f"{paper:,} ({paper / max(r['deleted'], 1):.2f} per deleted tuple)",
    )
    q = r["query_p50_ms"]
    t.add_row("query p50, version 1 (ms)", f"{q['v1']:.2f}")
    t.add_row("query p50, version 2 (ms)", f"{q['v2']:.2f}")
    t.add_row("version 2 / version 1", f"{q['v2'] / q['v1']:.2f}")
    return [t]
