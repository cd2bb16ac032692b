"""Self-contained HTML pages: a release's report (`release_page`) and a sweep's
(`sweep_page`, from `vpub_spark.explore`). One file each: the style inline, the figures
as data URIs, no script that runs and no request to anywhere. Numbers are formatted as
the commands print them (KL and errors to 4 decimals as `vpub utility`, risk figures to
4 significant digits as its table), and the page carries them as JSON too
(`<script type="application/json" id="report-data">`), for a program to read."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from html import escape

import numpy as np

from ..engines.pool import run_tasks
from ..utility.risk import FIGURES
from ..version import __version__
from . import plots
from .facts import ReleaseFacts, TableFacts

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 74rem; color: #222;
       padding: 0 1rem; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 1px solid #ccc; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0; } td, th { padding: .2rem .6rem;
       border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1d7a36; } .bad { color: #b3261e; font-weight: bold; }
.figures { display: flex; flex-wrap: wrap; gap: .5rem; } img { max-width: 100%; }
.meta { color: #555; } .recommend { font-size: 1.1rem; padding: .6rem; background: #eef5ee; }
"""

POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
"""A page loads nothing and runs nothing, wherever it is opened: its images are data
URIs, its style inline (`vpub serve` sends the same policy as a header)."""


def page(title: str, body: Iterable[str], data: dict) -> str:
    """An HTML document: the title, the body's parts in order and `data` as JSON."""
    payload = json.dumps(data, indent=1, default=_jsonable).replace("</", "<\\/")
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
            *body,
            f'<p class="meta">Made by vpub_spark {escape(__version__)}.</p>',
            f'<script type="application/json" id="report-data">{payload}</script>',
            "</body></html>",
        ]
    )


def _jsonable(v: object) -> object:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.integer | np.floating):
        return v.item()
    return str(v)


def table(
    header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool] = ()
) -> str:
    """An HTML table; cells already escaped or made of markup by the caller."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = (
            f'<td class="num">{c}</td>' if i < len(numeric) and numeric[i] else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def figure(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{escape(alt)}">'


PENDING = re.compile(r'<img src="@figure-(\d+)@"')  # `escape` leaves no `<` or `"` in text


class Drawings:
    """The figures a page asks for, drawn together once its text is laid out (`fill`):
    on forked workers when given more than one (`vpub report`: the Adult owner's report
    draws 12 figures, 1.1 s in one process, 0.7 s on two), else in this process (the
    default, which `vpub serve` keeps)."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[..., str], tuple]] = []

    def img(self, draw: Callable[..., str], args: tuple, alt: str) -> str:
        """An `<img>` whose data URI `draw(*args)` makes at `fill`."""
        self.jobs.append((draw, args))
        return figure(f"@figure-{len(self.jobs) - 1}@", alt)

    def fill(self, text: str, workers: int) -> str:
        uris = run_tasks(_draw, self.jobs, workers)
        return PENDING.sub(lambda m: f'<img src="{uris[int(m.group(1))]}"', text)


def _draw(job: tuple[Callable[..., str], tuple]) -> str:
    draw, args = job
    return draw(*args)


def release_page(facts: ReleaseFacts, workers: int = 1) -> str:
    """The report of one release: guarantee, audit, tables, the owner's view (when the
    facts hold it) and the limits.

    Args:
        facts: `reporting.facts.release_facts`.
        workers: forked processes to draw the figures on (1: this process).

    Returns:
        The HTML document.
    """
    drawings = Drawings()
    body = [
        *_heading(facts),
        *_guarantee_section(facts),
        *_audit_section(facts),
        *_tables_section(facts, drawings),
        *(_owner_section(facts, drawings) if facts.owner else []),
        "<h2>What this release cannot show</h2>",
        "<ul>" + "".join(f"<li>{escape(s)}</li>" for s in facts.limits) + "</ul>",
    ]
    text = page(f"Release report: {facts.release_id}", body, report_data(facts))
    return drawings.fill(text, workers)


def _heading(facts: ReleaseFacts) -> list[str]:
    m = facts.manifest
    source = m.get("source") or {}
    view = "the owner's view, with the source" if facts.owner else "the reader's view"
    return [
        f"<h1>Release report: {escape(facts.release_id)}</h1>",
        f'<p class="meta">{escape(str(m.get("method")))}, published {escape(str(m.get("created_at")))} '
        f"on the {escape(str(m.get('engine')))} engine from {int(source.get('rows', 0)):,} rows; "
        f"{escape(view)}.</p>",
    ]


def _guarantee_section(facts: ReleaseFacts) -> list[str]:
    return [
        "<h2>The guarantee</h2>",
        f'<p id="guarantee"><b>{escape(facts.guarantee)}</b></p>',
        '<ul id="rules">'
        + "".join(f"<li>{escape(s)}</li>" for s in facts.rule_sentences)
        + "</ul>",
        "<ul>" + "".join(f"<li>{escape(s)}</li>" for s in facts.guarantee_lines) + "</ul>",
    ]


def _audit_section(facts: ReleaseFacts) -> list[str]:
    a = facts.audit
    verdict = (
        f'<span class="ok">PASSED</span>: {len(a.checks)} checks on the published files'
        if a.passed
        else f'<span class="bad">FAILED</span>: {len(a.failures)} of {len(a.checks)} checks'
    )
    rows = [
        (
            escape(c.name),
            '<span class="ok">ok</span>' if c.ok else '<span class="bad">FAIL</span>',
            escape(c.detail),
        )
        for c in sorted(a.checks, key=lambda c: c.ok)
    ]
    rows += [("warning", "warn", escape(w)) for w in a.warnings]
    return [
        "<h2>The audit</h2>",
        f'<p id="audit">Audit {verdict}.</p>',
        f"<p>Signature: {escape(facts.signature)}. Lineage (newest first): "
        f"{escape(' <- '.join(facts.lineage))}.</p>",
        "<details><summary>Every check</summary>",
        table(("check", "result", "detail"), rows),
        "</details>",
    ]


def _tables_section(facts: ReleaseFacts, drawings: Drawings) -> list[str]:
    out = ["<h2>The tables</h2>"]
    for t in facts.tables:
        out += [
            f'<h3 id="table-{escape(t.name)}">{escape(t.name)} ({escape(t.kind)})</h3>',
            f"<p>{escape(', '.join(t.attributes))}; sensitive: {escape(t.sensitive or '-')}; "
            + (
                f'<span class="bad">unreadable: {escape(t.error)}</span></p>'
                if t.error
                else f"{t.rows:,} rows in {len(t.sizes):,} {'cells' if t.distinct is None else 'groups'}.</p>"
            ),
            *([] if t.error else ['<div class="figures">', *_table_figures(t, drawings), "</div>"]),
        ]
    out += [
        "<h3>Re-identification risk and information loss</h3>",
        table(
            ("figure", *(t.name for t in facts.tables)),
            ((r.replace("_", " "), *(risk_text(t.risk, r) for t in facts.tables)) for r in FIGURES),
            (False, *(True for _ in facts.tables)),
        ),
    ]
    return out


def risk_text(risk: dict[str, float], name: str) -> str:
    """A risk figure as `vpub utility`'s table prints it."""
    return f"{risk[name]:,.4g}" if name in risk else "-"


def _table_figures(t: TableFacts, drawings: Drawings) -> list[str]:
    unit = "cell" if t.distinct is None else "group"
    sizes = (t.sizes, f"{t.name}: rows per {unit}", f"rows in a {unit}")
    out = [drawings.img(plots.counts_histogram, sizes, f"{t.name} {unit} sizes")]
    if t.distinct is not None:
        title = f"{t.name}: distinct {t.sensitive} values per group"
        distinct = (t.distinct, title, "distinct values")
        out.append(drawings.img(plots.counts_histogram, distinct, title))
    return out


def _owner_section(facts: ReleaseFacts, drawings: Drawings) -> list[str]:
    assert facts.owner is not None
    u, w = facts.owner.utility, facts.owner.workload
    return [
        "<h2>The owner's view: the release against its source</h2>",
        f'<p id="utility">KL divergence: <b>{u.kl:.4f}</b> nats. Relative error over '
        f"{u.queries:,} queries (qd = {w['qd']}, p = {w['p']:.0%}, seed {w['seed']}): mean "
        f"<b>{u.mean_relative_error:.4f}</b>, median {u.median_relative_error:.4f} "
        f"({u.redrawn} queries with exact answer 0 redrawn).</p>",
        '<div class="figures">',
        drawings.img(plots.error_histogram, (u.errors,), "relative errors of the workload"),
        *(
            drawings.img(plots.distribution, (a.labels, a.true, a.estimate, a.name), a.name)
            for a in facts.owner.attributes
        ),
        "</div>",
    ]


def report_data(facts: ReleaseFacts) -> dict:
    """The report's numbers as JSON-ready values."""
    data: dict = {
        "release_id": facts.release_id,
        "guarantee": facts.guarantee,
        "rules": facts.rule_sentences,
        "audit": facts.audit.as_dict(),
        "signature": facts.signature,
        "lineage": facts.lineage,
        "tables": [
            {
                "name": t.name,
                "kind": t.kind,
                "rows": t.rows,
                "groups": len(t.sizes),
                "risk": t.risk,
            }
            for t in facts.tables
        ],
    }
    if facts.owner:
        u = facts.owner.utility
        data["utility"] = {
            "kl": u.kl,
            "mean_relative_error": u.mean_relative_error,
            "median_relative_error": u.median_relative_error,
            "queries": u.queries,
            "redrawn": u.redrawn,
            "workload": facts.owner.workload,
        }
    return data
