"""`vpub compare` for m-invariant marginals against ANGEL (002 §4, Figures 2-5): the table
bucketized as the publisher does it and every marginal decomposed, ANGEL's batches and
GTs, both timed alike; the workload's error under several estimators and two bounds.

The workload, the estimators, the bounds and the diagnostics: docs/benchmarks/marginals.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from vpub_spark.datasets.synthetic import with_top_share
from vpub_spark.errors import SpecError
from vpub_spark.kernels.angel import angel_batches, angel_tables, boxes
from vpub_spark.kernels.marginal_groups import decompose
from vpub_spark.kernels.minvariance import assign_buckets
from vpub_spark.kernels.mondrian import qi_order
from vpub_spark.kernels.partitioning import partition_seed, shard_counts
from vpub_spark.model import UNSAFE_ASSIGN
from vpub_spark.options import option
from vpub_spark.publishing.marginals import bucketize_chunk, plan_marginal_chunks
from vpub_spark.settings import PARTITIONINGS

from .box_estimators import (
    Bound,
    EndsPublished,
    Published,
    cumulative,
    fitted,
)
from .common import ComparisonConfig, load_input, model_option, sample_rows_option, sweeps_option

PARAMETERS = ("m", "s", "marginal", "w", "skew")
METHODS = (
    "marginals",
    "marginals_local",
    "marginals_ends",
    "marginals_ml",
    "bound_group_marginals",
    "bound_exact_qi",
    "angel",
)
DEFAULT_METHODS = ("marginals", "angel")


@dataclass(frozen=True, kw_only=True)
class MarginalsCompareConfig(ComparisonConfig):
    """002 §4's comparison: m-invariant marginals against ANGEL. A sweep may hold other
    parameters fixed (`{vary: marginal, values: [M1, M2], m: 2}`)."""

    PARAMETERS: ClassVar[tuple[str, ...]] = PARAMETERS
    out: str = option("out/compare/marginals", key="output.path", doc="where the results go")
    sample_rows: int | None = sample_rows_option()
    model: str | None = model_option("m-invariance")
    m: int = option(6, key="privacy.m", minimum=2, doc="m, where a sweep does not vary it")
    sensitive: str = option(key="marginals.sensitive", required=True, doc="the sensitive attribute")
    marginals: tuple[tuple[str, tuple[str, ...]], ...] = option(
        key="marginals.schemas", required=True, doc="each marginal's QI, by name: {M1: [age]}"
    )
    chunk_rows: int = option(50_000, key="marginals.chunk_rows", minimum=1, doc="rows per chunk")
    tries: int = option(5, key="marginals.tries", minimum=1, doc="assigning's tries")
    blocks: int = option(32, key="marginals.blocks", minimum=1, doc="assigning's blocks")
    partitioning: str = option(
        "mondrian", key="marginals.partitioning", choices=PARTITIONINGS, doc="the chunking"
    )
    methods: tuple[str, ...] = option(
        DEFAULT_METHODS, key="compare.methods", choices=METHODS, doc="the methods compared"
    )
    s: float = option(0.1, key="compare.s", doc="a query's range: s^(1/w) of each domain")
    marginal: str | None = option(
        None, key="compare.marginal", doc="the marginal queried (none: the last)"
    )
    w: int | None = option(None, key="compare.w", minimum=1, doc="attributes a query names")
    skew: float | None = option(None, key="compare.skew", doc="the top value's share times m")
    sweeps: tuple[tuple, ...] = sweeps_option(
        (("m", (4, 5, 6, 7, 8, 9, 10)),), PARAMETERS, fixable=True
    )

    def __post_init__(self) -> None:
        schemas = dict(self.marginals)
        if not schemas:
            raise SpecError("marginals.schemas must name a marginal: {M1: [age], ...}")
        for vary, values, *fixed in self.sweeps:
            used = set(values) if vary == "marginal" else set()
            used |= {f["marginal"] for f in fixed if "marginal" in f}
            if used - set(schemas):
                raise SpecError(f"marginal sweep values must be among {', '.join(schemas)}")
            skews = list(values) if vary == "skew" else [f["skew"] for f in fixed if "skew" in f]
            if any(x is not None and not 0 < float(x) < 1 for x in [*skews, self.skew]):
                raise SpecError("skew (the top value's share times m) must be in (0, 1)")

    @property
    def defaults(self) -> dict[str, Any]:
        """Each parameter's value where a sweep does not vary it (the last marginal)."""
        return super().defaults | {"marginal": self.marginal or self.marginals[-1][0]}


def bucketize_table(
    frame: pd.DataFrame,
    qi,
    sensitive: str,
    m: int,
    sizes,
    seed: int,
    chunk_rows: int,
    tries: int,
    blocks: int,
    partitioning: str = "mondrian",
    assign: str = "random",
) -> tuple[pd.DataFrame, np.ndarray, dict]:
    """The publisher's bucketization in memory: (rows in chunk and canonical order,
    bucket, diagnostics: sub-tables and which rows were leftovers of the assigning step)."""
    sharding, _, plan = plan_marginal_chunks(
        lambda sh: shard_counts(frame, [sensitive], sh), sizes, qi, sensitive, m, chunk_rows
    )
    extents = {a: sizes[a] - 1 for a in qi}
    part = plan.part_of(sharding.of(frame))
    frames, buckets, left, base, subs, spent = [], [], [], 0, 0, 0.0
    for p in range(plan.parts):
        canon, sub, bucket = bucketize_chunk(
            frame[part == p],
            qi,
            sensitive,
            m,
            extents,
            seed,
            p,
            tries,
            blocks,
            partitioning,
            assign,
        )
        t0 = time.perf_counter()  # the assigning step again, for its leftovers: not timed
        s = canon[sensitive].to_numpy(dtype=np.int64)
        local = qi_order(canon[list(qi)], extents, m, sub) if assign == UNSAFE_ASSIGN else None
        left.append(assign_buckets(s, m, partition_seed(seed, 0, p) + 1, sub, local=local) < 0)
        spent += time.perf_counter() - t0
        frames.append(canon)
        buckets.append(bucket + base)
        base, subs = base + len(canon), subs + int(sub.max()) + 1
    return (
        pd.concat(frames, ignore_index=True),
        np.concatenate(buckets),
        {"subtables": subs, "leftover": np.concatenate(left), "untimed_s": spent},
    )


def box_width(boxes: pd.DataFrame, attrs, sizes, weight: np.ndarray | None = None) -> float:
    """The boxes' mean normalized width, (max - min + 1) / |A| averaged over `attrs`."""
    w = np.mean(
        [(boxes[f"{a}_max"] - boxes[f"{a}_min"] + 1).to_numpy() / sizes[a] for a in attrs], axis=0
    )
    return (
        float(np.average(w, weights=weight))
        if len(w) and (weight is None or weight.sum())
        else float("nan")
    )


def ours(frame: pd.DataFrame, bucket: np.ndarray, attrs, sensitive: str, sizes) -> Published:
    """Zhang et al. on our marginal: est = sum_G n_G(S in V) * frac(box_G, R)."""
    s = frame[sensitive].to_numpy()
    group = decompose(frame[list(attrs)], s, bucket, {a: sizes[a] - 1 for a in attrs})
    return generalized_estimator(frame, group, attrs, sensitive, sizes)


def generalized_estimator(
    frame: pd.DataFrame, group: np.ndarray, attrs, sensitive: str, sizes
) -> Published:
    """Zhang et al. on any generalized partition (`group` per row, dense ids)."""
    s = frame[sensitive].to_numpy()
    b = boxes(frame[list(attrs)], group).sort_values("group_id").reset_index(drop=True)
    return Published(b, cumulative(group, s, np.ones(len(s)), len(b), sizes[sensitive]))


def angel(
    frame: pd.DataFrame, batch: np.ndarray, qi, attrs, sensitive: str, m: int, sizes
) -> Published:
    """ANGEL's estimate: sum over GT rows of cnt * frac(box, R) * share of V in the batch."""
    s = frame[sensitive].to_numpy()
    gt, bt = angel_tables(frame[list(qi)], list(attrs), s, m, {a: sizes[a] - 1 for a in qi}, batch)
    size = bt.groupby("batch")["count"].sum()
    share = cumulative(
        bt["batch"].to_numpy(),
        bt["s"].to_numpy(),
        bt["count"].to_numpy() / size.reindex(bt["batch"]).to_numpy(),
        int(batch.max()) + 1,
        sizes[sensitive],
    )
    return Published(
        gt.reset_index(drop=True), share[gt["batch"].to_numpy()] * gt["count"].to_numpy()[:, None]
    )


def marginal_workload(
    frame: pd.DataFrame,
    attrs,
    sensitive: str,
    sizes,
    w: int | None,
    s: float,
    count: int,
    seed: int,
    max_draws: int = 100,
):
    """002 §4's queries on one marginal with their exact answers; (queries, exact, redrawn)."""
    rng = np.random.default_rng(seed)
    attrs = list(attrs)
    w = len(attrs) + 1 if w is None else int(w)
    if not 1 <= w <= len(attrs) + 1:
        raise SpecError(
            f"query dimension w = {w} must be between 1 and {len(attrs) + 1} for a marginal of {len(attrs)} QI attributes"
        )
    cols = {a: frame[a].to_numpy() for a in [*attrs, sensitive]}

    def interval(a: str) -> tuple[int, int]:
        length = max(1, int(sizes[a] * s ** (1.0 / w)))
        lo = int(rng.integers(0, sizes[a] - length + 1))
        return lo, lo + length - 1

    queries: list[tuple[dict[str, tuple[int, int]], tuple[int, int]]] = []
    exact: list[int] = []
    redrawn = 0
    while len(queries) < count:
        for _ in range(max_draws):
            chosen = [attrs[i] for i in sorted(rng.choice(len(attrs), size=w - 1, replace=False))]
            ranges = {a: interval(a) for a in chosen}
            s_range = interval(sensitive)
            mask = (cols[sensitive] >= s_range[0]) & (cols[sensitive] <= s_range[1])
            for a, (lo, hi) in ranges.items():
                mask &= (cols[a] >= lo) & (cols[a] <= hi)
            n = int(mask.sum())
            if n:
                queries.append((ranges, s_range))
                exact.append(n)
                break
            redrawn += 1
        else:
            raise SpecError(
                f"no query with a non-zero answer in {max_draws} draws (s = {s} is too small for this table)"
            )
    return queries, np.asarray(exact, dtype=np.float64), redrawn


def _signed_errors(pub: Published, queries, exact: np.ndarray) -> np.ndarray:
    est = np.array([pub.estimate(r, sr) for r, sr in queries])
    return (est - exact) / exact


def _errors(pub: Published, queries, exact: np.ndarray) -> np.ndarray:
    return np.abs(_signed_errors(pub, queries, exact))


def _ours(frame, bucket, info, attrs, sensitive: str, sizes, methods) -> tuple[dict, dict, float]:
    """Our marginal on `attrs` under each requested estimator, its diagnostics, and the
    seconds spent on anything but making the marginal (not timed)."""
    s = frame[sensitive].to_numpy()
    group = decompose(frame[list(attrs)], s, bucket, {a: sizes[a] - 1 for a in attrs})
    pub = generalized_estimator(frame, group, attrs, sensitive, sizes)
    t0 = time.perf_counter()
    made = {"marginals": pub, "marginals_ends": EndsPublished(pub.boxes, pub.cum)}
    if "marginals_ml" in methods:
        made["marginals_ml"] = fitted(pub, attrs, sizes)
    for name, exact in (("bound_exact_qi", True), ("bound_group_marginals", False)):
        if name in methods:
            made[name] = Bound(pub.boxes, pub.cum, frame[list(attrs)], s, group, exact)
    left_bucket = np.zeros(int(bucket.max()) + 1, dtype=bool)
    left_bucket[bucket[info["leftover"]]] = True
    by_leftover = np.zeros(len(pub.boxes), dtype=bool)
    by_leftover[group] = left_bucket[bucket]
    diag = {
        "subtables": info["subtables"],
        "leftover_share": float(info["leftover"].mean()),
        "box_width": box_width(pub.boxes, attrs, sizes),
        "leftover_box_width": box_width(pub.boxes, attrs, sizes, by_leftover.astype(float)),
    }
    return {k: v for k, v in made.items() if k in methods}, diag, time.perf_counter() - t0


def run_marginals_compare(cfg: MarginalsCompareConfig, progress=None) -> pd.DataFrame:
    _, loaded = load_input(cfg.input_path, cfg.table, cfg.input_format, cfg.sample_rows, cfg.seed)
    frame = loaded.data
    names = set(loaded.names)
    needed = {cfg.sensitive, *(a for _, attrs in cfg.marginals for a in attrs)}
    if needed - names:
        raise SpecError(
            f"unknown attributes {', '.join(sorted(needed - names))}; the table has {', '.join(loaded.names)}"
        )
    qi = tuple(
        a for a in loaded.names if any(a in attrs for _, attrs in cfg.marginals)
    )  # 002's setup: QI = M_k's attributes
    sizes = {a: loaded.dictionaries[a].size for a in loaded.names}
    schemas = dict(cfg.marginals)
    rows = []
    cache: dict[tuple, tuple[pd.DataFrame, dict]] = {}

    def built(m: int, skew: float | None, rep: int) -> tuple[pd.DataFrame, dict]:
        """The table for (m, skew) and every method's marginals for it and repeat `rep`;
        the last (m, skew)'s repeats are kept (a marginal sweep reuses them)."""
        if (m, skew, rep) not in cache:
            data = skewed(frame, cfg.sensitive, skew, m, cfg.seed)
            out = _built_marginals(cfg, data, qi, sizes, schemas, m, cfg.seed + rep)
            if any(key[:2] != (m, skew) for key in cache):
                cache.clear()  # keep one (m, skew)'s marginals in memory
            cache[(m, skew, rep)] = (data, out)
        return cache[(m, skew, rep)]

    for vary, values, *fixed in cfg.sweeps:
        held = fixed[0] if fixed else {}
        label = "_".join([vary, *(f"{k}{v}" for k, v in held.items())])  # e.g. marginal_m2
        for value in values:
            p = dict(cfg.defaults) | held | {vary: value}
            skew = None if p["skew"] is None else float(p["skew"])
            for rep in range(cfg.repeats):
                data, made = built(int(p["m"]), skew, rep)
                rows.extend(
                    _sweep_point_rows(cfg, data, sizes, schemas, made, label, value, p, rep)
                )
                if progress:
                    progress(1)
    return pd.DataFrame(rows)


def skewed(frame: pd.DataFrame, sensitive: str, skew: float | None, m: int, seed: int):
    """The table with its most frequent sensitive value at a share of skew / m
    (`synthetic.with_top_share`, seeded); `skew` None: the table as it is."""
    if skew is None:
        return frame
    values = frame[sensitive].to_numpy()
    top = int(np.bincount(values).argmax())
    rng = np.random.default_rng([seed, m, 0x7095])
    return frame.assign(**{sensitive: with_top_share(values, top, skew / m, rng)})


def _built_marginals(cfg: MarginalsCompareConfig, frame, qi, sizes, schemas, m, seed) -> dict:
    """Every method's marginals for m (all of M1..Mk, timed like 002 Figure 5):
    method -> (marginal -> estimator, seconds, marginal -> diagnostics)."""
    ours_methods = [x for x in cfg.methods if x not in ("angel", "marginals_local")]
    out: dict[str, Any] = {}
    if ours_methods:
        out.update(_our_marginals(cfg, frame, qi, sizes, schemas, m, seed, ours_methods))
    if "marginals_local" in cfg.methods:
        local = _our_marginals(
            cfg, frame, qi, sizes, schemas, m, seed, ["marginals"], UNSAFE_ASSIGN
        )
        out["marginals_local"] = local["marginals"]
    if "angel" in cfg.methods:
        out["angel"] = _angel_marginals(cfg, frame, qi, sizes, schemas, m)
    return out


def _our_marginals(
    cfg: MarginalsCompareConfig, frame, qi, sizes, schemas, m, seed, methods, assign="random"
) -> dict:
    """Our marginals for m, bucketized as the publisher does (with `assign`'s dealing)
    and timed together, per estimator in `methods`: method -> (marginal -> estimator,
    seconds, diagnostics)."""
    t0 = time.perf_counter()
    canon, bucket, info = bucketize_table(
        frame,
        qi,
        cfg.sensitive,
        m,
        sizes,
        seed,
        cfg.chunk_rows,
        cfg.tries,
        cfg.blocks,
        cfg.partitioning,
        assign,
    )
    made = {
        k: _ours(canon, bucket, info, attrs, cfg.sensitive, sizes, methods)
        for k, attrs in schemas.items()
    }
    seconds = time.perf_counter() - t0 - info["untimed_s"] - sum(v[2] for v in made.values())
    return {
        method: (
            {k: v[0][method] for k, v in made.items()},
            seconds,
            {k: v[1] for k, v in made.items()},
        )
        for method in methods
    }


def _angel_marginals(cfg: MarginalsCompareConfig, frame, qi, sizes, schemas, m) -> tuple:
    """ANGEL's batches for m and one GT per marginal, timed together:
    (marginal -> estimator, seconds, marginal -> diagnostics)."""
    t0 = time.perf_counter()
    batch = angel_batches(
        frame[list(qi)],
        frame[cfg.sensitive].to_numpy(),
        m,
        {a: sizes[a] - 1 for a in qi},
    )
    pubs = {
        k: angel(frame, batch, qi, attrs, cfg.sensitive, m, sizes) for k, attrs in schemas.items()
    }
    diag = {k: {"box_width": box_width(p.boxes, schemas[k], sizes)} for k, p in pubs.items()}
    return pubs, time.perf_counter() - t0, diag


def _sweep_point_rows(
    cfg: MarginalsCompareConfig, frame, sizes, schemas, made, vary, value, p, rep
) -> list[dict]:
    """One result row per method for one sweep point `p` and repeat: the errors of the
    point's workload on its marginal, the time and the diagnostics."""
    attrs = schemas[p["marginal"]]
    queries, exact, redrawn = marginal_workload(
        frame,
        attrs,
        cfg.sensitive,
        sizes,
        p["w"],
        float(p["s"]),
        cfg.queries,
        cfg.seed * 1000 + rep,
    )
    rows = []
    for method, (pubs, seconds, diag) in made.items():
        signed = _signed_errors(pubs[p["marginal"]], queries, exact)
        err = np.abs(signed)
        rows.append(
            {
                "sweep": vary,
                "value": str(value),
                "method": method,
                "m": int(p["m"]),
                "s": float(p["s"]),
                "marginal": p["marginal"],
                "w": p["w"] or len(attrs) + 1,
                "repeat": rep,
                "relative_error": float(err.mean()),
                "signed_error": float(signed.mean()),
                "median_error": float(np.median(err)),
                "time_s": seconds,
                "queries": len(queries),
                "redrawn": redrawn,
                "rows": len(frame),
                "partitioning": cfg.partitioning if method != "angel" else "",
                "top_share": float(np.bincount(frame[cfg.sensitive].to_numpy()).max() / len(frame)),
                **diag[p["marginal"]],
            }
        )
    return rows
