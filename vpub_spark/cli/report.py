"""`vpub report` and `vpub explore`: a release's report and a privacy-utility sweep, each
one self-contained HTML file (docs/tutorials/report.md). A page is written only when
all of it was made, through a temporary file renamed into place: a failed run leaves
nothing."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from ..report import console


def write_page(out: Path, html: str) -> None:
    """`html` into `out` (its directory must exist), whole or not at all: written to a
    temporary file beside it, flushed to disk, then renamed into place."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:  # the umask's mode, as any new file
            f.write(html)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def cmd_report(args: argparse.Namespace) -> int:
    from ..release.reader import ReadAhead

    t0 = time.perf_counter()
    with console.status("auditing and measuring the release ..."):
        ahead = ReadAhead(args.release)  # its parts read while the measures are imported
        from ..engines.pool import default_workers
        from ..reporting import plots
        from ..reporting.facts import release_facts
        from ..reporting.html import release_page

        facts = release_facts(
            args.release,
            args.source,
            args.secret,
            args.verify_key,
            meanwhile=plots.load,
            ahead=ahead,
        )
        html = release_page(facts, default_workers())  # figures drawn side by side
    out = Path(args.out or f"{Path(facts.release_id).name}-report.html")
    write_page(out, html)
    view = "owner's view, with the source" if args.source else "reader's view"
    console.print(
        f"report of {facts.release_id} ({view}; audit {'passed' if facts.audit.passed else 'FAILED'}) "
        f"written to {out} ({len(html) / 1024:,.0f} KiB) in {time.perf_counter() - t0:.1f} s"
    )
    return 0 if facts.audit.passed else 1  # as vpub audit: a failed audit is exit 1


def cmd_explore(args: argparse.Namespace) -> int:
    from ..config import load_config, with_overrides
    from ..explore import check_sweep, explore, parse_vary, recommendation, sweep_page
    from .common import job_engine

    parameter, values = parse_vary(args.vary)
    cfg = with_overrides(load_config(args.config), input_path=args.input, engine=args.engine)
    check_sweep(cfg, parameter)
    cfg, engine, why = job_engine(cfg)
    console.print(
        f"exploring {parameter} = {', '.join(map(str, values))} on the {cfg.engine} engine ({why})"
    )
    t0 = time.perf_counter()
    if cfg.engine == "spark":
        engine.start()
    with console.status(f"publishing and measuring {len(values)} releases ..."):
        sweep = explore(cfg, engine, parameter, values, args.budget)
    out = Path(args.out or f"explore-{Path(args.config).stem}.html")
    write_page(out, sweep_page(sweep, Path(args.config).name))
    for p in sweep.points:
        console.print(
            f"  {parameter} = {p.value}: skipped ({p.skipped})"
            if p.skipped
            else f"  {parameter} = {p.value}: KL {p.kl:.4f}, median relative error "
            f"{p.median_error:.4f}, mean {p.mean_error:.4f}, published in {p.publish_seconds:.2f} s"
        )
    console.print(recommendation(sweep))
    console.print(f"sweep written to {out} in {time.perf_counter() - t0:.1f} s")
    return 0


def register(sub) -> None:
    rp = sub.add_parser(
        "report", help="a release's report: one self-contained HTML file with plots"
    )
    rp.add_argument("release", help="a committed release's directory")
    rp.add_argument(
        "--source",
        help="the data it was published from: adds the owner's view (distributions, errors, KL)",
    )
    rp.add_argument("--secret", help="the owner's run record or seed file: checks the fingerprint")
    rp.add_argument("--verify-key", help="an Ed25519 public key the signature must verify with")
    rp.add_argument("--out", help="the HTML file (default: RELEASE_ID-report.html)")
    rp.set_defaults(func=cmd_report)
    ex = sub.add_parser(
        "explore", help="publish a config at several l (or m) and draw privacy against utility"
    )
    ex.add_argument("--config", required=True, help="the job config to sweep")
    ex.add_argument("--vary", required=True, help="l=2,3,5,8,10 (or m=... for marginals)")
    ex.add_argument(
        "--budget",
        type=float,
        default=0.25,
        help="the workload's median relative error the recommendation stays within (default 0.25)",
    )
    ex.add_argument("--input", help="override input.path")
    ex.add_argument("--engine", choices=["auto", "spark", "inprocess"], help="override engine")
    ex.add_argument("--out", help="the HTML file (default: explore-CONFIG.html)")
    ex.set_defaults(func=cmd_explore)
