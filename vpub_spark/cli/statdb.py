"""`vpub statdb`: build a statistical database's store, update it into versions, and
answer counting queries with guaranteed intervals (004)."""

from __future__ import annotations

import argparse

from rich.markup import escape

from ..errors import SpecError
from ..report import console
from .common import SEED, engine_of, engine_options, warn_explicit_seed
from .versions import register as register_versions


def register(sub) -> None:
    """`vpub statdb` and its subcommands."""
    _register_statdb(sub)


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

    from ..release.stores.integrity import verify_store
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
