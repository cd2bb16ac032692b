"""`vpub releases list | show | latest | diff | prune`: the release catalog of an output
root, local or `s3://` (lake/catalog.py)."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from ..errors import DataError
from ..lake.catalog import (
    Root,
    diff,
    family_of,
    latest,
    lineage,
    manifests,
    prunable,
    store_references,
)
from ..report import console
from .common import whole_number


def _found(root: Root) -> dict[str, dict]:
    found = manifests(root)
    if not found:
        raise DataError(f"{root.where}: no committed release")
    return found


def _row(m: dict) -> dict:
    audit = m.get("audit") or {}
    return {
        "release_id": m["release_id"],
        "family": family_of(m),
        "created_at": m.get("created_at"),
        "method": m.get("method"),
        "rows": m.get("source", {}).get("rows"),
        "tables": len(m.get("tables", [])),
        "audit": "passed" if audit.get("passed") else "?",
        "store version": _store_version(m),
    }


def _store_version(m: dict) -> str:
    """The store version a release came from, by its opaque id ('' for none)."""
    store = m.get("store") or {}
    return str(store.get("version_id", ""))


def cmd_list(args: argparse.Namespace) -> int:
    rows = [
        _row(m) for m in _found(Root(args.root)).values() if args.family in (None, family_of(m))
    ]
    rows.sort(key=lambda r: (r["family"], r["created_at"] or ""))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(*rows[0].keys()) if rows else Table("release_id")
    for r in rows:  # a store version's id: its first 12 characters (--json: all)
        shown = r | {"store version": r["store version"][:12]}
        table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in shown.values()))
    console.print(table)
    return 0


def _one(found: dict[str, dict], release_id: str) -> dict:
    if release_id not in found:
        raise DataError(
            f"no committed release {release_id!r}; there are: {', '.join(sorted(found))}"
        )
    return found[release_id]


def cmd_show(args: argparse.Namespace) -> int:
    root = Root(args.root)
    found = _found(root)
    m = _one(found, args.release_id)
    info = _row(m) | {
        "latest of its family": latest(root, family_of(m)) == m["release_id"],
        "lineage (newest first)": " <- ".join(lineage(found, m["release_id"])),
        "supersedes": m.get("supersedes"),
        "private store": (m.get("store") or {}).get("store_id"),
        "store version": (m.get("store") or {}).get("version_id"),
        "privacy": m.get("privacy"),
        "rules": [f"{', '.join(r['lhs'])} -> {r['rhs']}" for r in m.get("rules", [])],
        "tables": {
            t["name"]: f"{t.get('kind')} on {', '.join(t.get('attributes', []))}"
            for t in m.get("tables", [])
        },
        "risk": _risk(root, m["release_id"]),
    }
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    for k, v in info.items():
        console.print(f"[bold]{k}[/bold]: {v}")
    return 0


def _risk(root: Root, release_id: str) -> dict:
    from ..release.reader import open_release
    from ..utility.risk import release_risk

    return {
        t: {k: round(v, 4) for k, v in r.items()}
        for t, r in release_risk(open_release(root.uri(release_id))).items()
    }


def cmd_latest(args: argparse.Namespace) -> int:
    found = latest(Root(args.root), args.family)
    if found is None:
        raise DataError(f"{args.root}: family {args.family!r} has no latest release")
    print(found)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    found = _found(Root(args.root))
    changes = diff(_one(found, args.a), _one(found, args.b))
    if not changes:
        console.print(
            f"{args.a} and {args.b} are the same release (same parts, bytes and settings)"
        )
    for what, a, b in changes:
        console.print(f"[bold]{what}[/bold]: {a} -> {b}")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    root = Root(args.root)
    found = _found(root)
    keep_latest = {r for m in found.values() if (r := latest(root, family_of(m))) is not None}
    gone = prunable(found, args.keep, keep_latest, store_references(args.store))
    for rid in gone:
        if not args.dry_run:
            root.remove_release(rid)
        console.print(f"{'would remove' if args.dry_run else 'removed'} {rid}")
    console.print(
        f"{len(gone)} of {len(found)} releases {'to remove' if args.dry_run else 'removed'}; kept the newest {args.keep} per family, the latest, and those a private store references"
    )
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    if args.iceberg is not None:
        return _register_iceberg(args)
    if args.delta is not None:
        return _register_delta(args)
    from ..engines import make_engine
    from ..engines.base import sql_engine
    from ..engines.settings import SparkSettings
    from ..lake.sql import register
    from ..release.reader import open_release
    from ..storage import is_remote

    root = Root(args.root)
    rel = open_release(root.uri(args.release_id), in_place=is_remote(args.root))
    engine = make_engine("spark", SparkSettings.load(args.spark_conf))
    with console.status("starting Spark ..."):
        engine.start()
    names, where = register(engine, rel)
    kind = (
        "as temporary views (this session only; the release is on an object store)"
        if rel.remote
        else f"in the {where} catalog"
    )
    console.print(f"registered {kind}: " + ", ".join(names))
    if args.sql:  # collected whole (at most 1,000 rows), so no task is left running at exit
        print(
            sql_engine(engine).sql(args.sql, 1000).to_string(index=False)
        )  # a bad query: one line
    return 0


def _register_iceberg(args: argparse.Namespace) -> int:
    """`--iceberg`: Iceberg tables over the release's files (lake/iceberg.py), no Spark."""
    from ..lake.iceberg import WAREHOUSE, default_catalog, register_iceberg
    from ..release.reader import open_release
    from ..storage import is_remote, join

    root = Root(args.root)
    rel = open_release(root.uri(args.release_id), in_place=is_remote(args.root))
    catalog = args.iceberg or default_catalog(args.root)
    warehouse = args.warehouse or join(args.root, WAREHOUSE, "warehouse")
    with console.status("registering Iceberg tables ..."):
        done = register_iceberg(rel, catalog, warehouse, args.namespace)
    for name, changed in zip(done.tables, done.changed, strict=True):
        console.print(f"{name}: " + ("a new snapshot" if changed else "already holds this release"))
    return 0


def _register_delta(args: argparse.Namespace) -> int:
    """`--delta`: Delta tables of the release's parts (lake/delta.py), no Spark."""
    from ..lake.delta import default_location, register_delta
    from ..release.reader import open_release

    rel = open_release(Root(args.root).uri(args.release_id))
    location = args.delta or default_location(args.root)
    with console.status("writing Delta tables ..."):
        done = register_delta(rel, location)
    print(f"Delta tables under {location}:")
    for name, changed in zip(done.tables, done.changed, strict=True):
        state = "a new version" if changed else "already holds this release"
        print(f"  {name.rsplit('/', 1)[-1]}: {state}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..release.export import export
    from ..release.reader import open_release

    rel = open_release(args.release)
    out = args.out or f"{rel.manifest['release_id']}_{args.table}.{args.format}"
    path, notes = export(rel, args.table, out, args.format, args.layout)
    console.print(f"wrote {path} and its data dictionary {notes}")
    return 0


def register(sub) -> None:
    _register_export(sub)
    _register_releases(sub)


def _register_export(sub) -> None:
    """`vpub export`: one table of a release as a flat file."""
    ex = sub.add_parser(
        "export", help="one table of a release as a flat CSV or Parquet file with a data dictionary"
    )
    ex.add_argument("release", help="a release directory or s3:// URI")
    ex.add_argument("--table", required=True)
    ex.add_argument("--format", choices=["csv", "parquet"], default="csv")
    ex.add_argument(
        "--layout",
        choices=["long", "wide"],
        default="long",
        help="anatomy/generalized: a row per tuple and sensitive value with its weight (long) or per tuple with its group's distribution (wide)",
    )
    ex.add_argument(
        "--out", default=None, help="file to write (default: <release>_<table>.<format>)"
    )
    ex.set_defaults(func=cmd_export)


def _register_releases(sub) -> None:
    """`vpub releases ...`: the release catalog of an output root."""
    rs = sub.add_parser(
        "releases", help="the release catalog of an output root (local or s3://)"
    ).add_subparsers(dest="what", required=True)
    ls = rs.add_parser("list", help="committed releases, by family")
    ls.add_argument("root")
    ls.add_argument("--family", default=None)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
    sh = rs.add_parser("show", help="one release: settings, tables, lineage")
    sh.add_argument("root")
    sh.add_argument("release_id")
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=cmd_show)
    la = rs.add_parser("latest", help="a family's latest release id")
    la.add_argument("root")
    la.add_argument("family")
    la.set_defaults(func=cmd_latest)
    df = rs.add_parser("diff", help="what differs between two releases")
    df.add_argument("root")
    df.add_argument("a")
    df.add_argument("b")
    df.set_defaults(func=cmd_diff)
    pr = rs.add_parser("prune", help="remove old releases, keeping the newest N per family")
    pr.add_argument("root")
    pr.add_argument("--keep", type=whole_number(1), required=True)
    pr.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="DIR",
        help="a private store whose references to honour (repeatable)",
    )
    pr.add_argument("--dry-run", action="store_true")
    pr.set_defaults(func=cmd_prune)
    _register_register(rs)


def _register_register(rs) -> None:
    """`vpub releases register`: Spark SQL tables, or Iceberg tables."""
    rg = rs.add_parser(
        "register",
        help="SQL tables over a release's parts (Spark catalog or Hive metastore), or Iceberg or Delta tables",
    )
    rg.add_argument("root")
    rg.add_argument("release_id")
    rg.add_argument(
        "--spark-conf",
        default=None,
        help="Spark settings YAML (a Hive metastore: conf spark.sql.catalogImplementation: hive)",
    )
    rg.add_argument("--sql", default=None, help="a query to run once registered")
    rg.add_argument(
        "--iceberg",
        nargs="?",
        const="",
        default=None,
        metavar="CATALOG",
        help="Apache Iceberg tables instead, in this catalog: an SQLAlchemy URI (default "
        "sqlite:///ROOT/_iceberg/catalog.db) or a REST catalog's http(s):// URI",
    )
    rg.add_argument(
        "--warehouse",
        default=None,
        help="where Iceberg's metadata goes (default ROOT/_iceberg/warehouse; the data stay the release's files)",
    )
    rg.add_argument("--namespace", default="vpub", help="the Iceberg namespace (default vpub)")
    rg.add_argument(
        "--delta",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="Delta Lake tables instead (deltalake, no JVM), under DIR (default ROOT/_delta): "
        "one version per release of a family",
    )
    rg.set_defaults(func=cmd_register)
