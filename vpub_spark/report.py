"""Readable terminal reports (rich) shared by the CLI commands."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

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
        t.add_row(
            p["attribute"],
            str(p["domain"]),
            str(p["distinct"]),
            str(p["top_value"]),
            f"{p['top_share']:.1%}",
        )
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
    t = Table(
        title=f"Guardian Normal Form: {'[green]GNF[/green]' if report.ok else '[red]NOT GNF[/red]'}"
    )
    t.add_column("#", justify="right")
    t.add_column("rule")
    t.add_column("verdict")
    t.add_column("why")
    for v in report.verdicts:
        colour = {"unreachable": "green", "guardian": "green", "violated": "red"}[v.status]
        why = v.reason + (
            f"\npath: {render_path(v.path)}" if v.status == "violated" and v.path else ""
        )
        t.add_row(str(v.index + 1), str(v.rule), f"[{colour}]{v.status}[/{colour}]", escape(why))
    return t


def release_table(manifest: dict) -> Table:
    """One screen: the published tables and what protects each."""
    p = manifest["privacy"]
    model = (
        f"{p.get('l')}-diversity"
        if p.get("model", "l-diversity") == "l-diversity"
        else f"{p.get('m')}-invariance"
    )
    t = Table(
        title=f"release {escape(manifest['release_id'])}: {manifest['method']}, {model}, {len(manifest['rules'])} rules"
    )
    for c in ("table", "kind", "attributes", "sensitive", "rows", "groups"):
        t.add_column(c, justify="right" if c in ("rows", "groups") else "left")
    for e in manifest["tables"]:
        sensitive = (
            ", ".join(e["sensitive"]) if isinstance(e["sensitive"], list) else e["sensitive"] or "-"
        )
        groups = f"{e.get('groups', 0):,}" if "groups" in e else "-"
        t.add_row(
            e["name"],
            e["kind"],
            escape(", ".join(e["attributes"])),
            escape(sensitive),
            f"{e['rows']:,}",
            groups,
        )
    return t


def multi_sa_line(cost: dict) -> str:
    """The solver's account of a multi-SA release (000 Appendix B): never hides a time limit."""
    line = (
        f"multi-SA ({cost['mode']}, {cost['solver']}, {cost['chunks']} chunk(s)): {cost['solves']} programs solved in "
        f"{cost['solve_seconds']:.2f} s, {cost['optimal']} proven optimal; {cost['suppressed_rows']:,} rows with suppressed sensitive values"
    )
    if not cost["all_optimal"]:
        line += f"\n[yellow]warning: {cost['time_limited']} program(s) stopped at the time limit of {cost['time_limit_s']} s: groups are valid but not proven maximal[/yellow]"
    return line


def audit_table(report) -> Table:
    t = Table(
        title=f"audit of {escape(report.release)}: "
        + ("[green]PASSED[/green]" if report.passed else "[red]FAILED[/red]")
    )
    t.add_column("check")
    t.add_column("result")
    t.add_column("detail")
    for c in sorted(report.checks, key=lambda c: c.ok):
        t.add_row(
            escape(c.name), "[green]ok[/green]" if c.ok else "[red]FAIL[/red]", escape(c.detail)
        )
    for w in report.warnings:
        t.add_row("warning", "[yellow]warn[/yellow]", escape(w))
    return t


@contextmanager
def progress_step(name: str) -> Iterator[None]:
    """A spinner while a step runs, then a line with its time."""
    t0 = time.perf_counter()
    with console.status(f"{name} ..."):
        yield
    console.print(f"  [green]✓[/green] {name} [dim]({time.perf_counter() - t0:.1f} s)[/dim]")


def publish_summary(result) -> None:
    """The one-screen summary of a committed release: tables, GNF verdicts, guarantee."""
    from .gnf import check_gnf
    from .model import PublishedTable, Schema
    from .rules import parse_rules

    m = result.manifest
    console.print(release_table(m))
    if m["privacy"]["model"] == "m-invariance":
        c = m["method_cost"]
        console.print(
            f"guarantee: every group of every marginal is {m['privacy']['m']}-unique and every tuple keeps one signature in all "
            f"marginals of the store (002 Theorems 3-4); "
            + (
                f"{c['chunks']} chunk(s), {c['subtables']} sub-tables, {c['buckets']} buckets"
                if "chunks" in c
                else "decomposed from the stored buckets"
            )
            + f"; audit passed ({m['audit']['checks']} checks); {m['source']['rows']:,} rows"
        )
        return
    schema = Schema(tuple(PublishedTable.from_entry(e) for e in m["tables"]))
    console.print(gnf_table(check_gnf(schema, parse_rules(m["rules"]))))
    l = m["privacy"]["l"]
    if "solves" in (m.get("method_cost") or {}):  # a multi-SA release's solver account
        console.print(multi_sa_line(m["method_cost"]))
    console.print(
        f"guarantee: for every rule Q -> S, Pr[t[S] | t[Q], release] <= 1/{l} (GNF, 000 Theorem 4.1); "
        f"audit passed ({m['audit']['checks']} checks); {m['source']['rows']:,} rows in {m['partitions']} partition(s)"
    )


def check_report(report) -> Table:
    """`vpub check`'s report (utility/check.py's CheckReport)."""
    t = Table(
        title=f"{report.rows:,} rows in {report.classes:,} equivalence classes of {', '.join(report.qi)}; sensitive: {report.sensitive}"
    )
    t.add_column("measure / model")
    t.add_column("value / verdict")
    for name, value in report.measured.items():
        t.add_row(f"table's {name}", f"{value:,.4g}")
    for name, c in report.checks.items():
        verdict = (
            "[green]holds[/green]"
            if c["passed"]
            else f"[red]fails[/red] in {c['failing_classes']:,} classes ({c['rows_in_failing']:,} rows)"
        )
        t.add_row(name, verdict)
    for w in report.worst:
        t.add_row(
            "smallest class: " + ", ".join(f"{a}={w[a]}" for a in report.qi),
            f"k {w['k']}, l {w['distinct_l']}, t {w['t']:.3f}",
        )
    return t


def risk_table(risks: dict[str, dict[str, float]]) -> Table:
    """Per table of a release (a column each): utility/risk.py's figures."""
    t = Table(title="re-identification risk and information loss (utility/risk.py)")
    t.add_column("figure")
    for name in risks:
        t.add_column(name, justify="right")
    from .utility.risk import FIGURES

    for c in FIGURES:
        t.add_row(c.replace("_", " "), *(f"{r[c]:,.4g}" if c in r else "-" for r in risks.values()))
    return t
