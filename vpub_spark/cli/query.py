"""`vpub query` and `vpub utility`: what analysts get from a release (000 §5.1, §6.1)."""

from __future__ import annotations

import argparse

from rich.markup import escape

from ..release.reader import open_release
from ..report import console
from ..utility.evaluate import evaluate
from ..utility.queries import estimate_count, exact_count
from ..utility.release_models import release_models
from ..utility.where import parse_where
from .common import SEED, engine_options


def register(sub) -> None:
    """`vpub query` and `vpub utility`."""
    _register_query(sub)
    _register_utility(sub)


def cmd_query(args: argparse.Namespace) -> int:
    """The estimate comes from the release's models, in this process on either engine
    (as `vpub utility`); `--source`'s exact count is read and counted by the engine."""
    rel = open_release(args.release)
    n = int(rel.manifest["source"]["rows"])
    how = ""
    if args.reader == "duckdb":
        from ..utility.queries import duckdb_estimate

        est, table = duckdb_estimate(rel, args.where)
        how = f"; DuckDB SQL on {'tables' if ', ' in table else 'table'} {table}"
    else:
        models, domains = release_models(rel)
        query = parse_where(args.where, domains)
        est = estimate_count(models, query, n, domains)
    console.print(
        f"estimate: [bold]{est:,.1f}[/bold] of {n:,} rows  (COUNT(*) WHERE {escape(args.where)}{how})"
    )
    if args.source:
        if args.reader == "duckdb":  # the source is read against the release's domains
            domains = release_models(rel)[1]
            query = parse_where(args.where, domains)
        act, chosen = _exact_count(args, rel, domains, query)
        error = abs(act - est) / act if act else float("nan")
        console.print(
            f"exact:    {act:,}  relative error {error:.2%} ({chosen} engine)"
            if act
            else f"exact:    0 (relative error undefined; estimate {est:,.1f}; {chosen} engine)"
        )
    return 0


def _exact_count(args: argparse.Namespace, rel, domains, query) -> tuple[int, str]:
    """The query's exact answer on `--source` and the engine that counted it (`auto`:
    chosen by the source's size)."""
    from ..engines import choose, make_engine
    from ..engines.settings import SparkSettings
    from ..estimate.codes import recoding, with_unpublished
    from ..tablespec import table_spec_from_dict
    from ..utility.evaluate import load_source

    chosen, settings, _ = choose(args.engine, SparkSettings.load(args.spark_conf), args.source)
    if chosen != "spark":
        _, src = load_source(rel, args.source, domains)
        return exact_count(src, query), chosen
    from ..utility.engine_jobs import engine_counts

    engine = make_engine(chosen, settings)
    with console.status("counting the source with Spark ..."):
        loaded = engine.load(
            args.source, table_spec_from_dict(rel.manifest["source"]["table_spec"])
        )
        space = with_unpublished(domains, loaded)
        counts = engine_counts(
            engine, loaded, recoding(loaded, space), {a: len(space[a]) for a in loaded.names}
        )
        return int(counts([query])[0]), chosen


def cmd_utility(args: argparse.Namespace) -> int:
    from ..engines import choose, make_engine
    from ..engines.settings import SparkSettings

    chosen, settings, why = choose(args.engine, SparkSettings.load(args.spark_conf), args.source)
    console.print(f"on the {chosen} engine ({why})")
    if chosen == "spark":  # the source read and counted by Spark
        from ..utility.engine_jobs import engine_utility

        engine = make_engine(chosen, settings)
        with console.status("KL divergence and the workload's exact answers with Spark ..."):
            u = engine_utility(
                engine, args.release, args.source, args.qd, args.p, max(args.queries, 1), args.seed
            )
    else:
        with console.status("estimating KL divergence and the query workload ..."):
            u = evaluate(
                args.release, args.source, args.qd, args.p, max(args.queries, 1), args.seed
            )
    console.print(f"KL divergence: [bold]{u.kl:.4f}[/bold] nats ({u.kl_seconds:.1f} s, {chosen})")
    console.print(
        f"relative error over {u.queries:,} queries (qd = {args.qd}, p = {args.p:.0%}, seed {args.seed}): "
        f"mean [bold]{u.mean_relative_error:.4f}[/bold], median {u.median_relative_error:.4f} "
        f"({u.redrawn} queries with exact answer 0 redrawn; {u.queries_seconds:.1f} s)"
    )
    from ..release.reader import open_release
    from ..report import risk_table
    from ..utility.risk import release_risk

    console.print(risk_table(release_risk(open_release(args.release))))
    return 0


def _register_query(sub) -> None:
    """`vpub query`: estimate a count from a release."""
    qy = sub.add_parser("query", help="estimate COUNT(*) WHERE ... from a release")
    qy.add_argument("release")
    qy.add_argument(
        "--where", required=True, help="e.g. \"age in ('17-24', '25-34') and sex = Female\""
    )
    qy.add_argument(
        "--source", default=None, help="also compute the exact count and the relative error"
    )
    qy.add_argument(
        "--reader",
        choices=["vpub", "duckdb"],
        default="vpub",
        help="vpub: the release's models (any query); duckdb: DuckDB SQL over the release's "
        "files (releases of anatomy and projection tables)",
    )
    engine_options(qy, default="auto")  # the engine that reads --source
    qy.set_defaults(func=cmd_query)


def _register_utility(sub) -> None:
    """`vpub utility`: KL divergence and workload relative error of a release."""
    ut = sub.add_parser(
        "utility", help="KL divergence and workload relative error of a release (000 §5.1, §6.1)"
    )
    ut.add_argument("release")
    ut.add_argument("--source", required=True)
    ut.add_argument("--qd", type=int, default=3, help="query dimension (default 3)")
    ut.add_argument("--p", type=float, default=0.4, help="value percentage (default 0.4)")
    ut.add_argument("--queries", type=int, default=1000)
    ut.add_argument("--seed", type=SEED, default=0)
    engine_options(ut, default="auto")
    ut.set_defaults(func=cmd_utility)
