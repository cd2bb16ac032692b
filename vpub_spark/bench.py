"""`vpub bench publish`: end-to-end publish times per engine, measured in one run.

A benchmark is a job that prints numbers (DEVELOPERS.md): it generates the data set
once (not timed), starts Spark once (timed apart), then publishes `repeat` times per
engine, each run timed from reading the input to the committed, audited release, and
prints the median per engine, the step medians, and the spark / in-process ratio.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from .config import PublishConfig, RandomRules
from .datasets.presets import write_generated
from .engines import make_engine
from .engines.spark.session import SparkSettings
from .model import PrivacySpec
from .release.writer import publish
from .report import console


def bench_publish(args) -> dict:
    from rich.table import Table

    out = Path(args.out)
    data = out / f"{args.name}-{args.rows}"
    if not (data / "table.yaml").exists():
        with console.status(f"generating {args.rows:,} rows of {args.name} (not timed) ..."):
            write_generated(make_engine("inprocess"), args.name, args.rows, args.seed, str(data), overwrite=True)
    base = PublishConfig(
        input_path=str(data),
        privacy=PrivacySpec("l-diversity", args.l),
        rules=RandomRules(args.c, args.lhs, args.seed),
        method="uad",
        output_path=str(out / "releases"),
        seed=args.seed,
        partitions=args.partitions,
        overwrite=True,
    )
    results: dict = {"data": args.name, "rows": args.rows, "l": args.l, "c": args.c, "lhs": args.lhs, "repeat": args.repeat, "engines": {}}
    for name in args.engines.split(","):
        engine = make_engine(name, SparkSettings.load(args.spark_conf))
        startup = 0.0
        if name == "spark":
            t0 = time.perf_counter()
            engine.spark  # noqa: B018 - session start-up, timed apart
            startup = time.perf_counter() - t0
        runs, steps, manifest = [], [], None
        for i in range(args.repeat):
            cfg = replace(base, engine=name, release_id=f"bench-{name}")
            with console.status(f"{name}: run {i + 1} of {args.repeat} ..."):
                t0 = time.perf_counter()
                r = publish(cfg, engine)
                runs.append(time.perf_counter() - t0)
            steps.append(r.timings)
            manifest = r.manifest
        assert manifest is not None
        results["engines"][name] = {
            "median_s": statistics.median(runs),
            "runs_s": runs,
            "startup_s": startup,
            "steps_median_s": {k: statistics.median(s[k] for s in steps) for k in steps[0]},
            "partitions": manifest["partitions"],
            "tables": [(t["name"], t["kind"], len(t["attributes"])) for t in manifest["tables"]],
        }
    t = Table(title=f"publish {args.rows:,} rows of {args.name}, UAD, l = {args.l}, c = {args.c}, lhs = {args.lhs} (median of {args.repeat})")
    for c in ("engine", "median (s)", "start-up (s)", "rows/s", "partitions", "slowest step"):
        t.add_column(c, justify="left" if c in ("engine", "slowest step") else "right")
    for name, e in results["engines"].items():
        slow = max(e["steps_median_s"].items(), key=lambda kv: kv[1])
        t.add_row(name, f"{e['median_s']:.2f}", f"{e['startup_s']:.1f}", f"{args.rows / e['median_s']:,.0f}", str(e["partitions"]), f"{slow[0]} {slow[1]:.2f} s")
    console.print(t)
    e = results["engines"]
    if "spark" in e and "inprocess" in e:
        results["spark_over_inprocess"] = e["spark"]["median_s"] / e["inprocess"]["median_s"]
        console.print(f"spark / inprocess (start-up excluded, same run): {results['spark_over_inprocess']:.2f}x")
    (out / "results.json").write_text(json.dumps(results, indent=2))
    console.print(f"results in {out / 'results.json'}")
    return results


def bench_utility(args) -> dict:
    """Medians of: KL divergence of a release, drawing a workload (exact answers), and
    estimating it (000 §6.1), each timed alone; the release and source read once."""
    from .utility.evaluate import load_release_and_source
    from .utility.kl import kl_divergence
    from .utility.queries import relative_errors, workload

    with console.status("reading the release and its source ..."):
        _, models, domains, src = load_release_and_source(args.release, args.source)
    kl_s, wl_s, est_s = [], [], []
    for i in range(args.repeat):
        with console.status(f"run {i + 1} of {args.repeat} ..."):
            t0 = time.perf_counter()
            kl = kl_divergence(models, src, domains)
            t1 = time.perf_counter()
            wl = workload(src, domains, args.qd, args.p, args.queries, args.seed + i)
            t2 = time.perf_counter()
            errors = relative_errors(models, wl, len(src), domains)
            t3 = time.perf_counter()
        kl_s.append(t1 - t0)
        wl_s.append(t2 - t1)
        est_s.append(t3 - t2)
    out = {
        "rows": len(src), "kl": kl, "mean_relative_error": float(errors.mean()),
        "kl_median_s": statistics.median(kl_s), "workload_median_s": statistics.median(wl_s), "estimate_median_s": statistics.median(est_s),
    }
    console.print(
        f"{len(src):,} rows: KL {kl:.4f} in {out['kl_median_s']:.1f} s; {args.queries:,} queries (qd = {args.qd}, p = {args.p}): "
        f"exact answers {out['workload_median_s']:.1f} s, estimates {out['estimate_median_s']:.1f} s (medians of {args.repeat})"
    )
    return out
