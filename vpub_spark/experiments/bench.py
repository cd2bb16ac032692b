"""`vpub bench publish | utility`: UAD's benchmarks, measured in one run (the other
methods: bench_methods.py; statdb and serve: bench_statdb.py).

Each takes a typed configuration (frozen dataclasses below; the CLI fills them). A
benchmark is a job that prints numbers, not a timed test: it generates the data set
once (not timed), starts Spark once (timed apart), then publishes `repeat` times per
engine, each run timed from reading the input to the committed, audited release, and
prints the median per engine, the step medians, and the spark / in-process ratio.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from ..config import PublishConfig, RandomRules
from ..datasets.presets import write_generated
from ..engines import make_engine
from ..model import PrivacySpec
from ..publish.pipeline import publish
from ..report import console
from .common import BenchTable, started_engine, timed, write_results

ENGINES = ("inprocess", "spark")


@dataclass(frozen=True)
class BenchPublish:
    """`vpub bench publish`: UAD on `rows` generated rows of `name`, per engine."""

    name: str = "sal"
    rows: int = 1_000_000
    l: int = 10
    c: int = 5
    lhs: int = 3
    seed: int = 7
    partitions: int | None = None
    repeat: int = 3
    engines: tuple[str, ...] = ENGINES
    spark_conf: str | None = None
    out: str = "out/bench"


@dataclass(frozen=True)
class BenchUtility:
    """`vpub bench utility`: KL and a query workload on a committed release."""

    release: str
    source: str
    qd: int = 3
    p: float = 0.4
    queries: int = 1000
    repeat: int = 3
    seed: int = 0
    out: str = "out/bench-utility"


def generated(name: str, rows: int, seed: int, out: Path) -> Path:
    """The benchmark's data set, generated once (not timed)."""
    data = out / f"{name}-{rows}"
    if not (data / "table.yaml").exists():
        with console.status(f"generating {rows:,} rows of {name} (not timed) ..."):
            write_generated(make_engine("inprocess"), name, rows, seed, str(data), overwrite=True)
    return data


def bench_publish(bench: BenchPublish) -> dict:
    out = Path(bench.out)
    data = generated(bench.name, bench.rows, bench.seed, out)
    base = PublishConfig(
        input_path=str(data),
        privacy=PrivacySpec("l-diversity", bench.l),
        rules=RandomRules(bench.c, bench.lhs, bench.seed),
        method="uad",
        output_path=str(out / "releases"),
        seed=bench.seed,
        partitions=bench.partitions,
        overwrite=True,
    )
    results: dict = {
        "data": bench.name,
        "rows": bench.rows,
        "l": bench.l,
        "c": bench.c,
        "lhs": bench.lhs,
        "repeat": bench.repeat,
        "engines": {},
    }
    for name in bench.engines:
        results["engines"][name] = _publish_repeatedly(bench, base, name)
    tables = [_publish_table(bench, results["engines"])]
    e = results["engines"]
    if "spark" in e and "inprocess" in e:
        results["spark_over_inprocess"] = e["spark"]["median_s"] / e["inprocess"]["median_s"]
        tables.append(_engine_ratio_table(bench, results["spark_over_inprocess"]))
    return write_results(results, out / "results.json", tables)


def _publish_repeatedly(bench: BenchPublish, base: PublishConfig, name: str) -> dict:
    """Start one engine and publish `repeat` times on it: the runs, their median, the
    start-up, the step medians and the release's partitions and tables."""
    engine, startup = started_engine(name, bench.spark_conf)
    runs, steps, manifest = [], [], None
    for i in range(bench.repeat):
        cfg = replace(base, engine=name, release_id=f"bench-{name}")
        with console.status(f"{name}: run {i + 1} of {bench.repeat} ..."):
            r, took = timed(partial(publish, cfg, engine))
        runs.append(took)
        steps.append(r.timings)
        manifest = r.manifest
    assert manifest is not None
    return {
        "median_s": statistics.median(runs),
        "runs_s": runs,
        "startup_s": startup,
        "steps_median_s": {k: statistics.median(s[k] for s in steps) for k in steps[0]},
        "partitions": manifest["partitions"],
        "tables": [(t["name"], t["kind"], len(t["attributes"])) for t in manifest["tables"]],
    }


def _publish_table(bench: BenchPublish, engines: dict) -> BenchTable:
    """`bench publish`'s table: median, start-up, rows/s and slowest step per engine."""
    t = BenchTable(
        f"publish {bench.rows:,} rows of {bench.name}, UAD, l = {bench.l}, c = {bench.c}, lhs = {bench.lhs} (median of {bench.repeat})",
        ("engine", "median (s)", "start-up (s)", "rows/s", "partitions", "slowest step"),
        left=("engine", "slowest step"),
    )
    for name, e in engines.items():
        slow = max(e["steps_median_s"].items(), key=lambda kv: kv[1])
        t.add_row(
            name,
            f"{e['median_s']:.2f}",
            f"{e['startup_s']:.1f}",
            f"{bench.rows / e['median_s']:,.0f}",
            str(e["partitions"]),
            f"{slow[0]} {slow[1]:.2f} s",
        )
    return t


def _engine_ratio_table(bench: BenchPublish, ratio: float) -> BenchTable:
    """`bench publish`'s Spark time over the in-process time, measured in the same run."""
    t = BenchTable(
        f"spark / inprocess publish time on {bench.rows:,} rows of {bench.name} (medians of {bench.repeat}, start-up excluded, same run)",
        ("engines", "time ratio"),
        left=("engines",),
    )
    t.add_row("spark / inprocess", f"{ratio:.2f}x")
    return t


def bench_utility(bench: BenchUtility) -> dict:
    """Medians of: KL divergence of a release, drawing a workload (exact answers), and
    estimating it (000 §6.1), each timed alone; the release and source read once."""
    from ..utility.evaluate import load_release_and_source
    from ..utility.kl import kl_divergence
    from ..utility.queries import relative_errors, workload

    with console.status("reading the release and its source ..."):
        _, models, domains, src = load_release_and_source(bench.release, bench.source)
    kl_s, wl_s, est_s = [], [], []
    for i in range(bench.repeat):
        with console.status(f"run {i + 1} of {bench.repeat} ..."):
            t0 = time.perf_counter()
            kl = kl_divergence(models, src, domains)
            t1 = time.perf_counter()
            wl = workload(src, domains, bench.qd, bench.p, bench.queries, bench.seed + i)
            t2 = time.perf_counter()
            errors = relative_errors(models, wl, len(src), domains)
            t3 = time.perf_counter()
        kl_s.append(t1 - t0)
        wl_s.append(t2 - t1)
        est_s.append(t3 - t2)
    results = {
        "rows": len(src),
        "kl": kl,
        "mean_relative_error": float(errors.mean()),
        "kl_median_s": statistics.median(kl_s),
        "workload_median_s": statistics.median(wl_s),
        "estimate_median_s": statistics.median(est_s),
    }
    table = _utility_table(bench, results)
    return write_results(results, Path(bench.out) / f"{Path(bench.release).name}.json", [table])


def _utility_table(bench: BenchUtility, results: dict) -> BenchTable:
    """`bench utility`'s table: each measure's result and median time."""
    t = BenchTable(
        f"utility of release {Path(bench.release).name} on its {results['rows']:,} source rows: KL and {bench.queries:,} queries (qd = {bench.qd}, p = {bench.p}), median of {bench.repeat}",
        ("measure", "result", "median (s)"),
        left=("measure", "result"),
    )
    t.add_row("KL divergence", f"{results['kl']:.4f}", f"{results['kl_median_s']:.1f}")
    t.add_row(
        "exact answers of the workload",
        f"{bench.queries:,} queries",
        f"{results['workload_median_s']:.1f}",
    )
    t.add_row(
        "estimates of the workload",
        f"mean relative error {results['mean_relative_error']:.4f}",
        f"{results['estimate_median_s']:.1f}",
    )
    return t
