"""`vpub rules check` and `vpub gnf check`: privacy rules and Guardian Normal Form."""

from __future__ import annotations

import argparse

from ..gnf import check_gnf, load_schema
from ..report import console, gnf_table, profile_table, rules_table
from ..rules import check_eligibility, load_rules, parse_rules, reduce_rules
from .common import engine_options, whole_number
from .data import load


def cmd_rules_check(args: argparse.Namespace) -> int:
    loaded = load(args) if args.input else None
    rules = parse_rules(load_rules(args.rules), loaded.names if loaded else None)
    red = reduce_rules(rules)
    console.print(rules_table(red.kept, red))
    if loaded is not None:
        console.print(profile_table(loaded.profile(), "domain profile"))
        check_eligibility(red.kept, loaded.frequencies(), args.l)
        console.print(f"[green]every RHS is {args.l}-eligible[/green]")
    return 0


def cmd_gnf_check(args: argparse.Namespace) -> int:
    schema = load_schema(args.schema)
    rules = parse_rules(load_rules(args.rules), None)
    unknown = sorted({a for r in rules for a in [*r.lhs, r.rhs]} - schema.attributes)
    if unknown:
        console.print(
            f"[yellow]note: {', '.join(unknown)} appear in rules but in no table (unpublished)[/yellow]"
        )
    report = check_gnf(schema, rules)
    console.print(gnf_table(report))
    return 0 if report.ok else 1


def register(sub) -> None:
    r = sub.add_parser("rules", help="privacy rules").add_subparsers(dest="what", required=True)
    rc = r.add_parser("check", help="validate, reduce (000 Theorem 3.1) and check l-eligibility")
    rc.add_argument("--rules", required=True)
    rc.add_argument("--input", default=None)
    rc.add_argument("--table", default=None)
    rc.add_argument("--l", type=whole_number(2), default=2)
    engine_options(rc)
    rc.set_defaults(func=cmd_rules_check)

    gn = sub.add_parser("gnf", help="Guardian Normal Form").add_subparsers(
        dest="what", required=True
    )
    gc = gn.add_parser("check", help="is a schema GNF for a rule set (000 Definition 5)?")
    gc.add_argument("--schema", required=True)
    gc.add_argument("--rules", required=True)
    gc.set_defaults(func=cmd_gnf_check)
