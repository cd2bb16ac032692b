"""`vpub compare`: the paper's comparison runs (000 §6, Figures 1-3 and 5-10): per sweep,
value and repeat, every method's schema (timed), every table anonymized in memory by
the release writer's anatomy kernel, KL and a 1,000-query workload's relative error.

The methods and the runs: docs/benchmarks/comparisons-000.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from vpub_spark.config import MultiSaSettings
from vpub_spark.decompose.gd import GdCost
from vpub_spark.decompose.methods import METHODS, design
from vpub_spark.decompose.multi_sa import split
from vpub_spark.engines.base import LoadedTable
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.estimate.models import EstimateModel, anonymized_model
from vpub_spark.estimate.multi_sa import multi_sa_model
from vpub_spark.kernels.bip import multi_sa_chunk
from vpub_spark.model import Schema
from vpub_spark.options import option
from vpub_spark.publishing.anatomy import schema_grouping, sharing_tables
from vpub_spark.rules import ineligibility, random_rules
from vpub_spark.utility.kl import kl_divergence
from vpub_spark.utility.queries import relative_errors, workload
from vpub_spark.utility.score import kl_scorer

from .common import (
    ComparisonConfig,
    load_input,
    model_option,
    optional,
    run_record,
    sample_rows_option,
    sweeps_option,
)

PARAMETERS = ("c", "l", "lhs", "qd", "p")


@dataclass(frozen=True, kw_only=True)
class CompareConfig(ComparisonConfig):
    """000 §6's comparison: the rule-based methods over random rule sets."""

    PARAMETERS: ClassVar[tuple[str, ...]] = PARAMETERS
    out: str = option("out/compare", key="output.path", doc="where the results go")
    sample_rows: int | None = sample_rows_option()
    model: str | None = model_option("l-diversity")
    l: int = option(2, key="privacy.l", minimum=2, doc="l, where a sweep does not vary it")
    methods: tuple[str, ...] = option(
        ("uad", "gd", "single_attribute"),
        key="compare.methods",
        choices=METHODS,
        doc="the methods compared",
    )
    c: int = option(5, key="compare.c", minimum=1, doc="rules per rule set")
    lhs: int = option(3, key="compare.lhs", minimum=1, doc="attributes on a rule's left side")
    qd: int = option(3, key="compare.qd", minimum=1, doc="attributes a query names")
    p: float = option(
        0.4, key="compare.p", doc="the share of each named attribute's domain a query selects"
    )
    sweeps: tuple[tuple, ...] = sweeps_option((("c", tuple(range(1, 10))),), PARAMETERS)
    repeats: int = option(5, key="compare.repeats", minimum=1, doc="random rule sets per point")
    gd_budget_s: float = option(60.0, key="gd.budget_s", doc="GD's time budget per run")
    gd_sample_rows: int = option(
        20_000, key="gd.sample_rows", minimum=1, doc="GD's KL scored on this sample"
    )
    multi_sa: MultiSaSettings = option(MultiSaSettings(), doc="`multi_sa_bip`'s solver")


def _design(
    method: str,
    names,
    rules,
    seed: int,
    engine: InProcessEngine,
    loaded: LoadedTable,
    sizes,
    l: int,
    cfg: CompareConfig,
) -> tuple[Schema, GdCost | None]:
    def scorer():  # GD's KL on a seeded sample, drawn as the publisher draws it
        return kl_scorer(engine.rows_sample(loaded, cfg.gd_sample_rows, seed), sizes, l, seed)

    return design(method, names, rules, seed, scorer, cfg.gd_budget_s)


def _anonymized_all(frame, schema, l: int, seed: int, sizes, cfg: CompareConfig) -> list:
    """Every table's model, anonymized in memory as the release does it (one
    partition): two or more anatomy tables publish one grouping."""
    shared = sharing_tables(schema.tables)
    group = schema_grouping(schema.tables, frame, l, seed)
    return [
        _anonymized(frame, t, l, seed, sizes, cfg, group if t.name in shared else None)
        for t in schema.tables
    ]


def _anonymized(
    frame, t, l: int, seed: int, sizes, cfg: CompareConfig, group=None
) -> EstimateModel:
    """A table's model, anonymized in memory by the release's kernel (one partition)."""
    if t.kind != "multi_sa":
        return anonymized_model(frame, t.attributes, t.sensitive, l, seed, group)
    qi, sa = split(t)
    res = multi_sa_chunk(frame, qi, sa, l, seed, cfg.multi_sa.solver, cfg.multi_sa.time_limit_s)
    return multi_sa_model(res.qit, res.st, t.attributes, sa, sizes)


def run_compare(cfg: CompareConfig, progress=None) -> pd.DataFrame:
    engine, loaded = load_input(
        cfg.input_path, cfg.table, cfg.input_format, cfg.sample_rows, cfg.seed
    )
    frame, names = loaded.data, loaded.names
    sizes = {a: loaded.dictionaries[a].size for a in names}
    domains = {a: loaded.dictionaries[a].labels for a in names}
    workloads: dict[tuple, Any] = {}
    rows = []
    for vary, values in cfg.sweeps:
        for k, value in enumerate(values):
            prm = dict(cfg.defaults) | {vary: value}
            l, c, lhs, qd, p = (
                int(prm["l"]),
                int(prm["c"]),
                int(prm["lhs"]),
                int(prm["qd"]),
                float(prm["p"]),
            )
            key = (qd, p)
            if key not in workloads:
                workloads[key] = workload(frame, domains, qd, p, cfg.queries, cfg.seed)
            wl = workloads[key]
            eligible = [a for a in names if ineligibility(a, *loaded.frequencies()[a], l) is None]
            for r in range(cfg.repeats):
                rules_seed = _rules_seed(cfg.seed, vary, k, r)
                rules = random_rules(names, c, lhs, rules_seed, eligible)
                for method in cfg.methods:
                    rows.append(
                        {
                            "sweep": vary,
                            "value": value,
                            "repeat": r,
                            "method": method,
                            "c": c,
                            "l": l,
                            "lhs": lhs,
                            "qd": qd,
                            "p": p,
                            "rules_seed": rules_seed,
                        }
                        | _measure(
                            method, rules, rules_seed, l, wl, engine, loaded, sizes, domains, cfg
                        )
                    )
                if progress:
                    progress(1)
    return pd.DataFrame(rows)


def _rules_seed(seed: int, vary: str, k: int, r: int) -> int:
    """The seed of the rule set drawn for repeat `r` of value `k` of the sweep of `vary`."""
    return int(np.random.SeedSequence([seed, PARAMETERS.index(vary), k, r]).generate_state(1)[0])


def _measure(
    method: str,
    rules,
    rules_seed: int,
    l: int,
    wl,
    engine: InProcessEngine,
    loaded: LoadedTable,
    sizes,
    domains,
    cfg: CompareConfig,
) -> dict:
    """One method on one rule set: its schema designed and every table anonymized (each
    timed), then the KL divergence and the workload's relative error."""
    frame = loaded.data
    t0 = time.perf_counter()
    schema, cost = _design(method, loaded.names, rules, rules_seed, engine, loaded, sizes, l, cfg)
    t1 = time.perf_counter()
    models = _anonymized_all(frame, schema, l, rules_seed, sizes, cfg)
    t2 = time.perf_counter()
    kl = kl_divergence(models, frame, domains)
    errors = relative_errors(models, wl, loaded.rows, domains)
    return {
        "tables": len(schema.tables),
        "kl": kl,
        "relative_error": float(errors.mean()),
        "design_s": t1 - t0,
        "anonymize_s": t2 - t1,
        "time_s": t2 - t0,
        "gd_budget_exhausted": cost.budget_exhausted if cost else None,
        "queries": len(errors),
        "queries_redrawn": wl.redrawn,
    }


MEASURES = {"kl": "KL-divergence", "relative_error": "relative error", "time_s": "time (s)"}


def write_results(
    results: pd.DataFrame, cfg, title: str, measures: dict[str, str] = MEASURES
) -> list[Path]:
    """results.parquet, results.csv, summary.csv (means per method and value), run.json
    (the run's command, date and machine) and one PNG per sweep and measure, shaped like 000 Figures 1-3 and 5-10 (002 Figures 2-5)."""
    optional("matplotlib").use("Agg")
    plt = optional("matplotlib.pyplot")

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    results.to_parquet(out / "results.parquet", index=False)
    results.to_csv(out / "results.csv", index=False)
    extra = [c for c in ("tables", "median_error", "box_width") if c in results.columns]
    summary = (
        results.groupby(["sweep", "value", "method"], sort=False)[[*measures, *extra]]
        .mean()
        .reset_index()
    )
    summary.to_csv(out / "summary.csv", index=False)
    (out / "run.json").write_text(json.dumps(run_record(), indent=2) + "\n")
    files = []
    labels = measures
    for vary in summary["sweep"].unique():
        part = summary[summary["sweep"] == vary]
        for measure, label in labels.items():
            if part[measure].isna().all():
                continue  # a sweep that does not measure it (003's n sweep: time only)
            fig, ax = plt.subplots(figsize=(5, 3.6))
            for method, g in part.groupby("method", sort=True):
                ax.plot(g["value"], g[measure], marker="o", label=method)
            label_axes(ax, vary, label, f"{title}: {label}, vary {vary}")
            files.append(save_figure(fig, out / f"{vary}_{measure}.png"))
    return files


def label_axes(ax, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def save_figure(fig, path: Path) -> Path:
    plt = optional("matplotlib.pyplot")

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
