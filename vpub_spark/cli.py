"""The `vpub` command (DESIGN.md §2). Every subcommand calls the library; user errors
print one clear line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import __version__
from .errors import SpecError, VpubError


def _engine(args):
    from .engines import make_engine
    from .engines.spark.session import SparkSettings

    return make_engine(args.engine, SparkSettings.load(args.spark_conf))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=["spark", "inprocess"],
        default="spark",
        help="execution engine (default: spark)",
    )
    p.add_argument(
        "--spark-conf", default=None, help="Spark settings YAML (default: local[*], 4g driver)"
    )


# --- datasets --------------------------------------------------------------------
def cmd_datasets_adult(args) -> int:
    from .datasets.presets import write_adult
    from .report import console

    with console.status("reading and generalizing Adult ..."):
        w = write_adult(_engine(args), args.path, args.out, args.sample, args.seed, args.overwrite)
    console.print(
        f"wrote {w.rows} rows × {len(w.spec.attributes)} attributes to {w.path} ({w.dropped} rows with missing values dropped)"
    )
    return 0


def cmd_datasets_generate(args) -> int:
    from rich.progress import Progress

    from .datasets.presets import write_generated
    from .report import console

    engine = _engine(args)
    startup = 0.0
    if args.engine == "spark":
        with console.status("starting Spark ..."):
            t0 = time.perf_counter()
            engine.spark  # noqa: B018 - start the session outside the timed part
            startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    if args.engine == "inprocess":
        with Progress(console=console) as bar:
            task = bar.add_task(f"generating {args.name}", total=args.rows)
            w = write_generated(
                engine,
                args.name,
                args.rows,
                args.seed,
                args.out,
                args.overwrite,
                lambda n: bar.advance(task, n),
            )
    else:
        with console.status(f"generating {args.rows:,} rows of {args.name} with Spark ..."):
            w = write_generated(engine, args.name, args.rows, args.seed, args.out, args.overwrite)
    dt = time.perf_counter() - t0
    console.print(
        f"wrote {w.rows:,} rows of {args.name} to {w.path} in {dt:.1f} s ({w.rows / dt:,.0f} rows/s)"
        + (f"; Spark start-up {startup:.1f} s before that" if startup else "")
    )
    return 0


# --- profile / rules / gnf --------------------------------------------------------
def _load(args):
    from .datasets.presets import resolve_input

    path, spec = resolve_input(args.input, args.table)
    return _engine(args).load(path, spec)


def cmd_profile(args) -> int:
    from .report import console, profile_table

    loaded = _load(args)
    console.print(
        profile_table(
            loaded.profile(),
            f"{loaded.spec.name}: {loaded.rows:,} rows ({loaded.rows_dropped:,} dropped for missing values)",
        )
    )
    return 0


def _read_rules(path: str):
    from .tablespec import load_yaml

    data = load_yaml(path)
    if isinstance(data, dict):
        data = data.get("rules")
    if data is None:
        raise VpubError(f"{path}: expected a list of rules (or a mapping with a `rules` list)")
    return data


def cmd_rules_check(args) -> int:
    from .report import console, profile_table, rules_table
    from .rules import check_eligibility, parse_rules, reduce_rules

    attrs = None
    loaded = None
    if args.input:
        loaded = _load(args)
        attrs = loaded.names
    rules = parse_rules(_read_rules(args.rules), attrs)
    red = reduce_rules(rules)
    console.print(rules_table(red.kept, red))
    if loaded is not None:
        console.print(profile_table(loaded.profile(), "domain profile"))
        check_eligibility(red.kept, loaded.frequencies(), args.l)
        console.print(f"[green]every RHS is {args.l}-eligible[/green]")
    return 0


def _read_schema(path: str):
    from .model import PublishedTable, Schema
    from .tablespec import load_yaml

    data = load_yaml(path)
    tables = data.get("tables") if isinstance(data, dict) else data
    if not isinstance(tables, list) or not tables:
        raise VpubError(
            f"{path}: expected `tables:` with a list of {{name, attributes, sensitive}}"
        )
    out = []
    for i, t in enumerate(tables):
        if not isinstance(t, dict) or "attributes" not in t:
            raise VpubError(f"{path}: table {i + 1} needs `attributes`")
        out.append(
            PublishedTable(
                str(t.get("name", f"T{i + 1}")),
                tuple(str(a) for a in t["attributes"]),
                t.get("sensitive"),
            )
        )
    return Schema(tuple(out))


def cmd_gnf_check(args) -> int:
    from .gnf import check_gnf
    from .report import console, gnf_table
    from .rules import parse_rules

    schema = _read_schema(args.schema)
    rules = parse_rules(_read_rules(args.rules), None)
    unknown = sorted({a for r in rules for a in [*r.lhs, r.rhs]} - schema.attributes)
    if unknown:
        console.print(
            f"[yellow]note: {', '.join(unknown)} appear in rules but in no table (unpublished)[/yellow]"
        )
    report = check_gnf(schema, rules)
    console.print(gnf_table(report))
    return 0 if report.ok else 1


# --- publish / audit ---------------------------------------------------------------
def publish_config(args):
    """The config file with the command line's overrides (DESIGN.md §8)."""
    from dataclasses import replace

    from .config import load_config
    from .model import PrivacySpec

    cfg = load_config(args.config)
    cfg = cfg.with_overrides(
        input_path=args.input,
        table=args.table,
        output_path=args.out,
        release_id=args.release_id,
        engine=args.engine,
        seed=args.seed,
        partitions=args.partitions,
        spark=args.spark_conf,
    )
    if args.l is not None:
        cfg = replace(cfg, privacy=PrivacySpec("l-diversity", args.l))
    if args.m is not None:
        cfg = replace(cfg, privacy=PrivacySpec("m-invariance", None, args.m))
    if args.state is not None:
        if cfg.marginals is None:
            raise SpecError("--state needs method marginals and a `marginals:` section")
        cfg = replace(cfg, marginals=replace(cfg.marginals, state=args.state))
    return replace(cfg, overwrite=args.overwrite) if args.overwrite else cfg


def cmd_publish(args) -> int:
    from .engines import make_engine
    from .engines.spark.session import SparkSettings
    from .release.writer import publish
    from .report import console, progress_step, publish_summary

    cfg = publish_config(args)
    engine = make_engine(cfg.engine, SparkSettings.load(cfg.spark))
    console.print(
        f"publishing {cfg.input_path} with {cfg.method} on the {cfg.engine} engine ({'m' if cfg.method == 'marginals' else 'l'} = {cfg.l}, seed = {cfg.seed})"
    )
    t0 = time.perf_counter()
    if cfg.engine == "spark":
        with progress_step("start Spark"):
            engine.spark  # noqa: B018
    result = publish(cfg, engine, progress_step)
    publish_summary(result)
    console.print(
        f"[green]release committed[/green] at {result.path} in {time.perf_counter() - t0:.1f} s"
    )
    return 0


def cmd_audit(args) -> int:
    from .release.audit import audit_release
    from .release.private_audit import audit_store
    from .report import audit_table, console

    if (args.release is None) == (args.state is None):
        raise SpecError(
            "give a release directory, or --state STORE for the private audit of a bucket store"
        )
    with console.status("auditing ..."):
        report = (
            audit_store(args.state)
            if args.state
            else audit_release(args.release, source=args.source)
        )
    if args.json:
        import json

        print(json.dumps(report.as_dict(), indent=2))
    else:
        console.print(audit_table(report))
    return 0 if report.passed else 1


def cmd_marginals_add(args) -> int:
    from .release.marginals import add_marginal
    from .release.writer import Steps
    from .report import console, progress_step, publish_summary

    attrs = [a.strip() for a in args.attributes.split(",") if a.strip()]
    t0 = time.perf_counter()
    result = add_marginal(
        args.state, attrs, args.out, args.release_id, args.overwrite, Steps(progress_step)
    )
    publish_summary(result)
    console.print(
        f"[green]release committed[/green] at {result.path} in {time.perf_counter() - t0:.1f} s"
    )
    return 0


def cmd_bench_publish(args) -> int:
    from .bench import bench_publish

    bench_publish(args)
    return 0


# --- query / utility ----------------------------------------------------------------
def cmd_query(args) -> int:
    from .release.reader import open_release
    from .report import console
    from .utility.model import release_models
    from .utility.queries import estimate_count, exact_count
    from .utility.where import parse_where

    rel = open_release(args.release)
    models, domains = release_models(rel)
    query = parse_where(args.where, domains)
    n = int(rel.manifest["source"]["rows"])
    est = estimate_count(models, query, n, domains)
    console.print(f"estimate: [bold]{est:,.1f}[/bold] of {n:,} rows  (COUNT(*) WHERE {args.where})")
    if args.source:
        from .utility.evaluate import load_release_and_source

        _, _, _, src = load_release_and_source(args.release, args.source)
        act = exact_count(src, query)
        error = abs(act - est) / act if act else float("nan")
        console.print(
            f"exact:    {act:,}  relative error {error:.2%}"
            if act
            else f"exact:    0 (relative error undefined; estimate {est:,.1f})"
        )
    return 0


def cmd_utility(args) -> int:
    from .report import console
    from .utility.evaluate import evaluate

    if args.engine == "spark":  # KL with Spark joins and aggregates; queries in process
        from .engines.spark.utility import spark_kl
        from .release.reader import open_release
        from .tablespec import table_spec_from_dict

        engine = _engine(args)
        rel = open_release(args.release)
        with console.status("KL divergence with Spark ..."):
            t0 = time.perf_counter()
            kl = spark_kl(
                engine,
                rel,
                engine.load(
                    args.source, table_spec_from_dict(rel.manifest["source"]["table_spec"])
                ),
            )
        console.print(
            f"KL divergence: [bold]{kl:.4f}[/bold] nats (Spark, {time.perf_counter() - t0:.1f} s)"
        )
        if args.queries == 0:
            return 0
    with console.status("estimating KL divergence and the query workload ..."):
        u = evaluate(args.release, args.source, args.qd, args.p, max(args.queries, 1), args.seed)
    if args.engine != "spark":
        console.print(f"KL divergence: [bold]{u.kl:.4f}[/bold] nats ({u.kl_seconds:.1f} s)")
    console.print(
        f"relative error over {u.queries:,} queries (qd = {args.qd}, p = {args.p:.0%}, seed {args.seed}): "
        f"mean [bold]{u.mean_relative_error:.4f}[/bold], median {u.median_relative_error:.4f} "
        f"({u.redrawn} queries with exact answer 0 redrawn; {u.queries_seconds:.1f} s)"
    )
    return 0


def cmd_compare(args) -> int:
    """000 §6 (rule-based methods) or, for a config with `marginals:`, 002 §4 (m-invariant
    marginals against ANGEL): run the sweeps, write results and plots, print the means."""
    from dataclasses import replace

    from rich.progress import Progress
    from rich.table import Table

    from .compare import MEASURES, compare_config_from_dict, run_compare, write_results
    from .compare_marginals import marginals_compare_config_from_dict, run_marginals_compare
    from .report import console
    from .tablespec import load_yaml

    raw = load_yaml(args.config)
    if isinstance(raw, dict) and "marginals" in raw:
        cfg, run, unit = (
            marginals_compare_config_from_dict(raw, args.config),
            run_marginals_compare,
            "points",
        )
        measures, columns = (
            {"relative_error": "mean relative error", "time_s": "time for M1..Mk (s)"},
            ["relative_error", "median_error", "time_s"],
        )
    else:
        cfg, run, unit = compare_config_from_dict(raw, args.config), run_compare, "rule sets"
        measures, columns = MEASURES, ["kl", "relative_error", "time_s"]
    cfg = replace(
        cfg,
        **{
            k: v
            for k, v in {"repeats": args.repeats, "out": args.out, "queries": args.queries}.items()
            if v is not None
        },
    )
    total = sum(len(values) for _, values in cfg.sweeps) * cfg.repeats
    t0 = time.perf_counter()
    with Progress(console=console) as bar:
        task = bar.add_task(f"{', '.join(cfg.methods)}: {total} {unit}", total=total)
        results = run(cfg, lambda k: bar.advance(task, k))
    files = write_results(results, cfg, Path(cfg.input_path).name, measures)
    summary = (
        results.groupby(["sweep", "value", "method"], sort=False)[columns].mean().reset_index()
    )
    t = Table(
        title=f"means over {cfg.repeats} repeat(s) of {cfg.queries} queries (seed {cfg.seed})"
    )
    for c in summary.columns:
        t.add_column(c, justify="left" if c in ("sweep", "method") else "right")
    for row in summary.itertuples(index=False):
        t.add_row(
            row.sweep, str(row.value), row.method, *(f"{getattr(row, c):.4f}" for c in columns)
        )
    console.print(t)
    console.print(
        f"{len(results)} results in {time.perf_counter() - t0:.0f} s; results and {len(files)} plots in {cfg.out}"
    )
    return 0


def cmd_bench_marginals(args) -> int:
    from .bench import bench_marginals

    bench_marginals(args)
    return 0


def cmd_bench_multi_sa(args) -> int:
    from .bench import bench_multi_sa

    bench_multi_sa(args)
    return 0


def cmd_bench_utility(args) -> int:
    from .bench import bench_utility

    bench_utility(args)
    return 0


# --- demo ---------------------------------------------------------------------------
def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vpub", description="Privacy-preserving publication of microdata on Spark."
    )
    p.add_argument("--version", action="version", version=f"vpub_spark {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    ds = sub.add_parser(
        "datasets", help="write the Adult preset or a synthetic data set"
    ).add_subparsers(dest="what", required=True)
    a = ds.add_parser("adult", help="000 §6.1's 7-attribute Adult table")
    a.add_argument("--path", required=True, help="directory with adult.data.csv and adult.test.csv")
    a.add_argument("--out", required=True)
    a.add_argument(
        "--sample", type=int, default=None, help="sample this many rows without replacement"
    )
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--overwrite", action="store_true")
    _common(a)
    a.set_defaults(func=cmd_datasets_adult)
    g = ds.add_parser("generate", help="a synthetic data set: sal, occ, texas or census")
    g.add_argument("name", choices=["sal", "occ", "texas", "census"])
    g.add_argument("--rows", type=int, required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True)
    g.add_argument("--overwrite", action="store_true")
    _common(g)
    g.set_defaults(func=cmd_datasets_generate)

    pr = sub.add_parser("profile", help="domain profile of a table")
    pr.add_argument("--input", required=True)
    pr.add_argument("--table", default=None, help="table spec YAML (default: INPUT/table.yaml)")
    _common(pr)
    pr.set_defaults(func=cmd_profile)

    r = sub.add_parser("rules", help="privacy rules").add_subparsers(dest="what", required=True)
    rc = r.add_parser("check", help="validate, reduce (000 Theorem 3.1) and check l-eligibility")
    rc.add_argument("--rules", required=True)
    rc.add_argument("--input", default=None)
    rc.add_argument("--table", default=None)
    rc.add_argument("--l", type=int, default=2)
    _common(rc)
    rc.set_defaults(func=cmd_rules_check)

    gn = sub.add_parser("gnf", help="Guardian Normal Form").add_subparsers(
        dest="what", required=True
    )
    gc = gn.add_parser("check", help="is a schema GNF for a rule set (000 Definition 5)?")
    gc.add_argument("--schema", required=True)
    gc.add_argument("--rules", required=True)
    gc.set_defaults(func=cmd_gnf_check)

    pb = sub.add_parser(
        "publish", help="publish a release: decompose, anonymize, write, audit, commit"
    )
    pb.add_argument("--config", required=True, help="job config YAML (see conf/adult_uad.yaml)")
    pb.add_argument("--input", default=None, help="override input.path")
    pb.add_argument("--table", default=None, help="override input.table (spec YAML or preset name)")
    pb.add_argument("--out", default=None, help="override output.path")
    pb.add_argument("--release-id", default=None, help="override output.release_id")
    pb.add_argument(
        "--engine", choices=["spark", "inprocess"], default=None, help="override engine"
    )
    pb.add_argument("--spark-conf", default=None, help="override spark (settings YAML)")
    pb.add_argument("--seed", type=int, default=None)
    pb.add_argument("--l", type=int, default=None, help="override privacy.l")
    pb.add_argument(
        "--m",
        type=int,
        default=None,
        help="override privacy: m-invariance with this m (method marginals)",
    )
    pb.add_argument(
        "--state", default=None, help="override marginals.state (the private bucket store)"
    )
    pb.add_argument(
        "--partitions", type=int, default=None, help="override partitions (default: auto)"
    )
    pb.add_argument(
        "--overwrite", action="store_true", help="replace a committed release with the same id"
    )
    pb.set_defaults(func=cmd_publish)

    mg = sub.add_parser(
        "marginals", help="m-invariant marginals (002): add one from a private bucket store"
    )
    mgs = mg.add_subparsers(dest="marginals_cmd", required=True)
    ma = mgs.add_parser(
        "add",
        help="decompose the stored buckets for new attributes and publish them as a new release",
    )
    ma.add_argument(
        "--state",
        required=True,
        help="the private bucket store (marginals.state of the first release)",
    )
    ma.add_argument(
        "--attributes", required=True, help="the marginal's QI attributes, e.g. age,education"
    )
    ma.add_argument(
        "--out", required=True, help="the output directory (the release goes to <out>/<release_id>)"
    )
    ma.add_argument("--release-id", default=None)
    ma.add_argument("--overwrite", action="store_true")
    ma.set_defaults(func=cmd_marginals_add)

    au = sub.add_parser("audit", help="re-check a release from its files alone")
    au.add_argument(
        "release", nargs="?", default=None, help="the release directory (<output>/<release_id>)"
    )
    au.add_argument(
        "--state",
        default=None,
        help="instead: the private audit of a bucket store and every release made from it",
    )
    au.add_argument("--source", default=None, help="also check every table against the source data")
    au.add_argument("--json", action="store_true", help="print the result as JSON")
    au.set_defaults(func=cmd_audit)

    qy = sub.add_parser("query", help="estimate COUNT(*) WHERE ... from a release")
    qy.add_argument("release")
    qy.add_argument(
        "--where", required=True, help="e.g. \"age in ('17-24', '25-34') and sex = Female\""
    )
    qy.add_argument(
        "--source", default=None, help="also compute the exact count and the relative error"
    )
    qy.set_defaults(func=cmd_query)

    ut = sub.add_parser(
        "utility", help="KL divergence and workload relative error of a release (000 §5.1, §6.1)"
    )
    ut.add_argument("release")
    ut.add_argument("--source", required=True)
    ut.add_argument("--qd", type=int, default=3, help="query dimension (default 3)")
    ut.add_argument("--p", type=float, default=0.4, help="value percentage (default 0.4)")
    ut.add_argument("--queries", type=int, default=1000)
    ut.add_argument("--seed", type=int, default=0)
    _common(ut)
    ut.set_defaults(func=cmd_utility, engine="inprocess")

    cp = sub.add_parser(
        "compare", help="000 §6's comparison runs: KL, relative error and time per method"
    )
    cp.add_argument("--config", required=True, help="e.g. conf/compare_adult.yaml")
    cp.add_argument("--repeats", type=int, default=None, help="override compare.repeats")
    cp.add_argument("--queries", type=int, default=None, help="override compare.queries")
    cp.add_argument("--out", default=None, help="override output.path")
    cp.set_defaults(func=cmd_compare)

    bn = sub.add_parser("bench", help="benchmarks (jobs that print numbers)").add_subparsers(
        dest="what", required=True
    )
    bp = bn.add_parser("publish", help="end-to-end publish time per engine")
    bp.add_argument("--name", default="sal", choices=["sal", "occ", "texas", "census"])
    bp.add_argument("--rows", type=int, default=1_000_000)
    bp.add_argument("--l", type=int, default=10)
    bp.add_argument("--c", type=int, default=5)
    bp.add_argument("--lhs", type=int, default=3)
    bp.add_argument("--seed", type=int, default=7)
    bp.add_argument("--partitions", type=int, default=None)
    bp.add_argument("--repeat", type=int, default=3)
    bp.add_argument("--engines", default="inprocess,spark")
    bp.add_argument("--spark-conf", default=None)
    bp.add_argument("--out", default="out/bench")
    bp.set_defaults(func=cmd_bench_publish)
    bm = bn.add_parser(
        "multi-sa",
        help="000 Appendix B: partitioned mode at scale, exact vs partitioned on a sample",
    )
    bm.add_argument("--name", default="sal", choices=["sal", "occ", "texas", "census"])
    bm.add_argument("--rows", type=int, default=1_000_000)
    bm.add_argument("--l", type=int, default=2)
    bm.add_argument("--c", type=int, default=5)
    bm.add_argument("--lhs", type=int, default=3)
    bm.add_argument("--seed", type=int, default=7)
    bm.add_argument("--solver", default="highs", choices=["cbc", "highs"])
    bm.add_argument("--time-limit", type=float, default=300.0)
    bm.add_argument("--chunk-rows", type=int, default=20_000)
    bm.add_argument("--sample-rows", type=int, default=50_000)
    bm.add_argument("--queries", type=int, default=1000)
    bm.add_argument("--qd", type=int, default=3)
    bm.add_argument("--p", type=float, default=0.4)
    bm.add_argument("--engines", default="inprocess,spark")
    bm.add_argument("--spark-conf", default=None)
    bm.add_argument("--out", default="out/bench-1m")
    bm.set_defaults(func=cmd_bench_multi_sa)

    bg = bn.add_parser(
        "marginals", help="002 §4: M1..M5 of census at m, per engine, and ANGEL in the same run"
    )
    bg.add_argument("--rows", type=int, default=1_000_000)
    bg.add_argument("--m", type=int, default=6)
    bg.add_argument("--seed", type=int, default=7)
    bg.add_argument("--chunk-rows", type=int, default=50_000)
    bg.add_argument("--engines", default="spark,inprocess")
    bg.add_argument("--spark-conf", default=None)
    bg.add_argument("--out", default="out/bench-1m")
    bg.set_defaults(func=cmd_bench_marginals)

    bu = bn.add_parser("utility", help="KL and query-workload time on a release")
    bu.add_argument("release")
    bu.add_argument("--source", required=True)
    bu.add_argument("--qd", type=int, default=3)
    bu.add_argument("--p", type=float, default=0.4)
    bu.add_argument("--queries", type=int, default=1000)
    bu.add_argument("--repeat", type=int, default=3)
    bu.add_argument("--seed", type=int, default=0)
    bu.set_defaults(func=cmd_bench_utility)

    d = sub.add_parser("demo", help="the end-to-end demo on a generated data set")
    d.add_argument("--out", default="out/demo")
    d.add_argument("--rows", type=int, default=200_000)
    _common(d)
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except VpubError as e:
        print(f"vpub: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("vpub: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
