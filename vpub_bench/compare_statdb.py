"""`vpub compare` for the statistical database (004 §9, Figures 7-10): per table size n,
QI count d and repeat, every method's anonymized version made once, then 004 §9's
workload and measures.

The methods, the measures and the decision l = m: docs/benchmarks/statdb.md, "Accuracy
against the baselines".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from vpub_spark.errors import SpecError
from vpub_spark.kernels.anatomy import GROUP, anatomize
from vpub_spark.kernels.mondrian import mondrian
from vpub_spark.kernels.statdb import (
    Cells,
    Query,
    SensitiveCounts,
    StaticAnatomy,
    StaticGeneralization,
    a_count_cells,
    g_count_cells,
    perturb,
    perturbed_interval,
    qi_mask,
    retention,
    signature_buckets,
)
from vpub_spark.options import option
from vpub_spark.statdb.workload import workload

from .common import (
    ComparisonConfig,
    load_input,
    model_option,
    optional,
    sweeps_option,
)
from .compare import label_axes, save_figure
from .compare_marginals import bucketize_table

PARAMETERS = ("d", "ql", "lam", "n")
METHODS = ("dyn-ana", "sta-ana", "ran-pert", "dyn-gen", "sta-gen")
MEASURES = {
    "ari_length": "mean result interval length (ARI)",
    "lsd": "interval length standard deviation (LSD)",
}


@dataclass(frozen=True, kw_only=True)
class StatdbCompareConfig(ComparisonConfig):
    """004 §9's comparison: the statistical database against its baselines; the
    defaults are 004 Table 4's (d: every QI attribute)."""

    PARAMETERS: ClassVar[tuple[str, ...]] = PARAMETERS
    out: str = option("out/compare/statdb", key="output.path", doc="where the results go")
    model: str | None = model_option("m-invariance")
    m: int = option(10, key="privacy.m", minimum=2, doc="m of the buckets")
    sensitive: str = option(key="statdb.sensitive", required=True, doc="the sensitive attribute")
    qi: tuple[str, ...] = option(
        key="statdb.qi", required=True, doc="the QI attributes (d takes the first d)"
    )
    chunk_rows: int = option(50_000, key="statdb.chunk_rows", minimum=1, doc="rows per chunk")
    methods: tuple[str, ...] = option(
        METHODS, key="compare.methods", choices=METHODS, doc="the methods compared"
    )
    d: int | None = option(None, key="compare.d", minimum=1, doc="QI attributes used (all)")
    ql: float = option(0.06, key="compare.ql", doc="a query's range length, as a share")
    lam: int = option(2, key="compare.lam", minimum=1, doc="the perturbation's lambda")
    n: int | None = option(None, key="compare.n", minimum=1, doc="rows used (all)")
    sweeps: tuple[tuple, ...] = sweeps_option((("ql", (0.02, 0.04, 0.06, 0.08, 0.1)),), PARAMETERS)
    queries: int = option(2000, key="compare.queries", minimum=1, doc="the workload's size")

    @property
    def defaults(self) -> dict[str, Any]:
        """Each parameter's value where a sweep does not vary it (d: every QI attribute)."""
        return super().defaults | {"d": self.d or len(self.qi)}


Answer = Callable[[Query], tuple[float, float]]


def _columns(frame: pd.DataFrame, names) -> dict[str, np.ndarray]:
    return {a: frame[a].to_numpy() for a in names}


def versions(
    frame: pd.DataFrame, qi: tuple[str, ...], cfg: StatdbCompareConfig, sizes, methods, seed: int
) -> dict[str, tuple[Answer, float]]:
    """Each method's anonymized version of `frame` on QI `qi`: (how it answers a query,
    the seconds it took to make)."""
    s, m, n = cfg.sensitive, cfg.m, len(frame)
    made: dict[str, tuple[Answer, float]] = {}
    extents = {a: sizes[a] - 1 for a in qi}
    if {"dyn-ana", "dyn-gen"} & set(methods):
        t0 = time.perf_counter()
        canon, bucket, _ = bucketize_table(
            frame, qi, s, m, sizes, seed, cfg.chunk_rows, 0, 32, "none"
        )
        values = canon[s].to_numpy(np.int64)
        cells, codes = Cells.of(signature_buckets(bucket, values), values), _columns(canon, qi)
        took = time.perf_counter() - t0
        made["dyn-ana"] = (
            lambda q: a_count_cells(cells, qi_mask(codes, q.ranges, n), q.sensitive),
            took,
        )
        made["dyn-gen"] = (lambda q: g_count_cells(cells, codes, q), took)
    if "sta-ana" in methods:
        t0 = time.perf_counter()
        qit, st = anatomize(frame[[*qi, s]], s, m, seed, qi)
        ana = StaticAnatomy(
            qit[GROUP].to_numpy(),
            SensitiveCounts(
                st[GROUP].to_numpy(),
                st[s].to_numpy(),
                st["count"].to_numpy(),
                int(qit[GROUP].max()) + 1,
            ),
        )
        qit_codes = _columns(qit, qi)
        made["sta-ana"] = (
            lambda q: ana.interval(qi_mask(qit_codes, q.ranges, n), q.sensitive),
            time.perf_counter() - t0,
        )
    if "sta-gen" in methods:
        t0 = time.perf_counter()
        group = mondrian(frame[list(qi)], extents, frame[s].to_numpy(), l=m)
        gen = StaticGeneralization.of(group, frame, qi, frame[s].to_numpy(np.int64))
        made["sta-gen"] = (gen.interval, time.perf_counter() - t0)
    if "ran-pert" in methods:
        t0 = time.perf_counter()
        p, domain, plain = retention(m, sizes[s]), sizes[s], _columns(frame, qi)
        shown = perturb(frame[s].to_numpy(np.int64), p, domain, seed)
        made["ran-pert"] = (
            lambda q: perturbed_interval(
                qi_mask(plain, q.ranges, n), shown, q.sensitive, p, domain
            ),
            time.perf_counter() - t0,
        )
    return made


def measure(answer: Answer, queries: list[Query], truth: np.ndarray) -> dict[str, float]:
    """004 §9's ARI and LSD of one method on one workload, what held, and its speed."""
    ends, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        ends.append(answer(q))
        times.append(time.perf_counter() - t0)
    low, high = np.array(ends, dtype=np.float64).T
    length = high - low
    return {
        "ari_low": float(low.mean()),
        "ari_high": float(high.mean()),
        "ari_length": float(length.mean()),
        "lsd": float(length.std()),
        "held": float(((low <= truth) & (truth <= high)).mean()),
        "query_ms": 1000 * float(np.median(times)),
    }


def _check(cfg: StatdbCompareConfig, names) -> None:
    missing = sorted({cfg.sensitive, *cfg.qi} - set(names))
    if missing:
        raise SpecError(
            f"unknown attributes {', '.join(missing)}; the table has {', '.join(names)}"
        )
    for vary, values in cfg.sweeps:
        bad = [v for v in values if vary == "d" and not 1 <= int(v) <= len(cfg.qi)]
        if bad:
            raise SpecError(f"d must be between 1 and {len(cfg.qi)} (statdb.qi), not {bad}")


def run_statdb_compare(cfg: StatdbCompareConfig, progress=None) -> pd.DataFrame:
    engine, loaded = load_input(cfg.input_path, cfg.table, cfg.input_format, None, cfg.seed)
    _check(cfg, loaded.names)
    sizes = {a: loaded.dictionaries[a].size for a in loaded.names}
    rows: list[dict] = []
    cache: dict[tuple, tuple[pd.DataFrame, dict[str, tuple[Answer, float]]]] = {}
    for vary, values in cfg.sweeps:
        for value in values:
            p = dict(cfg.defaults) | {vary: value}
            n = loaded.rows if p["n"] is None else int(p["n"])
            qi = cfg.qi[: int(p["d"])]
            for rep in range(cfg.repeats):
                if (n, qi, rep) not in cache:
                    table = loaded if n >= loaded.rows else engine.sample(loaded, n, cfg.seed + rep)
                    cache.clear()  # one (n, d) in memory at a time
                    cache[(n, qi, rep)] = (
                        table.data,
                        versions(table.data, qi, cfg, sizes, cfg.methods, cfg.seed + rep),
                    )
                frame, made = cache[(n, qi, rep)]
                queries = workload(
                    sizes,
                    list(qi),
                    cfg.sensitive,
                    int(p["lam"]),
                    float(p["ql"]),
                    cfg.queries,
                    cfg.seed * 1000 + rep,
                )
                plain = _columns(frame, qi)
                s = frame[cfg.sensitive].to_numpy()
                truth = np.array(
                    [
                        (qi_mask(plain, q.ranges, len(frame)) & np.isin(s, list(q.sensitive))).sum()
                        for q in queries
                    ],
                    dtype=np.float64,
                )
                for method, (answer, built_s) in made.items():
                    rows.append(
                        {
                            "sweep": vary,
                            "value": str(value),
                            "method": method,
                            "n": len(frame),
                            "d": len(qi),
                            "ql": float(p["ql"]),
                            "lam": int(p["lam"]),
                            "repeat": rep,
                            "aar": float(truth.mean()),
                            **measure(answer, queries, truth),
                            "build_s": built_s,
                            "queries": len(queries),
                        }
                    )
                if progress:
                    progress(1)
    return pd.DataFrame(rows)


GROUPS = {
    "QI-revealing": ("dyn-ana", "sta-ana", "ran-pert"),
    "QI-concealing": ("dyn-gen", "sta-gen"),
}


def plot_intervals(results: pd.DataFrame, out, title: str) -> list:
    """004 Figures 7 and 9: per sweep, the AAR as a curve and each method's ARI as a bar
    from its mean lower to its mean upper end, QI-revealing and QI-concealing apart."""
    optional("matplotlib").use("Agg")
    plt = optional("matplotlib.pyplot")

    means = (
        results.groupby(["sweep", "value", "method"], sort=False)[["aar", "ari_low", "ari_high"]]
        .mean()
        .reset_index()
    )
    files = []
    for vary in means["sweep"].unique():
        part = means[means["sweep"] == vary]
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        for ax, (group, methods) in zip(axes, GROUPS.items(), strict=True):
            shown = [m for m in methods if m in set(part["method"])]
            for i, method in enumerate(shown):
                g = part[part["method"] == method]
                x = np.arange(len(g)) + (i - (len(shown) - 1) / 2) * 0.25
                ax.bar(x, g["ari_high"] - g["ari_low"], 0.22, bottom=g["ari_low"], label=method)
            aar = part.drop_duplicates("value")
            ax.plot(np.arange(len(aar)), aar["aar"], "k-o", markersize=3, label="AAR")
            ax.set_xticks(np.arange(len(aar)), aar["value"])
            label_axes(ax, vary, "query result", f"{title}: ARI, {group}")
        files.append(save_figure(fig, out / f"{vary}_ari.png"))
    return files
