"""`vpub publish`, `vpub marginals add` and `vpub audit`: make, extend and re-check releases."""

from __future__ import annotations

import argparse
import json
import time

from ..config import load_config, with_overrides
from ..errors import SpecError
from ..lake.commit import Steps
from ..release.audit.release import audit_release
from ..release.signing import generate_keys
from ..release.stores.audit import audit_store
from ..report import audit_table, console, progress_step, publish_summary
from .common import (
    engine_of,
    engine_options,
    job_engine,
    seed_options,
    seed_origin,
    warn_explicit_seed,
    whole_number,
)


def cmd_publish(args: argparse.Namespace) -> int:
    from ..publishing.pipeline import publish  # the methods' kernels: imported when run

    cfg = with_overrides(
        load_config(args.config),
        l=args.l,
        m=args.m,
        state=args.state,
        overwrite=args.overwrite,
        wait_s=args.wait,
        sign_key=args.sign_key,
        input_path=args.input,
        table=args.table,
        output_path=args.out,
        release_id=args.release_id,
        engine=args.engine,
        seed=args.seed,
        seed_file=args.seed_file,
        private_dir=args.private_dir,
        partitions=args.partitions,
        spark=args.spark_conf,
    )
    warn_explicit_seed(cfg.seed)
    cfg, engine, why = job_engine(cfg)
    letter = "m" if cfg.privacy.model == "m-invariance" else "l"
    console.print(
        f"publishing {cfg.input_path} with {cfg.method} on the {cfg.engine} engine ({why}; {letter} = {cfg.diversity}; {seed_origin(cfg)})"
    )
    t0 = time.perf_counter()
    if cfg.engine == "spark":
        with progress_step("start Spark"):
            engine.start()
    result = publish(cfg, engine, progress_step)
    publish_summary(result)
    console.print(
        f"[green]release committed[/green] at {result.path} in {time.perf_counter() - t0:.1f} s"
    )
    return 0


def cmd_marginals_add(args: argparse.Namespace) -> int:
    from ..publishing.marginals_add import add_marginal

    attrs = [a.strip() for a in args.attributes.split(",") if a.strip()]
    t0 = time.perf_counter()
    result = add_marginal(
        args.state,
        attrs,
        args.out,
        args.release_id,
        args.overwrite,
        Steps(progress_step),
        args.wait,
        args.sign_key,
        args.version,
    )
    publish_summary(result)
    console.print(
        f"[green]release committed[/green] at {result.path} in {time.perf_counter() - t0:.1f} s"
    )
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    if (args.release is None) == (args.state is None):
        raise SpecError(
            "give a release directory, or --state STORE for the private audit of a bucket store"
        )
    with console.status("auditing ..."):
        if args.state:
            report = audit_store(args.state, args.verify_key)
        else:
            spark = args.engine == "spark"  # Spark: the tables audited in its tasks too
            engine = engine_of(args) if args.source or spark else None
            report = audit_release(
                args.release,
                source=args.source,
                engine=engine,
                verify_key=args.verify_key,
                distributed=spark,
                secret=args.secret,
            )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        console.print(audit_table(report))
    return 0 if report.passed else 1


SIGN = "sign the manifest with this Ed25519 private key (see vpub keys generate)"
WAIT = "wait up to SECONDS for a concurrent run of the same release (default: fail at once)"


def cmd_keys_generate(args: argparse.Namespace) -> int:
    private, public = generate_keys(args.out)
    console.print(
        f"signing key {private} (keep it private), verify key {public} (give it to readers)"
    )
    return 0


def cmd_spark_archive(args: argparse.Namespace) -> int:
    from ..publishing.spark_archive import build_archive

    with console.status(
        "building the Spark driver's class-data archive (a small publish on Spark) ..."
    ):
        path, took = build_archive(args.force)
    size = path.stat().st_size / 2**20
    said = f"built in {took:.0f} s" if took else "already built (--force rebuilds it)"
    console.print(
        f"class-data archive {path} ({size:,.0f} MiB), {said}; Spark runs on this machine now start from it"
    )
    return 0


def register(sub) -> None:
    _register_publish(sub)
    _register_marginals(sub)
    _register_audit(sub)
    _register_keys(sub)
    sa = sub.add_parser(
        "spark-archive",
        help="build the Spark driver's class-data archive: a new process that starts Spark loads its classes from it (measured on the benchmarks page's cold start)",
    )
    sa.add_argument("--force", action="store_true", help="rebuild it even if it exists")
    sa.set_defaults(func=cmd_spark_archive)


def _register_publish(sub) -> None:
    pb = sub.add_parser(
        "publish", help="publish a release: decompose, anonymize, write, audit, commit"
    )
    pb.add_argument("--config", required=True, help="job config YAML (see conf/adult_uad.yaml)")
    pb.add_argument("--input", default=None, help="override input.path")
    pb.add_argument("--table", default=None, help="override input.table (spec YAML or preset name)")
    pb.add_argument("--out", default=None, help="override output.path")
    pb.add_argument("--release-id", default=None, help="override output.release_id")
    pb.add_argument(
        "--engine",
        choices=["auto", "spark", "inprocess"],
        default=None,
        help="override engine (auto: in process when the input fits this machine's memory and no cluster is configured)",
    )
    pb.add_argument("--spark-conf", default=None, help="override spark (settings YAML)")
    seed_options(pb)
    pb.add_argument("--l", type=whole_number(2), default=None, help="override privacy.l")
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
    pb.add_argument("--wait", type=float, default=None, metavar="SECONDS", help=WAIT)
    pb.add_argument("--sign-key", default=None, metavar="PEM", help=SIGN)
    pb.set_defaults(func=cmd_publish)


def _register_marginals(sub) -> None:
    """`vpub marginals add`: a new marginal from a private bucket store."""
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
    ma.add_argument("--wait", type=float, default=None, metavar="SECONDS", help=WAIT)
    ma.add_argument("--sign-key", default=None, metavar="PEM", help=SIGN)
    ma.add_argument(
        "--version",
        default=None,
        help="the store version to publish from (number or id, vpub statdb versions); default: the latest",
    )
    ma.set_defaults(func=cmd_marginals_add)


def _register_audit(sub) -> None:
    """`vpub audit`: re-check a release from its files alone."""
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
    au.add_argument(
        "--verify-key",
        default=None,
        metavar="PEM",
        help="check the manifest's (with --state: store.json's) Ed25519 signature with this public key",
    )
    au.add_argument(
        "--secret",
        default=None,
        metavar="PATH",
        help="the owner's run record, private store or seed file: also check the release's proof and keyed source fingerprint",
    )
    engine_options(
        au, default="inprocess"
    )  # reads --source; spark: the tables audited in its tasks
    au.set_defaults(func=cmd_audit)


def _register_keys(sub) -> None:
    """`vpub keys generate`: a new signing key pair."""
    keys = sub.add_parser("keys", help="signing keys for releases").add_subparsers(
        dest="what", required=True
    )
    kg = keys.add_parser(
        "generate", help="a new Ed25519 key pair: signing-key.pem (owner-only) and verify-key.pem"
    )
    kg.add_argument("--out", required=True, help="a directory for the two files")
    kg.set_defaults(func=cmd_keys_generate)
