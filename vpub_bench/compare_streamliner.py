"""`vpub compare` for the privacy streamliner (003 §4, Figures 1-7): RDA, GDA, l-diverse
Mondrian and anatomy, measured by the grouping's time, the discernibility metric
against its optimum and 003 §4.2's query-workload error.

The measures and their decisions: docs/explanation/streamliner.md, "Measured: against
Mondrian and anatomy".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from vpub_spark.errors import SpecError
from vpub_spark.kernels.anatomy import GROUP, anatomize
from vpub_spark.kernels.mondrian import mondrian
from vpub_spark.kernels.statdb import qi_mask
from vpub_spark.kernels.streamliner import ALGORITHMS, streamline
from vpub_spark.options import option

from .common import ComparisonConfig, load_input, model_option, sweeps_option
from .compare_marginals import generalized_estimator

PARAMETERS = ("l", "n")
METHODS = ("rda", "gda", "mondrian", "anatomy")
CONDITIONS = ("age", "gender", "age_gender", "all")
MEASURES = {"dm_ratio": "DM / (n l)", "time_s": "grouping time (s)"} | {
    f"qwe_{c}": f"query error, predicate on {c.replace('_', ' and ')}" for c in CONDITIONS
}


@dataclass(frozen=True, kw_only=True)
class StreamlinerCompareConfig(ComparisonConfig):
    """003 §4's comparison: RDA and GDA beside l-diverse Mondrian and anatomy."""

    PARAMETERS: ClassVar[tuple[str, ...]] = PARAMETERS
    out: str = option("out/compare/streamliner", key="output.path", doc="where results go")
    model: str | None = model_option("l-diversity")
    l: int = option(8, key="privacy.l", minimum=2, doc="l, where a sweep does not vary it")
    sensitive: str = option(
        key="streamliner.sensitive", required=True, doc="the sensitive attribute"
    )
    qi: tuple[str, ...] = option(key="streamliner.qi", required=True, doc="the QI attributes")
    weights: tuple[tuple[str, int], ...] | None = option(
        None, key="streamliner.weights", doc="GDA's attribute weights (003 §4.2)"
    )
    methods: tuple[str, ...] = option(
        METHODS, key="compare.methods", choices=METHODS, doc="the methods compared"
    )
    n: int | None = option(None, key="compare.n", minimum=1, doc="rows used (all)")
    time_methods: tuple[str, ...] = option(
        ("rda", "gda"), key="compare.time_methods", choices=METHODS, doc="methods timed"
    )
    sweeps: tuple[tuple, ...] = sweeps_option((("l", (6, 7, 8, 9, 10)),), PARAMETERS)


def grouping(
    method: str, frame: pd.DataFrame, cfg: StreamlinerCompareConfig, l: int, sizes, seed: int
) -> np.ndarray:
    """Each method's groups (dense ids per row of `frame`)."""
    codes, s = frame[list(cfg.qi)], frame[cfg.sensitive].to_numpy(np.int64)
    if method in ALGORITHMS:
        return streamline(method, codes, s, l, seed, sizes, dict(cfg.weights or ()) or None).group
    if method == "mondrian":
        return mondrian(codes, {a: sizes[a] - 1 for a in cfg.qi}, s, l=l)
    qit, _ = anatomize(
        frame[[*cfg.qi, cfg.sensitive]].assign(__row=np.arange(len(frame))),
        cfg.sensitive,
        l,
        seed,
        [*cfg.qi, "__row"],
    )
    group = np.empty(len(frame), dtype=np.int64)
    group[qit["__row"].to_numpy()] = qit[GROUP].to_numpy()
    return group


def workload(frame: pd.DataFrame, cfg: StreamlinerCompareConfig, sizes, count: int, seed: int):
    """Per condition: `count` queries (QI ranges, sensitive range) and their exact answers."""
    rng = np.random.default_rng(seed)
    attrs = {
        "age": ["age"],
        "gender": ["gender"],
        "age_gender": ["age", "gender"],
        "all": list(cfg.qi),
    }
    cols = {a: frame[a].to_numpy() for a in [*cfg.qi, cfg.sensitive]}

    def interval(a: str) -> tuple[int, int]:
        length = max(1, round(0.1 * sizes[a]))
        lo = int(rng.integers(0, sizes[a] - length + 1))
        return lo, lo + length - 1

    out = {}
    for cond, names in attrs.items():
        missing = [a for a in names if a not in cfg.qi]
        if missing:
            raise SpecError(f"003's query conditions need QI attributes {', '.join(missing)}")
        qs = [({a: interval(a) for a in names}, interval(cfg.sensitive)) for _ in range(count)]
        exact = np.array(
            [
                (
                    qi_mask(cols, r, len(frame))
                    & (cols[cfg.sensitive] >= lo)
                    & (cols[cfg.sensitive] <= hi)
                ).sum()
                for r, (lo, hi) in qs
            ],
            dtype=np.float64,
        )
        out[cond] = (qs, exact)
    return out


def estimator(
    method: str, frame: pd.DataFrame, group: np.ndarray, cfg: StreamlinerCompareConfig, sizes
):
    """app for a query (ranges, sensitive range) from the method's release."""
    if method != "anatomy":
        pub = generalized_estimator(frame, group, cfg.qi, cfg.sensitive, sizes)
        return pub.estimate
    s = frame[cfg.sensitive].to_numpy()
    size = np.bincount(group).astype(np.float64)
    cols = {a: frame[a].to_numpy() for a in cfg.qi}

    def estimate(ranges, s_range) -> float:
        q = np.bincount(group[qi_mask(cols, ranges, len(frame))], minlength=len(size))
        hit = (s >= s_range[0]) & (s <= s_range[1])
        share = np.bincount(group, weights=hit, minlength=len(size)) / size
        return float((q * share).sum())

    return estimate


def _point(frame, cfg, l, sizes, seed, methods, queries) -> list[dict]:
    n, rows = len(frame), []
    for method in methods:
        t0 = time.perf_counter()
        group = grouping(method, frame, cfg, l, sizes, seed)
        took = time.perf_counter() - t0
        dm = float((np.bincount(group).astype(np.float64) ** 2).sum())
        row = {"method": method, "l": l, "n": n, "time_s": took, "dm": dm, "dm_ratio": dm / (n * l)}
        if queries is not None:
            est = estimator(method, frame, group, cfg, sizes)
            delta = 0.005 * n
            for cond, (qs, exact) in queries.items():
                app = np.array([est(r, sr) for r, sr in qs])
                row[f"qwe_{cond}"] = float((np.abs(exact - app) / np.maximum(exact, delta)).mean())
        rows.append(row)
    return rows


def run_streamliner_compare(cfg: StreamlinerCompareConfig, progress=None) -> pd.DataFrame:
    _, loaded = load_input(cfg.input_path, cfg.table, cfg.input_format, None, cfg.seed)
    missing = sorted({cfg.sensitive, *cfg.qi} - set(loaded.names))
    if missing:
        raise SpecError(
            f"unknown attributes {', '.join(missing)}; the table has {', '.join(loaded.names)}"
        )
    sizes = {a: loaded.dictionaries[a].size for a in loaded.names}
    rows = []
    for vary, values in cfg.sweeps:
        for value in values:
            p = dict(cfg.defaults) | {vary: value}
            for rep in range(cfg.repeats):
                if vary == "n":  # 003 Figure 1: copies of the table, grouping time only
                    copies = -(-int(value) // loaded.rows)
                    frame = pd.concat([loaded.data] * copies, ignore_index=True).iloc[: int(value)]
                    methods, queries = [m for m in cfg.methods if m in cfg.time_methods], None
                else:
                    frame = loaded.data
                    methods, queries = (
                        list(cfg.methods),
                        workload(frame, cfg, sizes, cfg.queries, cfg.seed * 1000 + rep),
                    )
                for r in _point(frame, cfg, int(p["l"]), sizes, cfg.seed + rep, methods, queries):
                    rows.append({"sweep": vary, "value": str(value), "repeat": rep, **r})
                if progress:
                    progress(1)
    return pd.DataFrame(rows)
