"""Readable terminal reports (rich) shared by the CLI commands."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .gnf import GnfReport, render_path
from .model import Rule
from .rules import Reduction

console = Console(highlight=False)


def profile_table(profile: list[dict], title: str) -> Table:
    t = Table(title=title)
    for c in ("attribute", "domain", "distinct", "most frequent", "share"):
        t.add_column(c, justify="right" if c in ("domain", "distinct", "share") else "left")
    for p in profile:
        t.add_row(p["attribute"], str(p["domain"]), str(p["distinct"]), str(p["top_value"]), f"{p['top_share']:.1%}")
    return t


def rules_table(rules: Sequence[Rule], reduction: Reduction | None = None) -> Table:
    t = Table(title="privacy rules")
    t.add_column("#", justify="right")
    t.add_column("rule")
    for i, r in enumerate(rules):
        t.add_row(str(i + 1), str(r))
    if reduction:
        for d, by in reduction.dropped:
            t.add_row("-", f"[dim]{escape(str(d))}  (dropped: implied by {escape(str(by))})[/dim]")
    return t


def gnf_table(report: GnfReport) -> Table:
    t = Table(title=f"Guardian Normal Form: {'[green]GNF[/green]' if report.ok else '[red]NOT GNF[/red]'}")
    t.add_column("#", justify="right")
    t.add_column("rule")
    t.add_column("verdict")
    t.add_column("why")
    for v in report.verdicts:
        colour = {"unreachable": "green", "guardian": "green", "violated": "red"}[v.status]
        why = v.reason + (f"\npath: {render_path(v.path)}" if v.status == "violated" and v.path else "")
        t.add_row(str(v.index + 1), str(v.rule), f"[{colour}]{v.status}[/{colour}]", escape(why))
    return t
