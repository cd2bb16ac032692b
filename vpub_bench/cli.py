"""`vpub compare` and `vpub bench ...`: the papers' comparison runs and the benchmarks,
registered into the `vpub` command line through the `vpub_spark.commands` entry point."""

from __future__ import annotations

import argparse
import time

from vpub_spark.cli.common import SEED, config_of, engines, whole_number
from vpub_spark.report import console

BENCHMARKS = {  # `vpub bench WHAT`: (its module, its config, its job), imported when run
    "publish": ("bench", "BenchPublish", "bench_publish"),
    "multi-sa": ("bench_methods", "BenchMultiSa", "bench_multi_sa"),
    "marginals": ("bench_methods", "BenchMarginals", "bench_marginals"),
    "utility": ("bench", "BenchUtility", "bench_utility"),
    "statdb": ("bench_statdb", "BenchStatdb", "bench_statdb"),
    "update": ("bench_update", "BenchUpdate", "bench_update"),
    "lake": ("bench_lake", "BenchLake", "bench_lake"),
    "frame": ("bench_frame", "BenchFrame", "bench_frame"),
    "report": ("bench_report", "BenchReport", "bench_report"),
    "streamliner": ("bench_methods", "BenchStreamliner", "bench_streamliner"),
    "serve": ("bench_statdb", "BenchServe", "bench_serve"),
    "scale": ("bench_scale", "BenchScale", "bench_scale"),
    "kl": ("bench_scale", "BenchKl", "bench_kl"),
    "peers": ("bench_peers", "BenchPeers", "bench_peers"),
    "cold": ("bench_cold", "BenchCold", "bench_cold"),
}


def cmd_compare(args: argparse.Namespace) -> int:
    """000 §6 (rule-based methods) or, for a config with `marginals:`, 002 §4 (m-invariant
    marginals against ANGEL): run the sweeps, write results and plots, print the means."""
    from rich.progress import Progress
    from rich.table import Table

    from .comparison import load_comparison, run_comparison

    comp = load_comparison(args.config, args.repeats, args.queries, args.out)
    cfg, t0 = comp.cfg, time.perf_counter()
    with Progress(console=console) as bar:
        task = bar.add_task(f"{', '.join(cfg.methods)}: {comp.steps} {comp.unit}", total=comp.steps)
        results, summary, files = run_comparison(comp, lambda k: bar.advance(task, k))
    t = Table(
        title=f"means over {cfg.repeats} repeat(s) of {cfg.queries} queries (seed {cfg.seed})"
    )
    for c in summary.columns:
        t.add_column(c, justify="left" if c in ("sweep", "method") else "right")
    for row in summary.itertuples(index=False):
        t.add_row(
            row.sweep, str(row.value), row.method, *(f"{getattr(row, c):.4g}" for c in comp.columns)
        )
    console.print(t)
    console.print(
        f"{len(results)} results in {time.perf_counter() - t0:.0f} s; results and {len(files)} plots in {cfg.out}"
    )
    return 0


def worker_counts(text: str) -> tuple[int, ...]:
    """`--workers 1,2` as (1, 2); a one-line error for anything else."""
    from vpub_spark.errors import SpecError

    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SpecError(f"--workers takes whole numbers like 1,2, not {text!r}") from None
    if any(c < 1 for c in counts):
        raise SpecError(f"--workers must be at least 1 each, not {text!r}")
    return counts


def cmd_bench(args: argparse.Namespace) -> int:
    """Every benchmark: its typed config from the arguments, then the run."""
    from importlib import import_module

    module, config, job = BENCHMARKS[args.what]
    loaded = import_module(f".{module}", __package__)
    kind, run = getattr(loaded, config), getattr(loaded, job)
    given: dict[str, tuple] = {"engines": engines(args.engines)} if hasattr(args, "engines") else {}
    if args.what == "peers":
        given = {"qi": engines(args.qi)}
    if args.what == "kl":
        given["forms"] = engines(args.forms)
    if hasattr(args, "workers") and args.what != "serve":  # in-process worker counts
        given["workers"] = worker_counts(args.workers)
    run(config_of(kind, args, **given))
    return 0


def _bench_publish(bn) -> None:
    bp = bn.add_parser("publish", help="end-to-end publish time per engine")
    bp.add_argument("--name", default="sal", choices=["sal", "occ", "texas", "census"])
    bp.add_argument("--rows", type=int, default=1_000_000)
    bp.add_argument("--l", type=whole_number(2), default=10)
    bp.add_argument("--c", type=int, default=5)
    bp.add_argument("--lhs", type=int, default=3)
    bp.add_argument("--seed", type=SEED, default=7)
    bp.add_argument("--partitions", type=int, default=None)
    bp.add_argument("--repeat", type=int, default=3)
    bp.add_argument("--engines", default="inprocess,spark")
    _workers_option(bp)
    bp.add_argument("--spark-conf", default=None)
    bp.add_argument("--out", default="out/bench")


def _workers_option(parser) -> None:
    parser.add_argument(
        "--workers",
        default="",
        help="in-process worker counts to compare, e.g. 1,2 (default: every core)",
    )


def _bench_multi_sa(bn) -> None:
    bm = bn.add_parser(
        "multi-sa",
        help="000 Appendix B: partitioned mode at scale, exact vs partitioned on a sample",
    )
    bm.add_argument("--name", default="sal", choices=["sal", "occ", "texas", "census"])
    bm.add_argument("--rows", type=int, default=1_000_000)
    bm.add_argument("--l", type=whole_number(2), default=2)
    bm.add_argument("--c", type=int, default=5)
    bm.add_argument("--lhs", type=int, default=3)
    bm.add_argument("--seed", type=SEED, default=7)
    bm.add_argument("--solver", default="highs", choices=["cbc", "highs"])
    bm.add_argument("--time-limit", type=float, default=300.0)
    bm.add_argument("--chunk-rows", type=int, default=20_000)
    bm.add_argument("--sample-rows", type=int, default=50_000)
    bm.add_argument("--queries", type=int, default=1000)
    bm.add_argument("--qd", type=int, default=3)
    bm.add_argument("--p", type=float, default=0.4)
    bm.add_argument("--engines", default="inprocess,spark")
    _workers_option(bm)
    bm.add_argument("--spark-conf", default=None)
    bm.add_argument("--out", default="out/bench-1m")


def _bench_others(bn) -> None:
    bg = bn.add_parser(
        "marginals", help="002 §4: M1..M5 of census at m, per engine, and ANGEL in the same run"
    )
    bg.add_argument("--rows", type=int, default=1_000_000)
    bg.add_argument("--m", type=int, default=6)
    bg.add_argument("--seed", type=SEED, default=7)
    bg.add_argument("--chunk-rows", type=int, default=50_000)
    bg.add_argument("--engines", default="spark,inprocess")
    _workers_option(bg)
    bg.add_argument("--spark-conf", default=None)
    bg.add_argument("--out", default="out/bench-1m")
    bu = bn.add_parser("utility", help="KL and query-workload time on a release")
    bu.add_argument("release")
    bu.add_argument("--source", required=True)
    bu.add_argument("--qd", type=int, default=3)
    bu.add_argument("--p", type=float, default=0.4)
    bu.add_argument("--queries", type=int, default=1000)
    bu.add_argument("--repeat", type=int, default=3)
    bu.add_argument("--seed", type=SEED, default=0)
    bu.add_argument("--out", default="out/bench-utility", help="where RELEASE.json goes")


def _bench_update(bn) -> None:
    bu = bn.add_parser(
        "update", help="a store's next version (1%% churn) against a full build, in process"
    )
    bu.add_argument("--rows", type=int, default=6_000_000)
    bu.add_argument("--churn", type=float, default=0.01, help="share of records replaced")
    bu.add_argument("--m", type=int, default=10)
    bu.add_argument("--queries", type=int, default=500)
    bu.add_argument("--seed", type=SEED, default=7)
    bu.add_argument("--out", default="out/bench-update", help="where update.json goes")


def _bench_lake(bn) -> None:
    bl = bn.add_parser(
        "lake", help="Iceberg registration and a DuckDB estimate against publish and vpub query"
    )
    bl.add_argument("--rows", type=int, default=10_000_000)
    bl.add_argument("--l", type=whole_number(2), default=10)
    bl.add_argument("--c", type=int, default=5, help="random rules")
    bl.add_argument("--lhs", type=int, default=3, help="attributes per rule, at most")
    bl.add_argument("--repeat", type=int, default=3)
    bl.add_argument("--seed", type=SEED, default=7)
    bl.add_argument("--out", default="out/bench-lake", help="where lake.json goes")


def _bench_frame(bn) -> None:
    bf = bn.add_parser(
        "frame", help="a Spark DataFrame published against the same rows from Parquet, on Spark"
    )
    bf.add_argument("--rows", type=int, default=1_000_000)
    bf.add_argument("--l", type=whole_number(2), default=5)
    bf.add_argument("--c", type=int, default=5, help="random rules")
    bf.add_argument("--lhs", type=int, default=3, help="attributes per rule, at most")
    bf.add_argument("--repeat", type=int, default=3)
    bf.add_argument("--seed", type=SEED, default=7)
    bf.add_argument("--spark-conf", default=None)
    bf.add_argument("--out", default="out/bench-frame", help="where frame.json goes")


def _bench_report(bn) -> None:
    br = bn.add_parser(
        "report", help="vpub report and vpub explore on Adult (and --rows of sal), as commands"
    )
    br.add_argument("--adult", default="data/adult", help="the raw Adult files")
    br.add_argument("--rows", type=int, default=0, help="also a sal release of this many rows")
    br.add_argument("--repeat", type=int, default=3)
    br.add_argument("--vary", default="l=2,3,5,8,10")
    br.add_argument("--seed", type=SEED, default=7)
    br.add_argument("--out", default="out/bench-report", help="where report.json goes")


def _bench_statdb(bn) -> None:
    bs = bn.add_parser("statdb", help="004 §9: a query workload answered from a store, per method")
    bs.add_argument("store", help="a private bucket store (vpub statdb build)")
    bs.add_argument("--queries", type=int, default=2000)
    bs.add_argument("--out", default="out/bench-statdb", help="where STORE.json goes")
    bs.add_argument(
        "--lam", type=int, default=2, help="QI attributes each query constrains (004's lambda)"
    )
    bs.add_argument(
        "--ql", type=float, default=0.06, help="each range's share of its domain (004's ql)"
    )
    bs.add_argument("--seed", type=SEED, default=1)


def _bench_streamliner(bn) -> None:
    bs = bn.add_parser(
        "streamliner", help="003: RDA and GDA publish time at several sizes, per engine"
    )
    bs.add_argument(
        "--rows",
        type=lambda t: tuple(int(x) for x in t.split(",")),
        default=(600_000, 1_200_000, 6_000_000),
        help="sizes, comma-separated",
    )
    bs.add_argument(
        "--methods", type=lambda t: tuple(x.strip() for x in t.split(",")), default=("rda", "gda")
    )
    bs.add_argument("--l", type=whole_number(2), default=8)
    bs.add_argument("--seed", type=SEED, default=7)
    bs.add_argument("--engines", default="inprocess,spark")
    bs.add_argument("--spark-conf", default=None)
    bs.add_argument("--out", default="out/bench-streamliner")


def _bench_serve(bn) -> None:
    bs = bn.add_parser(
        "serve", help="vpub serve on loopback: latency and throughput under concurrent clients"
    )
    bs.add_argument("store", help="a private bucket store (vpub statdb build)")
    bs.add_argument("--clients", type=int, default=50)
    bs.add_argument(
        "--queries", type=int, default=5000, help="queries per phase (paced, then closed loop)"
    )
    bs.add_argument(
        "--rate", type=float, default=500.0, help="the paced phase's queries/s in all (default 500)"
    )
    bs.add_argument("--workers", type=int, default=2, help="vpub serve's processes (default 2)")
    bs.add_argument(
        "--method", choices=["dyn-ana", "dyn-gen", "sta-ana", "sta-gen"], default="dyn-ana"
    )
    bs.add_argument("--port", type=int, default=18_081)
    bs.add_argument("--out", default="out/bench-serve")


def _bench_scale(bn) -> None:
    bs = bn.add_parser(
        "scale",
        help="Spark publishes of growing tables: step times, driver memory, files; the cost model and its 1B-row prediction",
    )
    bs.add_argument(
        "--rows",
        type=lambda t: tuple(int(float(x)) for x in t.split(",")),
        default=(1_000_000, 3_000_000, 10_000_000),
        help="sizes, e.g. 1e6,3e6,1e7,3e7",
    )
    bs.add_argument("--executors", type=int, default=100)
    bs.add_argument("--spark-conf", default=None)
    bs.add_argument("--out", default="out/bench-scale")
    bc = bn.add_parser(
        "cold",
        help="whole vpub publish commands in new processes: Spark with and without the class-data archive, in process",
    )
    bc.add_argument("--config", default="conf/adult_uad.yaml")
    bc.add_argument("--repeat", type=int, default=5)
    bc.add_argument("--out", default="out/bench-cold")
    bk = bn.add_parser(
        "kl",
        help="a release's KL divergence and a workload's exact answers, in process and on Spark",
    )
    bk.add_argument("release")
    bk.add_argument("--source", required=True)
    bk.add_argument("--repeat", type=int, default=3)
    bk.add_argument("--engines", default="inprocess,spark")
    _workers_option(bk)
    bk.add_argument(
        "--forms",
        default="every-task,one-shuffle,per-term",
        help="Spark KL forms to time: the release in every task, one shuffle, one aggregate per term",
    )
    bk.add_argument("--queries", type=int, default=1000)
    bk.add_argument("--qd", type=int, default=3)
    bk.add_argument("--p", type=float, default=0.4)
    bk.add_argument("--seed", type=SEED, default=0)
    bk.add_argument("--spark-conf", default=None)
    bk.add_argument("--out", default="out/bench-kl")


def _bench_peers(bn) -> None:
    bp = bn.add_parser(
        "peers", help="vpub against ANJANA on one rule QI -> S: time, peak memory, query error"
    )
    bp.add_argument("--data", required=True, help="a data-set directory (table.yaml + data/)")
    bp.add_argument("--qi", required=True, help="quasi-identifiers, comma-separated")
    bp.add_argument("--sensitive", required=True)
    bp.add_argument("--l", type=whole_number(2), default=3)
    bp.add_argument("--rows", type=int, default=None, help="a seeded sample of this many rows")
    bp.add_argument(
        "--suppression", type=float, default=5.0, help="ANJANA's suppression limit, percent"
    )
    bp.add_argument("--queries", type=int, default=1000)
    bp.add_argument("--qd", type=int, default=3)
    bp.add_argument("--p", type=float, default=0.4)
    bp.add_argument("--seed", type=SEED, default=0)
    bp.add_argument("--out", default="out/bench-peers")


def register(sub) -> None:
    cp = sub.add_parser(
        "compare", help="000 §6's comparison runs: KL, relative error and time per method"
    )
    cp.add_argument("--config", required=True, help="e.g. vpub_bench/conf/compare_adult.yaml")
    cp.add_argument("--repeats", type=int, default=None, help="override compare.repeats")
    cp.add_argument("--queries", type=int, default=None, help="override compare.queries")
    cp.add_argument("--out", default=None, help="override output.path")
    cp.set_defaults(func=cmd_compare)

    bn = sub.add_parser("bench", help="benchmarks (jobs that print numbers)").add_subparsers(
        dest="what", required=True
    )
    for add in (
        _bench_publish,
        _bench_multi_sa,
        _bench_others,
        _bench_statdb,
        _bench_update,
        _bench_lake,
        _bench_frame,
        _bench_report,
        _bench_streamliner,
        _bench_serve,
        _bench_scale,
        _bench_peers,
    ):
        add(bn)
    for p in bn.choices.values():
        p.set_defaults(func=cmd_bench)
