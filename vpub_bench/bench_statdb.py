"""`vpub bench statdb | serve`: the statistical database's benchmarks (004 §9 workloads),
through the Python API and through `vpub serve` on loopback; jobs that print numbers."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from vpub_spark.report import console

from .common import BenchTable, optional, timed, write_results


@dataclass(frozen=True)
class BenchStatdb:
    """`vpub bench statdb`: a 004 §9 workload answered from a store, per method."""

    store: str
    queries: int = 2000
    lam: int = 2  # 004 Table 4's defaults (lambda = 2, ql = 6%)
    ql: float = 0.06
    seed: int = 1
    out: str = "out/bench-statdb"


def bench_statdb(bench: BenchStatdb) -> dict:
    """Opens the store (timed), then answers the same workload with dyn-ana and dyn-gen
    through the Python API: p50 / p99 per query, the mean interval length, and how
    many intervals hold the true count (all must)."""
    from vpub_spark.statdb.db import StatDB
    from vpub_spark.statdb.workload import workload

    db, opened = timed(lambda: StatDB.open(bench.store))
    sizes = {a: len(v) for a, v in db.domains.items()}
    queries = workload(sizes, db.qi, db.sensitive, bench.lam, bench.ql, bench.queries, bench.seed)
    results: dict = {
        "store": Path(bench.store).name,
        "rows": db.rows,
        "open_s": opened,
        "queries": len(queries),
        "lambda": bench.lam,
        "ql": bench.ql,
        "methods": {
            method: _answer_timed(db, queries, method) for method in ("dyn-ana", "dyn-gen")
        },
    }
    return _write_store_results(results, bench.out, _statdb_table(bench, results))


def _answer_timed(db, queries: list, method: str) -> dict:
    """Answer each query with `method`, timed alone: p50 / p99, the mean interval length
    and how many intervals hold the true count."""
    import numpy as np

    times, lengths, held = [], [], 0
    for q in queries:
        answer, took = timed(partial(db.count, q, method))
        truth = int((db.bucketization().qi_ok(q) & np.isin(db.values, list(q.sensitive))).sum())
        times.append(took)
        lengths.append(answer.high - answer.low)
        held += answer.low <= truth <= answer.high
    return {
        "p50_ms": 1000 * float(np.median(times)),
        "p99_ms": 1000 * float(np.percentile(times, 99)),
        "mean_interval_length": float(np.mean(lengths)),
        "held_the_truth": held,
    }


def _statdb_table(bench: BenchStatdb, results: dict) -> BenchTable:
    """`bench statdb`'s table: per method, the latency per query and the intervals."""
    t = BenchTable(
        f"004 §9 workload through the Python API on store {results['store']} ({results['rows']:,} rows, opened in {results['open_s']:.2f} s): {results['queries']} queries, lambda = {bench.lam}, ql = {bench.ql:.0%}, seed {bench.seed}",
        (
            "method",
            "p50 (ms)",
            "p99 (ms)",
            "mean interval length",
            "intervals holding the true count",
        ),
        left=("method",),
    )
    for method, r in results["methods"].items():
        t.add_row(
            method,
            f"{r['p50_ms']:.1f}",
            f"{r['p99_ms']:.1f}",
            f"{r['mean_interval_length']:,.1f}",
            f"{r['held_the_truth']} of {results['queries']}",
        )
    return t


@dataclass(frozen=True)
class BenchServe:
    """`vpub bench serve`: `vpub serve --workers W` in its own process on loopback, and
    `clients` concurrent clients (keep-alive connections, one asyncio load generator)
    sending a 004 §9 workload twice: paced at `rate` queries/s in all, then closed-loop
    (each client sends its next query when the answer arrives)."""

    store: str
    clients: int = 50
    queries: int = 5000
    rate: float = 500.0
    workers: int = 2
    method: str = "dyn-ana"
    lam: int = 2
    ql: float = 0.06
    seed: int = 1
    port: int = 18_081
    out: str = "out/bench-serve"


async def _load(
    url: str, bodies: list[bytes], clients: int, rate: float | None
) -> tuple[list[float], list[dict], float]:
    """Latency (s) and answer per body, and the wall time. Paced (`rate` queries/s):
    query i is due at i / rate and its latency runs from then (no coordinated
    omission: a late answer also delays what was due behind it). Closed (`rate` None):
    from its sending."""
    import asyncio

    aiohttp = optional("aiohttp")

    latency: list[float] = [0.0] * len(bodies)
    answers: list[dict] = [{}] * len(bodies)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:
        start = time.perf_counter()

        async def client(k: int) -> None:
            for i in range(k, len(bodies), clients):
                due = start + i / rate if rate else time.perf_counter()
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                async with session.post(url, data=bodies[i], headers=headers) as r:
                    answers[i] = await r.json()
                latency[i] = time.perf_counter() - due

        await asyncio.gather(*(client(k) for k in range(clients)))
        return latency, answers, time.perf_counter() - start


def _phase(latency: list[float], answers: list[dict], wall: float, truth) -> dict:
    import numpy as np

    lat = 1000 * np.array(latency)
    right = sum(
        (a.get("lower"), a.get("upper")) == (x.low, x.high)
        for x, a in zip(truth, answers, strict=True)
    )
    got = {
        "queries": len(answers),
        "p50_ms": float(np.median(lat)),
        "p99_ms": float(np.percentile(lat, 99)),
        "queries_per_s": len(answers) / wall,
        "equal_to_library": right,
    }
    return got


def bench_serve(bench: BenchServe) -> dict:
    """Both phases against one server; every answer checked against the library."""
    import asyncio
    import subprocess

    from vpub_spark.statdb.db import StatDB

    db = StatDB.open(bench.store)
    texts, bodies, truth = _serve_workload(db, bench)
    url = f"http://127.0.0.1:{bench.port}"
    server = subprocess.Popen(_serve_command(bench), stdout=subprocess.DEVNULL)
    results: dict = {
        "store": Path(bench.store).name,
        "rows": db.rows,
        "clients": bench.clients,
        "workers": bench.workers,
        "method": bench.method,
        "rate": bench.rate,
    }
    try:
        _wait_for(url + "/health", server)
        asyncio.run(
            _load(url + "/statdb/count", bodies[: 4 * bench.clients], bench.clients, None)
        )  # warm-up
        with console.status(
            f"{bench.clients} clients: {len(texts):,} queries paced, then closed loop ..."
        ):
            results["paced"] = _phase(
                *asyncio.run(_load(url + "/statdb/count", bodies, bench.clients, bench.rate)), truth
            )
            results["closed"] = _phase(
                *asyncio.run(_load(url + "/statdb/count", bodies, bench.clients, None)), truth
            )
    finally:
        server.terminate()
        server.wait(20)
    return _write_store_results(results, bench.out, _serve_table(bench, results, len(texts)))


def _serve_table(bench: BenchServe, results: dict, queries: int) -> BenchTable:
    """`bench serve`'s table: per phase, the latency, the throughput and the answers
    equal to the library's."""
    t = BenchTable(
        f"vpub serve on loopback, store {results['store']} ({results['rows']:,} rows): {queries:,} {bench.method} queries per phase, {bench.clients} clients, {bench.workers} server process(es)",
        ("phase", "p50 (ms)", "p99 (ms)", "queries/s", "equal to the library"),
        left=("phase",),
    )
    phases = {
        "paced": f"paced at {bench.rate:,.0f} queries/s",
        "closed": "closed loop (as fast as answers come)",
    }
    for key, name in phases.items():
        got = results[key]
        t.add_row(
            name,
            f"{got['p50_ms']:.1f}",
            f"{got['p99_ms']:.1f}",
            f"{got['queries_per_s']:,.0f}",
            f"{got['equal_to_library']:,} of {got['queries']:,}",
        )
    return t


def _serve_workload(db, bench: BenchServe) -> tuple[list[str], list[bytes], list]:
    """The workload's `--where` texts, their request bodies and the library's answers."""
    from vpub_spark.statdb.db import where_text
    from vpub_spark.statdb.workload import workload

    sizes = {a: len(v) for a, v in db.domains.items()}
    texts = [
        where_text(db.meta, q)
        for q in workload(
            sizes, db.qi, db.sensitive, bench.lam, bench.ql, bench.queries, bench.seed
        )
    ]
    bodies = [json.dumps({"where": t, "method": bench.method}).encode() for t in texts]
    truth = [db.count(t, bench.method, log=False) for t in texts]
    return texts, bodies, truth


def _serve_command(bench: BenchServe) -> list[str]:
    """The `vpub serve` command line the benchmark starts (no rate limit)."""
    import sys

    return [
        sys.executable,
        "-m",
        "vpub_spark.cli",
        "serve",
        "--store",
        bench.store,
        "--port",
        str(bench.port),
        "--rate",
        "0",
        "--workers",
        str(bench.workers),
    ]


def _write_store_results(results: dict, out_dir: str, table: BenchTable) -> dict:
    """Print a store benchmark's table and write it with its results to
    <out_dir>/<store>.json (`write_results`); the results as written."""
    return write_results(results, Path(out_dir) / f"{results['store']}.json", [table])


def _wait_for(url: str, server, seconds: float = 60) -> None:
    import urllib.request

    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"vpub serve exited with {server.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"vpub serve did not answer {url} within {seconds:.0f} s")
