"""`vpub compare`: which comparison a config asks for, run it, write and summarize it.

A config with a `marginals:` section is 002 §4's (m-invariant marginals against ANGEL,
vpub_bench/compare_marginals.py); one with `statdb:` is 004 §9's (the statistical
database against its baselines, vpub_bench/compare_statdb.py); any other is 000 §6's
(the rule-based methods, vpub_bench/compare.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from vpub_spark.config import resolve_paths
from vpub_spark.options import parse_file
from vpub_spark.tablespec import load_yaml

from .common import ComparisonConfig
from .compare import MEASURES, CompareConfig, run_compare, write_results
from .compare_marginals import MarginalsCompareConfig, run_marginals_compare
from .compare_statdb import MEASURES as STATDB_MEASURES
from .compare_statdb import StatdbCompareConfig, plot_intervals, run_statdb_compare
from .compare_streamliner import (
    CONDITIONS,
    StreamlinerCompareConfig,
    run_streamliner_compare,
)
from .compare_streamliner import MEASURES as STREAMLINER_MEASURES


@dataclass(frozen=True)
class Comparison:
    """A parsed comparison: its config, how to run it, what it measures."""

    cfg: ComparisonConfig
    run: Callable[..., pd.DataFrame]
    unit: str  # what one step of progress is
    measures: dict[str, str]  # plotted: column -> label
    columns: tuple[str, ...]  # summarized
    plots: Callable[..., list[Path]] | None = None  # more plots: (results, out, title)

    @property
    def steps(self) -> int:
        return sum(len(sweep[1]) for sweep in self.cfg.sweeps) * self.cfg.repeats


def load_comparison(
    path: str, repeats: int | None = None, queries: int | None = None, out: str | None = None
) -> Comparison:
    raw = resolve_paths(load_yaml(path), Path(path).parent)  # as a publish config: file-relative
    if isinstance(raw, dict) and "marginals" in raw:
        measures = {"relative_error": "mean relative error", "time_s": "time for M1..Mk (s)"}
        comp = Comparison(
            parse_file(MarginalsCompareConfig, raw, path),
            run_marginals_compare,
            "points",
            measures,
            ("relative_error", "median_error", "time_s"),
        )
    elif isinstance(raw, dict) and "streamliner" in raw:
        comp = Comparison(
            parse_file(StreamlinerCompareConfig, raw, path),
            run_streamliner_compare,
            "points",
            STREAMLINER_MEASURES,
            ("dm_ratio", "time_s", *(f"qwe_{c}" for c in CONDITIONS)),
        )
    elif isinstance(raw, dict) and "statdb" in raw:
        comp = Comparison(
            parse_file(StatdbCompareConfig, raw, path),
            run_statdb_compare,
            "points",
            STATDB_MEASURES,
            ("aar", "ari_low", "ari_high", "lsd", "held", "query_ms"),
            plot_intervals,
        )
    else:
        comp = Comparison(
            parse_file(CompareConfig, raw, path),
            run_compare,
            "rule sets",
            MEASURES,
            ("kl", "relative_error", "time_s"),
        )
    overrides: dict[str, Any] = {"repeats": repeats, "out": out, "queries": queries}
    return replace(
        comp, cfg=replace(comp.cfg, **{k: v for k, v in overrides.items() if v is not None})
    )


def run_comparison(
    comp: Comparison, progress: Callable[[int], object] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, list[Path]]:
    """(every result, the means per sweep, value and method, the files written)."""
    results = comp.run(comp.cfg, progress)
    title = Path(comp.cfg.input_path).name
    files = write_results(results, comp.cfg, title, comp.measures)
    if comp.plots is not None:
        files += comp.plots(results, Path(comp.cfg.out), title)
    summary = results.groupby(["sweep", "value", "method"], sort=False)[list(comp.columns)].mean()
    return results, summary.reset_index(), files
