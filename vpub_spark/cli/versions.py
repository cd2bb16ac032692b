"""`vpub statdb update` and `vpub statdb versions`: a store's versions
(statdb/update.py, release/stores/versions.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from ..report import console


def cmd_statdb_update(args: argparse.Namespace) -> int:
    from ..report import progress_step
    from ..statdb.update import Changes, update_store

    changes = Changes(args.input, args.upserts, args.deletes, args.input_format)
    u = update_store(args.store, changes, args.sign_key, args.wait, progress_step)
    if u.unchanged:
        console.print(
            f"{Path(args.store).name} already has these changes (version {u.version}): nothing written"
        )
        return 0
    console.print(
        f"[green]version {u.version}[/green] of {Path(args.store).name}: {u.rows:,} tuples "
        f"({u.inserted:,} inserted, {u.deleted:,} deleted), {u.counterfeits:,} counterfeits; "
        "every surviving tuple keeps its signature"
    )
    return 0


def cmd_statdb_versions(args: argparse.Namespace) -> int:
    from ..release.stores.integrity import verified
    from ..release.stores.versions import versions_of

    meta, _ = verified(Path(args.store))
    entries = versions_of(meta)
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    table = Table("version", "id", "created", "tuples", "inserted", "deleted", "counterfeits")
    for e in entries:
        table.add_row(
            str(e["version"]),
            str(e["id"])[:12],
            str(e.get("created", ""))[:19].replace("T", " "),
            f"{e.get('rows', meta['source']['rows']):,}",
            *(f"{e[k]:,}" if k in e else "" for k in ("inserted", "deleted", "counterfeits")),
        )
    console.print(table)
    console.print("ids: their first 12 characters (--version takes 8 or more); --json for all")
    return 0


def register(sds) -> None:
    """`vpub statdb update` and `vpub statdb versions` (under `vpub statdb`)."""
    sdu = sds.add_parser(
        "update",
        help="write a store's next version from a new snapshot of the table (m-invariance: inserts, deletes, counterfeits)",
    )
    sdu.add_argument("store", help="a store built with marginals.key (vpub statdb build)")
    sdu.add_argument(
        "--input", default=None, help="the table as it is now (the store's table spec)"
    )
    sdu.add_argument(
        "--upserts",
        default=None,
        help="instead of --input: the records added or changed since the latest version (the same layout)",
    )
    sdu.add_argument(
        "--deletes",
        default=None,
        help="instead of --input: the identifiers of the records removed (a table with the identifier column)",
    )
    sdu.add_argument(
        "--input-format", choices=["csv", "parquet"], default=None, help="default: detected"
    )
    sdu.add_argument(
        "--sign-key",
        default=None,
        metavar="PEM",
        help="the Ed25519 private key a signed store is signed with (it stays signed)",
    )
    sdu.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wait this long for another writer of the store",
    )
    sdu.set_defaults(func=cmd_statdb_update)
    sdv = sds.add_parser("versions", help="list a store's versions (checked first)")
    sdv.add_argument("store")
    sdv.add_argument("--json", action="store_true", help="print the list as JSON")
    sdv.set_defaults(func=cmd_statdb_versions)
