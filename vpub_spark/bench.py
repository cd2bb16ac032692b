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


def started_engine(name: str, spark_conf: str | None) -> tuple[object, float]:
    """An engine, and for Spark its session start-up time (timed apart from the runs)."""
    engine = make_engine(name, SparkSettings.load(spark_conf))
    if name != "spark":
        return engine, 0.0
    t0 = time.perf_counter()
    engine.spark  # type: ignore[attr-defined]  # noqa: B018 - start the session
    return engine, time.perf_counter() - t0


def generated(name: str, rows: int, seed: int, out: Path) -> Path:
    """The benchmark's data set, generated once (not timed)."""
    data = out / f"{name}-{rows}"
    if not (data / "table.yaml").exists():
        with console.status(f"generating {rows:,} rows of {name} (not timed) ..."):
            write_generated(make_engine("inprocess"), name, rows, seed, str(data), overwrite=True)
    return data


def bench_publish(args) -> dict:
    from rich.table import Table

    out = Path(args.out)
    data = generated(args.name, args.rows, args.seed, out)
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
    results: dict = {
        "data": args.name,
        "rows": args.rows,
        "l": args.l,
        "c": args.c,
        "lhs": args.lhs,
        "repeat": args.repeat,
        "engines": {},
    }
    for name in args.engines.split(","):
        engine, startup = started_engine(name, args.spark_conf)
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
    t = Table(
        title=f"publish {args.rows:,} rows of {args.name}, UAD, l = {args.l}, c = {args.c}, lhs = {args.lhs} (median of {args.repeat})"
    )
    for c in ("engine", "median (s)", "start-up (s)", "rows/s", "partitions", "slowest step"):
        t.add_column(c, justify="left" if c in ("engine", "slowest step") else "right")
    for name, e in results["engines"].items():
        slow = max(e["steps_median_s"].items(), key=lambda kv: kv[1])
        t.add_row(
            name,
            f"{e['median_s']:.2f}",
            f"{e['startup_s']:.1f}",
            f"{args.rows / e['median_s']:,.0f}",
            str(e["partitions"]),
            f"{slow[0]} {slow[1]:.2f} s",
        )
    console.print(t)
    e = results["engines"]
    if "spark" in e and "inprocess" in e:
        results["spark_over_inprocess"] = e["spark"]["median_s"] / e["inprocess"]["median_s"]
        console.print(
            f"spark / inprocess (start-up excluded, same run): {results['spark_over_inprocess']:.2f}x"
        )
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
        "rows": len(src),
        "kl": kl,
        "mean_relative_error": float(errors.mean()),
        "kl_median_s": statistics.median(kl_s),
        "workload_median_s": statistics.median(wl_s),
        "estimate_median_s": statistics.median(est_s),
    }
    console.print(
        f"{len(src):,} rows: KL {kl:.4f} in {out['kl_median_s']:.1f} s; {args.queries:,} queries (qd = {args.qd}, p = {args.p}): "
        f"exact answers {out['workload_median_s']:.1f} s, estimates {out['estimate_median_s']:.1f} s (medians of {args.repeat})"
    )
    return out


def write_sample(source_dir: Path, rows: int, seed: int, out: Path) -> Path:
    """A seeded sample (without replacement) of a prepared data set, as its own data set."""
    from .datasets.presets import DATA, SPEC, resolve_input
    from .engines.inprocess import InProcessEngine
    from .staging import staged_directory
    from .tablespec import write_table_spec

    if not (out / SPEC).exists():
        engine = InProcessEngine()
        path, spec = resolve_input(source_dir, None)
        sample = engine.sample(engine.load(path, spec), rows, seed)
        with staged_directory(out, True) as stage:
            engine.write_decoded(sample, stage / DATA)
            write_table_spec(spec, stage / SPEC)
    return out


def bench_multi_sa(args) -> dict:
    """000 Appendix B at scale: the partitioned mode on the whole table per engine (each
    run timed from reading to the committed release), then, on a seeded sample small
    enough for the exact mode, exact vs partitioned vs UAD: time, KL, relative error
    and suppressed rows, all measured in this run."""
    from rich.table import Table

    from .config import MultiSaSettings
    from .utility.evaluate import evaluate

    out = Path(args.out)
    data = generated(args.name, args.rows, args.seed, out)
    settings = MultiSaSettings("partitioned", args.solver, args.time_limit, args.chunk_rows)
    base = PublishConfig(
        input_path=str(data), privacy=PrivacySpec("l-diversity", args.l), rules=RandomRules(args.c, args.lhs, args.seed),
        method="multi_sa_bip", output_path=str(out / "releases"), seed=args.seed, overwrite=True, multi_sa=settings,
    )  # fmt: skip
    results: dict = {
        "data": args.name,
        "rows": args.rows,
        "l": args.l,
        "c": args.c,
        "lhs": args.lhs,
        "chunk_rows": args.chunk_rows,
        "full": {},
        "sample": {},
    }
    for name in args.engines.split(","):
        engine, startup = started_engine(name, args.spark_conf)
        with console.status(f"{name}: partitioned multi-SA on {args.rows:,} rows ..."):
            t0 = time.perf_counter()
            r = publish(replace(base, engine=name, release_id=f"multi-sa-{name}"), engine)
            took = time.perf_counter() - t0
        cost = r.manifest["method_cost"]
        results["full"][name] = {"s": took, "startup_s": startup, "steps_s": r.timings} | {
            k: v for k, v in cost.items() if k != "driver_solves"
        }
    sample = write_sample(
        data, args.sample_rows, args.seed, out / f"{args.name}-sample-{args.sample_rows}"
    )
    engine = make_engine("inprocess")
    runs = {
        "multi_sa_bip exact": replace(
            base, input_path=str(sample), multi_sa=replace(settings, mode="exact")
        ),
        "multi_sa_bip partitioned": replace(base, input_path=str(sample)),
        "uad": replace(base, input_path=str(sample), method="uad"),
    }
    for label, cfg in runs.items():
        with console.status(f"sample: {label} ..."):
            t0 = time.perf_counter()
            r = publish(
                replace(cfg, engine="inprocess", release_id=f"sample-{label.replace(' ', '-')}"),
                engine,
            )
            took = time.perf_counter() - t0
            u = evaluate(
                str(r.path), str(sample / "data"), args.qd, args.p, args.queries, args.seed
            )
        cost = r.manifest.get("method_cost") or {}
        results["sample"][label] = {
            "s": took, "kl": u.kl, "relative_error": u.mean_relative_error, "suppressed_rows": cost.get("suppressed_rows", 0),
            "chunks": cost.get("chunks"), "all_optimal": cost.get("all_optimal"), "groups": sum(t.get("groups", 0) for t in r.manifest["tables"]),
        }  # fmt: skip
    t = Table(
        title=f"multi-SA (partitioned, {args.solver}, chunks of {args.chunk_rows:,} rows) on {args.rows:,} rows of {args.name}, l = {args.l}, c = {args.c}"
    )
    for c in (
        "engine",
        "time (s)",
        "start-up (s)",
        "chunks",
        "solves",
        "all optimal",
        "suppressed rows",
    ):
        t.add_column(c, justify="left" if c == "engine" else "right")
    for name, e in results["full"].items():
        t.add_row(
            name,
            f"{e['s']:.1f}",
            f"{e['startup_s']:.1f}",
            str(e["chunks"]),
            str(e["solves"]),
            str(e["all_optimal"]),
            f"{e['suppressed_rows']:,}",
        )
    console.print(t)
    t = Table(
        title=f"the same rules on a {args.sample_rows:,}-row sample (in-process; {args.queries} queries, qd = {args.qd}, p = {args.p})"
    )
    for c in ("method", "time (s)", "KL", "relative error", "groups", "suppressed rows"):
        t.add_column(c, justify="left" if c == "method" else "right")
    for label, e in results["sample"].items():
        t.add_row(
            label,
            f"{e['s']:.2f}",
            f"{e['kl']:.4f}",
            f"{e['relative_error']:.4f}",
            f"{e['groups']:,}",
            f"{e['suppressed_rows']:,}",
        )
    console.print(t)
    (out / "multi_sa.json").write_text(json.dumps(results, indent=2, default=str))
    console.print(f"results in {out / 'multi_sa.json'}")
    return results


M_SCHEMAS = [
    ["age"],
    ["age", "gender"],
    ["age", "gender", "education"],
    ["age", "gender", "education", "marital"],
    ["age", "gender", "education", "marital", "race"],
]


def bench_marginals(args) -> dict:
    """002 §4's efficiency run: M1..M5 (occupation sensitive) at m on the `census` table,
    per engine timed from reading the input to the committed, audited release and its
    private store; ANGEL (batches + one GT per marginal, in-process) timed in the same
    run on the same rows. Prints both and the ratios."""
    import shutil

    from rich.table import Table

    from .config import MarginalSettings
    from .engines.inprocess import InProcessEngine
    from .tablespec import load_table_spec
    from .utility.generalized import angel_batches, angel_tables

    out = Path(args.out)
    data = generated("census", args.rows, args.seed, out)
    state = out / "private" / "census-store"
    qi = tuple(dict.fromkeys(a for s in M_SCHEMAS for a in s))
    base = PublishConfig(
        input_path=str(data), privacy=PrivacySpec("m-invariance", None, args.m), rules=(), method="marginals",
        output_path=str(out / "releases"), seed=args.seed, overwrite=True,
        marginals=MarginalSettings("occupation", tuple(tuple(s) for s in M_SCHEMAS), str(state), qi, args.chunk_rows),
    )  # fmt: skip
    results: dict = {"rows": args.rows, "m": args.m, "chunk_rows": args.chunk_rows, "engines": {}}
    for name in args.engines.split(","):
        engine, startup = started_engine(name, args.spark_conf)
        shutil.rmtree(state, ignore_errors=True)
        with console.status(f"{name}: marginals M1..M5 on {args.rows:,} rows ..."):
            t0 = time.perf_counter()
            r = publish(replace(base, engine=name, release_id=f"marginals-{name}"), engine)
            took = time.perf_counter() - t0
        results["engines"][name] = {
            "s": took,
            "startup_s": startup,
            "steps_s": r.timings,
        } | r.manifest["method_cost"]
    with console.status("ANGEL: batches and five GTs (in-process) ..."):
        t0 = time.perf_counter()
        loaded = InProcessEngine().load(str(data / "data"), load_table_spec(data / "table.yaml"))
        read = time.perf_counter() - t0
        frame, sizes = loaded.data, {a: loaded.dictionaries[a].size for a in loaded.names}
        extents = {a: sizes[a] - 1 for a in qi}
        s = frame["occupation"].to_numpy()
        t1 = time.perf_counter()
        batch = angel_batches(frame[list(qi)], s, args.m, extents)
        for attrs in M_SCHEMAS:
            angel_tables(frame[list(qi)], attrs, s, args.m, extents, batch)
        angel = time.perf_counter() - t1
    results["angel"] = {"s": angel, "read_s": read}
    t = Table(
        title=f"m-invariant marginals M1..M5 of {args.rows:,} census rows, m = {args.m} (one run each)"
    )
    for c in (
        "run",
        "end to end (s)",
        "start-up (s)",
        "bucketize+decompose+write (s)",
        "chunks",
        "vs ANGEL",
    ):
        t.add_column(c, justify="left" if c == "run" else "right")
    for name, e in results["engines"].items():
        core = e["steps_s"].get("bucketize, decompose and write", float("nan"))
        t.add_row(
            f"ours, {name}",
            f"{e['s']:.1f}",
            f"{e['startup_s']:.1f}",
            f"{core:.1f}",
            str(e["chunks"]),
            f"{core / angel:.0%} (core) / {e['s'] / (angel + read):.0%} (end to end)",
        )
    t.add_row(
        "ANGEL, in-process",
        f"{angel + read:.1f}",
        "-",
        f"{angel:.1f} (batches + 5 GTs)",
        "-",
        "100%",
    )
    console.print(t)
    (out / "marginals.json").write_text(json.dumps(results, indent=2, default=str))
    console.print(f"results in {out / 'marginals.json'}")
    return results
