"""`vpub bench statdb | serve`: the statistical database's benchmarks (004 §9 workloads),
through the Python API and through `vpub serve` on loopback; jobs that print numbers."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..report import console
from .common import timed


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
    import numpy as np

    from ..kernels.statdb import qi_mask
    from ..statdb.db import StatDB
    from ..statdb.workload import workload

    db, opened = timed(lambda: StatDB.open(bench.store))
    sizes = {a: len(v) for a, v in db.domains.items()}
    queries = workload(sizes, db.qi, db.sensitive, bench.lam, bench.ql, bench.queries, bench.seed)
    results: dict = {"store": Path(bench.store).name, "rows": len(db.values), "open_s": opened, "queries": len(queries), "lambda": bench.lam, "ql": bench.ql, "methods": {}}  # fmt: skip
    for method in ("dyn-ana", "dyn-gen"):
        times, lengths, held = [], [], 0
        for q in queries:
            answer, took = timed(partial(db.count, q, method))
            truth = int(
                (
                    qi_mask(db.codes, q.ranges, len(db.values))
                    & np.isin(db.values, list(q.sensitive))
                ).sum()
            )
            times.append(took)
            lengths.append(answer.high - answer.low)
            held += answer.low <= truth <= answer.high
        results["methods"][method] = {
            "p50_ms": 1000 * float(np.median(times)), "p99_ms": 1000 * float(np.percentile(times, 99)),
            "mean_interval_length": float(np.mean(lengths)), "held_the_truth": held,
        }  # fmt: skip
        r = results["methods"][method]
        console.print(f"{method}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms; mean interval length {r['mean_interval_length']:,.1f}; {held} of {len(queries)} intervals hold the true count")  # fmt: skip
    console.print(f"{results['rows']:,} rows; store opened in {opened:.2f} s; {len(queries)} queries, lambda = {bench.lam}, ql = {bench.ql:.0%}, seed {bench.seed}")  # fmt: skip
    out = Path(bench.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{results['store']}.json").write_text(json.dumps(results, indent=2))
    console.print(f"results in {out / (results['store'] + '.json')}")
    return results


@dataclass(frozen=True)
class BenchServe:
    """`vpub bench serve`: `vpub serve` in its own process on loopback, `clients`
    concurrent clients sending a 004 §9 workload; latency p50 / p99 and throughput."""

    store: str
    clients: int = 50
    queries: int = 2000
    method: str = "dyn-ana"
    lam: int = 2
    ql: float = 0.06
    seed: int = 1
    port: int = 18_081
    out: str = "out/bench-serve"


def bench_serve(bench: BenchServe) -> dict:
    """Each request timed from sending to the parsed answer (a new connection each, as
    a browser's form would); every answer checked against the library."""
    import subprocess
    import sys
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from ..statdb.db import StatDB, where_text
    from ..statdb.workload import workload

    db = StatDB.open(bench.store)
    sizes = {a: len(v) for a, v in db.domains.items()}
    texts = [where_text(db.meta, q) for q in workload(sizes, db.qi, db.sensitive, bench.lam, bench.ql, bench.queries, bench.seed)]  # fmt: skip
    url = f"http://127.0.0.1:{bench.port}"
    server = subprocess.Popen([sys.executable, "-m", "vpub_spark.cli", "serve", "--store", bench.store, "--port", str(bench.port)], stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_for(url + "/health", server)

        def ask(text: str) -> tuple[float, dict]:
            body = json.dumps({"where": text, "method": bench.method}).encode()
            t0 = time.perf_counter()
            with urllib.request.urlopen(urllib.request.Request(url + "/statdb/count", body, method="POST"), timeout=60) as r:  # fmt: skip
                answer = json.loads(r.read())
            return time.perf_counter() - t0, answer

        t0 = time.perf_counter()
        with ThreadPoolExecutor(bench.clients) as pool:
            got = list(pool.map(ask, texts))
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(10)
    lat = np.array([s for s, _ in got])
    truth = [db.count(t, bench.method, log=False) for t in texts]
    right = sum((a["lower"], a["upper"]) == (x.low, x.high) for x, (_, a) in zip(truth, got, strict=True))  # fmt: skip
    results = {"store": Path(bench.store).name, "clients": bench.clients, "queries": len(texts), "method": bench.method,
               "p50_ms": 1000 * float(np.median(lat)), "p99_ms": 1000 * float(np.percentile(lat, 99)),
               "queries_per_s": len(texts) / wall, "equal_to_library": right}  # fmt: skip
    console.print(f"{len(texts):,} {bench.method} queries, {bench.clients} clients: p50 {results['p50_ms']:.1f} ms, p99 {results['p99_ms']:.1f} ms, {results['queries_per_s']:,.0f} queries/s; {right} of {len(texts)} equal to the library")  # fmt: skip
    out = Path(bench.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{results['store']}.json").write_text(json.dumps(results, indent=2))
    return results


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
