"""`vpub query` and `vpub utility`: what analysts get from a release (000 §5.1, §6.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from ..errors import SpecError
from ..release.reader import open_release
from ..report import console
from ..utility.evaluate import evaluate
from ..utility.queries import estimate_count, exact_count
from ..utility.release_models import release_models
from ..utility.where import parse_where
from .common import SEED, engine_of, engine_options, warn_explicit_seed, whole_number
from .versions import register as register_versions


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


def cmd_statdb_query(args: argparse.Namespace) -> int:
    from ..statdb.db import StatDB

    db = StatDB.open(args.store, args.verify_key)
    answer = db.count(args.where, args.method, version=args.version)
    console.print(
        f"{answer.method}: COUNT(*) WHERE {escape(args.where)} is in [bold]{answer}[/bold]"
        + (f" (version {answer.version})" if db.latest > 1 else "")
    )
    return 0


def cmd_statdb_workload(args: argparse.Namespace) -> int:
    from ..statdb.batch import write_workload

    n = write_workload(args.store, args.lam, args.ql, args.queries, args.seed, args.out)
    console.print(
        f"{n:,} queries (lambda = {args.lam}, ql = {args.ql:.0%}, seed {args.seed}) written to {args.out}"
    )
    return 0


def cmd_statdb_batch(args: argparse.Namespace) -> int:
    from ..report import progress_step
    from ..statdb.batch import answer_workload, summary

    engine = engine_of(args)
    with progress_step(f"start the {args.engine} engine"):
        engine.start()
    with progress_step(f"answer {args.workload} ({args.method})"):
        batch = answer_workload(
            args.store, args.workload, args.method, engine, args.parts, args.version
        )
    if args.out:
        batch.answers.to_csv(args.out, index=False)
    console.print(summary(batch) + (f"; answers in {args.out}" if args.out else ""))
    return 0


def cmd_statdb_verify(args: argparse.Namespace) -> int:
    """Every integrity check of a store (exit 1 when one fails, as `vpub audit`)."""
    import json

    from ..release.store_integrity import verify_store
    from ..report import audit_table

    report = verify_store(args.store, args.verify_key)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        console.print(audit_table(report))
    return 0 if report.passed else 1


def cmd_statdb_build(args: argparse.Namespace) -> int:
    from ..config import load_config, with_overrides
    from ..engines import engine_for
    from ..engines.settings import SparkSettings
    from ..report import progress_step
    from ..statdb.build import build_store, reuse_store

    if args.config is None:
        if args.state is None:
            raise SpecError("vpub statdb build needs --config, or --state naming an existing store")
        return _built(reuse_store(args.state))
    cfg = with_overrides(
        load_config(args.config),
        state=args.state,
        input_path=args.input,
        engine=args.engine,
        seed=args.seed,
        seed_file=args.seed_file,
        spark=args.spark_conf,
        sign_key=args.sign_key,
    )
    warn_explicit_seed(cfg.seed)
    engine, why = engine_for(cfg.engine, SparkSettings.load(cfg.spark), cfg.input_path, cfg.workers)
    console.print(f"engine: {engine.name} ({why})")
    with progress_step(f"start the {engine.name} engine"):
        engine.start()
    return _built(build_store(cfg, engine, progress_step))


def _built(built) -> int:
    if built.reused:
        console.print(
            f"[green]reusing the store[/green] at {built.state} as it is (owner-only, intact): {built.rows:,} rows in {built.buckets:,} buckets of one signature each; answers stay m-invariant with every marginal published from it"
        )
    else:
        console.print(
            f"[green]store built[/green] at {built.state}: {built.rows:,} rows in {built.buckets:,} buckets ({built.chunks} chunks)"
        )
    return 0


def _register_statdb(sub) -> None:
    sd = sub.add_parser(
        "statdb", help="the statistical database (004): result intervals from a private store"
    )
    sds = sd.add_subparsers(dest="what", required=True)
    _register_statdb_build(sds)
    _register_statdb_query(sds)
    _register_statdb_verify(sds)
    _register_statdb_workload(sds)
    _register_statdb_batch(sds)
    register_versions(sds)


def _register_statdb_build(sds) -> None:
    """`vpub statdb build`: bucketize a table into a private store."""
    sdb = sds.add_parser(
        "build", help="bucketize a table into a private store (004 §5), with Spark by default"
    )
    sdb.add_argument(
        "--config",
        default=None,
        help="e.g. conf/statdb_sal.yaml (m-invariance; marginals: sensitive, qi, state); without it, --state names an existing store to reuse",
    )
    sdb.add_argument(
        "--state",
        default=None,
        help="override marginals.state; an existing store there is reused, not rebuilt",
    )
    sdb.add_argument("--input", default=None, help="override input.path")
    sdb.add_argument(
        "--engine", choices=["auto", "spark", "inprocess"], default=None, help="override engine"
    )
    sdb.add_argument("--spark-conf", default=None, help="override spark (settings YAML)")
    sdb.add_argument(
        "--sign-key",
        default=None,
        metavar="PEM",
        help="sign the store's store.json with this Ed25519 private key (vpub keys generate)",
    )
    sdb.add_argument(
        "--seed",
        type=SEED,
        default=None,
        help="an explicit seed (reproducible; keep it private); default: a secret one, kept in the store",
    )
    sdb.add_argument(
        "--seed-file", default=None, metavar="FILE", help="read the seed from this owner-only file"
    )
    sdb.set_defaults(func=cmd_statdb_build)


def _register_statdb_query(sds) -> None:
    """`vpub statdb query`: one counting query's result interval."""
    sdq = sds.add_parser("query", help="one counting query's result interval")
    sdq.add_argument(
        "store",
        help="a private bucket store (vpub statdb build, or vpub publish with method marginals)",
    )
    sdq.add_argument(
        "--where",
        required=True,
        help="e.g. \"age between 30 and 50 and occupation in (3, 'Craft (repair)')\": labels with spaces, commas, parentheses or quotes are quoted, a quote doubled (docs/reference/conditions.md)",
    )
    sdq.add_argument(
        "--method", choices=["dyn-ana", "dyn-gen"], default="dyn-ana", help="A-Count or G-Count"
    )
    sdq.add_argument(
        "--version",
        default=None,
        help="the store version to ask, by number or id (vpub statdb versions); default: the latest",
    )
    sdq.add_argument(
        "--verify-key",
        default=None,
        metavar="PEM",
        help="refuse the store unless store.json carries a valid Ed25519 signature by this key",
    )
    sdq.set_defaults(func=cmd_statdb_query)


def _register_statdb_verify(sds) -> None:
    """`vpub statdb verify`: every integrity check of a store."""
    sdv = sds.add_parser(
        "verify",
        help="check a store's integrity: store.json unedited, every file's SHA-256, every code in its domain, every bucket m-invariant; with --verify-key its signature",
    )
    sdv.add_argument(
        "store",
        help="a private bucket store (vpub statdb build, or vpub publish with method marginals)",
    )
    sdv.add_argument(
        "--verify-key",
        default=None,
        metavar="PEM",
        help="also check store.json's Ed25519 signature with this public key",
    )
    sdv.add_argument("--json", action="store_true", help="print the result as JSON")
    sdv.set_defaults(func=cmd_statdb_verify)


def _register_statdb_workload(sds) -> None:
    """`vpub statdb workload`: write a query workload for a store."""
    sdw = sds.add_parser("workload", help="write a 004 §9 query workload (lambda, ql) for a store")
    sdw.add_argument("store")
    sdw.add_argument(
        "--lam", type=int, default=2, help="QI attributes each query constrains (004's lambda)"
    )
    sdw.add_argument(
        "--ql", type=float, default=0.06, help="each range's share of its domain (004's ql)"
    )
    sdw.add_argument("--queries", type=int, default=2000)
    sdw.add_argument("--seed", type=SEED, default=1)
    sdw.add_argument("--out", required=True, help="the workload file: one --where text per line")
    sdw.set_defaults(func=cmd_statdb_workload)


def _register_statdb_batch(sds) -> None:
    """`vpub statdb batch`: answer a workload file."""
    sda = sds.add_parser(
        "batch", help="answer a workload file (one --where per line), with Spark by default"
    )
    sda.add_argument("store")
    sda.add_argument(
        "--workload", required=True, help="one --where text per line (vpub statdb workload)"
    )
    sda.add_argument("--method", choices=["dyn-ana", "dyn-gen"], default="dyn-ana")
    sda.add_argument(
        "--parts", type=int, default=0, help="tasks (default: the engine's parallelism)"
    )
    sda.add_argument(
        "--version",
        default=None,
        help="the store version to ask (number or id; default: the latest)",
    )
    sda.add_argument(
        "--out", default=None, help="write every answer (line, where, method, low, high, ms) as CSV"
    )
    engine_options(sda)
    sda.set_defaults(func=cmd_statdb_batch)


def cmd_serve(args: argparse.Namespace) -> int:
    """Checks everything (binding, token, store, catalog) before it listens; with
    `--workers N`, N processes each open the store (settings through the environment)."""
    import os

    import uvicorn

    from ..serve.app import ENV, ServeSettings, build_app, settings_env
    from ..serve.limits import check_binding

    settings = ServeSettings(
        args.store,
        args.releases,
        args.token_file,
        args.max_body,
        args.rate,
        args.burst,
        args.verify_key,
    )
    check_binding(args.host, settings.token())
    if args.releases is not None and not Path(args.releases).is_dir():
        raise SpecError(f"--releases {Path(args.releases).name}: no such directory")
    app = build_app(settings)
    shown = "the page, the API at /openapi.json" + (
        ", the release catalog" if args.releases else ""
    )
    console.print(
        f"serving {Path(args.store).name} on http://{args.host}:{args.port}/ ({shown}); {args.workers} worker(s)"
    )
    if args.verify_key is None and app.state.signed_by:
        console.print(
            f"note: the store is signed (key {app.state.signed_by}) but --verify-key was not given: its signature was not checked"
        )
    if args.workers == 1:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0
    del app
    os.environ[ENV] = settings_env(settings)
    target = "vpub_spark.serve.app:app_from_env"
    uvicorn.run(
        target,
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        log_level="warning",
    )
    return 0


def register(sub) -> None:
    _register_statdb(sub)
    _register_serve(sub)
    _register_query(sub)
    _register_utility(sub)


def _register_serve(sub) -> None:
    """`vpub serve`: the statistical database and release catalog as a web service."""
    sv = sub.add_parser(
        "serve",
        help="the statistical database and release catalog as a web service and page (loopback by default)",
    )
    sv.add_argument("--store", required=True, help="a private bucket store (vpub statdb build)")
    sv.add_argument(
        "--verify-key",
        default=None,
        metavar="PEM",
        help="refuse the store unless store.json carries a valid Ed25519 signature by this key",
    )
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=whole_number(0, 65_535), default=8080)
    sv.add_argument(
        "--token-file",
        default=None,
        help="clients must send 'Authorization: Bearer <token>' (required off loopback)",
    )
    sv.add_argument(
        "--releases",
        default=None,
        help="a directory of releases to list, summarize, audit and estimate from",
    )
    sv.add_argument(
        "--max-body", type=whole_number(1), default=16_384, help="largest request body in bytes"
    )
    sv.add_argument(
        "--rate",
        type=float,
        default=50.0,
        help="requests a second per client address and process (0: no limit; default 50)",
    )
    sv.add_argument(
        "--burst",
        type=whole_number(1),
        default=100,
        help="requests a client may send at once (default 100)",
    )
    sv.add_argument(
        "--workers",
        type=whole_number(1),
        default=1,
        help="server processes, each with the store open (default 1)",
    )
    sv.set_defaults(func=cmd_serve)


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
