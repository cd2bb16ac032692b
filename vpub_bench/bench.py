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

from vpub_spark.config import PublishConfig, RandomRules
from vpub_spark.datasets.presets import write_generated
from vpub_spark.engines import make_engine
from vpub_spark.model import PrivacySpec
from vpub_spark.publishing.pipeline import publish
from vpub_spark.report import console

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
    workers: tuple[int, ...] = ()  # the in-process worker counts to run (default: all cores)
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
    results["engines"] = _publish_rounds(bench, base)
    tables = [_publish_table(bench, results["engines"]), _steps_table(bench, results["engines"])]
    e = results["engines"]
    if "spark" in e and "inprocess" in e:
        results["spark_over_inprocess"] = e["spark"]["median_s"] / e["inprocess"]["median_s"]
        tables.append(_engine_ratio_table(bench, results["spark_over_inprocess"]))
    if len(bench.workers) > 1:
        results["speed_up"] = _speed_ups(e, bench.workers)
        tables.append(_speed_up_table(bench, results["speed_up"]))
    return write_results(results, out / "results.json", tables)


def variants(
    engines: tuple[str, ...], workers: tuple[int, ...]
) -> dict[str, tuple[str, int | None]]:
    """label -> (engine, in-process workers): one per engine, one per worker count of
    the in-process engine when there are several."""
    out: dict[str, tuple[str, int | None]] = {}
    for name in engines:
        counts: tuple[int, ...] = workers if name == "inprocess" else ()
        if len(counts) <= 1:
            out[name] = (name, counts[0] if counts else None)
        else:
            out |= {f"inprocess, {w} workers": (name, w) for w in counts}
    return out


def _publish_rounds(bench: BenchPublish, base: PublishConfig) -> dict:
    """Every variant started once, then `repeat` rounds, each publishing once with every
    variant in turn (a noisy spell hits all alike): per variant its runs, median,
    start-up, step medians, workers, partitions and tables."""
    todo = variants(bench.engines, bench.workers)
    started = {
        label: started_engine(name, bench.spark_conf, workers)
        for label, (name, workers) in todo.items()
    }
    runs: dict[str, list] = {label: [] for label in todo}
    for i in range(bench.repeat):
        for label, (name, _) in todo.items():
            cfg = replace(base, engine=name, release_id=f"bench-{name}")
            with console.status(f"{label}: run {i + 1} of {bench.repeat} ..."):
                r, took = timed(partial(publish, cfg, started[label][0]))
            runs[label].append((took, r.timings, r.manifest))
    return {label: _summary(runs[label], *started[label]) for label in todo}


def _summary(runs: list, engine, startup: float) -> dict:
    manifest = runs[-1][2]
    steps = [t for _, t, _ in runs]
    return {
        "median_s": statistics.median(took for took, _, _ in runs),
        "runs_s": [took for took, _, _ in runs],
        "startup_s": startup,
        "workers": getattr(engine, "workers", None),
        "steps_median_s": {k: statistics.median(s[k] for s in steps) for k in steps[0]},
        "partitions": manifest["partitions"],
        "tables": [(t["name"], t["kind"], len(t["attributes"])) for t in manifest["tables"]],
    }


def _speed_ups(engines: dict, workers: tuple[int, ...]) -> dict:
    """Per worker count, in all and per step: the fewest workers' median over its own."""
    base = engines[f"inprocess, {min(workers)} workers"]
    out = {}
    for w in workers:
        e = engines[f"inprocess, {w} workers"]
        steps = {k: base["steps_median_s"][k] / v for k, v in e["steps_median_s"].items() if v}
        out[str(w)] = {"total": base["median_s"] / e["median_s"], "steps": steps}
    return out


def _steps_table(bench: BenchPublish, engines: dict) -> BenchTable:
    return rows_per_step(
        f"rows/s per step, {bench.rows:,} rows of {bench.name} (medians of {bench.repeat})",
        bench.rows,
        {label: e["steps_median_s"] for label, e in engines.items()},
    )


def rows_per_step(title: str, rows: int, steps: dict[str, dict[str, float]]) -> BenchTable:
    """Rows per second of every step (but the rules'), per engine (and worker count)."""
    names = [k for k in next(iter(steps.values())) if k != "rules and schema"]
    t = BenchTable(title, ("engine", *names), left=("engine",))
    for label, took in steps.items():
        t.add_row(label, *(f"{rows / max(took[k], 1e-9):,.0f}" for k in names))
    return t


def _speed_up_table(bench: BenchPublish, speed_up: dict) -> BenchTable:
    """The speed-up of the whole publish and of each step over the fewest workers."""
    first = next(iter(speed_up.values()))["steps"]
    t = BenchTable(
        f"speed-up over {min(bench.workers)} worker(s), in process, {bench.rows:,} rows (ratios of medians, same run)",
        ("workers", "total", *first),
        left=("workers",),
    )
    for w, r in speed_up.items():
        t.add_row(w, f"{r['total']:.2f}x", *(f"{r['steps'].get(k, 0):.2f}x" for k in first))
    return t


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
    from vpub_spark.utility.evaluate import load_release_and_source
    from vpub_spark.utility.kl import kl_divergence
    from vpub_spark.utility.queries import relative_errors, workload

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
