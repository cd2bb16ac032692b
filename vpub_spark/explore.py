"""`vpub explore`: a privacy-utility sweep. One job config is published at each value of
its privacy parameter (l, or m for marginals) into a scratch directory, each release
measured as `vpub utility` measures it (KL divergence, the relative error of the same
workload) and timed; the page draws the curve and recommends a value.

Decisions: the rules stay fixed across the sweep: given rules as written; random rules
drawn once, at the largest value at which some attribute can be a rule's right-hand
side, so every value is judged on the same rules. A value at which those rules cannot
be met (an attribute not l-eligible) is skipped and shown as skipped. The
recommendation is the largest value whose workload's *median* relative error stays
within the budget (the median, since a few queries of tiny exact answers dominate the
mean). The scratch releases, their run records and stores are removed at the end: a
sweep publishes nothing.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path

from .config import PublishConfig, RandomRules, with_overrides
from .datasets.presets import input_table
from .engines.base import Engine
from .errors import PrivacyError, SpecError
from .publishing.method import choose_rules
from .publishing.pipeline import publish
from .reporting import plots
from .reporting.facts import WORKLOAD
from .reporting.html import figure, page, table
from .storage import table_kind
from .utility.evaluate import evaluate


@dataclass(frozen=True)
class SweepPoint:
    """One value of the sweep: measured, or skipped with the reason."""

    value: int
    skipped: str | None = None
    publish_seconds: float = 0.0
    kl: float = 0.0
    mean_error: float = 0.0
    median_error: float = 0.0


@dataclass(frozen=True)
class Sweep:
    """A sweep's points in order, its rules, budget and recommended value (None: none
    within the budget)."""

    parameter: str
    budget: float
    rules: list[str]
    points: list[SweepPoint]
    recommended: int | None

    @property
    def measured(self) -> list[SweepPoint]:
        return [p for p in self.points if p.skipped is None]


def parse_vary(text: str) -> tuple[str, list[int]]:
    """`l=2,3,5` -> ("l", [2, 3, 5]): the parameter and its distinct values, ascending.

    Raises:
        SpecError: not `l=` or `m=` followed by whole numbers of at least 2.
    """
    name, _, values = text.partition("=")
    name = name.strip()
    try:
        numbers = sorted({int(v) for v in values.split(",") if v.strip()})
    except ValueError:
        numbers = []
    if name not in ("l", "m") or not numbers or numbers[0] < 2:
        raise SpecError(
            f"--vary {text!r}: expected l=... or m=... with whole numbers >= 2, e.g. l=2,3,5"
        )
    return name, numbers


def explore(
    cfg: PublishConfig, engine: Engine, parameter: str, values: list[int], budget: float
) -> Sweep:
    """Publish `cfg` at each value into a scratch directory and measure each release.

    Args:
        cfg: the job config (its input files are the source the releases are measured on).
        engine: the engine that publishes.
        parameter: "l" (l-diversity) or "m" (m-invariance, method marginals).
        values: the values to try, ascending.
        budget: the median relative error the recommendation must stay within.

    Returns:
        The sweep.

    Raises:
        SpecError: the parameter does not fit the config's privacy model, or the input
            is not files.
        PrivacyError: no value can be published.
    """
    check_sweep(cfg, parameter)
    scratch = Path(tempfile.mkdtemp(prefix="vpub-explore-"))
    try:
        cfg, rules = fixed_rules(cfg, engine, parameter, values)
        points = [_point(cfg, engine, parameter, v, scratch) for v in values]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not any(p.skipped is None for p in points):
        raise PrivacyError(
            f"no value of {parameter} in {', '.join(map(str, values))} can be published: "
            + str(points[0].skipped)
        )
    within = [p.value for p in points if p.skipped is None and p.median_error <= budget]
    return Sweep(parameter, budget, rules, points, max(within) if within else None)


def check_sweep(cfg: PublishConfig, parameter: str) -> None:
    """Refuse a parameter the config's privacy model does not have, or a table input.

    Raises:
        SpecError: either.
    """
    marginal = cfg.privacy.model == "m-invariance"
    if (parameter == "m") != marginal:
        raise SpecError(
            f"--vary {parameter}=...: the config's privacy model is {cfg.privacy.model}; "
            + ("vary m" if marginal else "vary l")
        )
    if table_kind(cfg.input_path):
        raise SpecError("vpub explore measures releases against input files (input.path)")


def _at(cfg: PublishConfig, parameter: str, value: int) -> PublishConfig:
    return with_overrides(cfg, l=value) if parameter == "l" else with_overrides(cfg, m=value)


def fixed_rules(
    cfg: PublishConfig, engine: Engine, parameter: str, values: list[int]
) -> tuple[PublishConfig, list[str]]:
    """The config with its rules written out: random ones drawn at the largest value at
    which they can be drawn (the module's decision); and the rules as text."""
    if not isinstance(cfg.rules, RandomRules):
        return cfg, [str(r) for r in cfg.rules]
    path, spec = input_table(cfg.input_path, cfg.table, engine.reads_object_stores)
    loaded = engine.load(path, spec, cfg.input_format)
    for value in reversed(values):
        try:
            kept, _ = choose_rules(_at(cfg, parameter, value), loaded)
        except PrivacyError:
            continue
        return replace(cfg, rules=tuple(r.as_dict() for r in kept)), [str(r) for r in kept]
    raise PrivacyError(
        f"no attribute can be a rule's right-hand side at {parameter} = {values[0]}; lower it"
    )


def _point(
    cfg: PublishConfig, engine: Engine, parameter: str, value: int, scratch: Path
) -> SweepPoint:
    """Publish at `value` into `scratch` and measure, or the reason it was skipped."""
    run = scratch / f"{parameter}{value}"
    (run / "private").mkdir(parents=True, mode=0o700)
    at = with_overrides(
        _at(cfg, parameter, value),
        state=str(run / "store") if cfg.marginals is not None else None,
        overwrite=True,
        output_path=str(run / "releases"),
        release_id=f"explore-{parameter}{value}",
        private_dir=str(run / "private"),
    )
    t0 = time.perf_counter()
    try:
        result = publish(at, engine)
    except PrivacyError as e:
        return SweepPoint(value, skipped=str(e))
    seconds = time.perf_counter() - t0
    w = WORKLOAD
    u = evaluate(
        str(result.path), cfg.input_path, int(w["qd"]), w["p"], int(w["queries"]), int(w["seed"])
    )
    return SweepPoint(value, None, seconds, u.kl, u.mean_relative_error, u.median_relative_error)


def sweep_page(sweep: Sweep, title: str) -> str:
    """The sweep as a self-contained HTML page: the recommendation, the curve, the table.

    Args:
        sweep: `explore`'s result.
        title: what was swept (the config's name).

    Returns:
        The HTML document.
    """
    p, done = sweep.parameter, sweep.measured
    rows = [
        (
            str(pt.value),
            f"skipped: {escape(pt.skipped or '')}" if pt.skipped else f"{pt.kl:.4f}",
            "" if pt.skipped else f"{pt.mean_error:.4f}",
            "" if pt.skipped else f"{pt.median_error:.4f}",
            "" if pt.skipped else f"{pt.publish_seconds:.2f}",
        )
        for pt in sweep.points
    ]
    body = [
        f"<h1>Privacy against utility: {escape(title)}</h1>",
        f'<p class="recommend" id="recommendation">{escape(recommendation(sweep))}</p>',
        f"<p>Rules, fixed across the sweep: {escape('; '.join(sweep.rules) or 'none')}. "
        f"Workload: {WORKLOAD['queries']:,} queries (qd = {WORKLOAD['qd']}, "
        f"p = {WORKLOAD['p']:.0%}, seed {WORKLOAD['seed']}), as vpub utility.</p>",
        figure(
            plots.tradeoff(
                p,
                [pt.value for pt in done],
                [pt.median_error for pt in done],
                [pt.kl for pt in done],
                sweep.budget,
            ),
            "privacy-utility curve",
        ),
        table(
            (p, "KL divergence (nats)", "mean rel. error", "median rel. error", "publish (s)"),
            rows,
            (True, False, True, True, True),
        ),
    ]
    return page(f"Privacy against utility: {title}", body, sweep_data(sweep))


def recommendation(sweep: Sweep) -> str:
    """The recommendation line: the largest value within the budget, or why none is."""
    p = sweep.parameter
    if sweep.recommended is None:
        return (
            f"No {p} keeps the workload's median relative error within the budget of "
            f"{sweep.budget:g}: raise the budget or try smaller values of {p}."
        )
    point = next(pt for pt in sweep.points if pt.value == sweep.recommended)
    return (
        f"Recommended: {p} = {sweep.recommended}, the largest {p} whose median relative "
        f"error ({point.median_error:.4f}) stays within the budget of {sweep.budget:g}."
    )


def sweep_data(sweep: Sweep) -> dict:
    return {
        "parameter": sweep.parameter,
        "budget": sweep.budget,
        "recommended": sweep.recommended,
        "rules": sweep.rules,
        "points": [vars(pt) for pt in sweep.points],
    }
