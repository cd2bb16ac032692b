"""`vpub compare` for m-invariant marginals against ANGEL (002 §4, Figures 2-5).

Per m (and repeat), the table is bucketized exactly as the publisher does it (the same
QI-local chunks, `bucketize_chunk` per chunk, in memory) and every marginal M1..Mk
decomposed; ANGEL (docs/explanation/algorithms.md) makes its batches once and one GT per
marginal.
Both are timed the same way (002 Figure 5: the cost of computing all the marginals).

Workload (002 §4): a query on marginal M_j has dimension w (default: every attribute
of M_j): w - 1 distinct QI attributes of M_j drawn at random plus the sensitive
attribute; each attribute A gets a random interval of length floor(|A| * s^(1/w))
(at least 1) of its domain order. Decision (as for 000's workloads): a query whose
exact answer is 0 is redrawn (its relative error is undefined), and redraws are counted.
Estimates: Zhang et al. from our generalized marginal (uniform inside a box, the
sensitive counts of the group) and ANGEL's estimator from GT and BT
(estimate/generalized.py; both vectorized here over the groups, tested equal to it).
Two more estimators on our marginals test whether the estimator causes the error:
`marginals_ends` (a box is its group's minimum bounding box, so a group of n >= 2
tuples has one at each end of every attribute's interval and n - 2 spread uniformly)
and `marginals_ml` (each attribute's distribution fitted to all boxes by maximum
likelihood, Turnbull's EM for interval-censored data, spread inside each box in
proportion to it; attributes independent inside a box, as in Zhang et al.).
Two bounds read the private table and are not estimators anyone could run on a release:
`bound_exact_qi` knows every tuple's QI values and only not which of its group's
sensitive values is its own (the error m-uniqueness alone causes), and
`bound_group_marginals` knows each attribute's exact distribution inside each group but
treats attributes as independent inside the group, as every box estimator above does
(no such estimator can do better on average than knowing those distributions).
Diagnostics per point: sub-tables, the share of leftover tuples (002's assigning step),
and the boxes' mean normalized width, over all groups and over the groups of buckets a
leftover made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..config import MarginalSettings
from ..errors import SpecError
from ..kernels.anatomy import COUNT
from ..kernels.angel import angel_batches, angel_tables, box_fraction, boxes
from ..kernels.minvariance import assign_buckets, decompose
from ..kernels.partitioning import partition_seed, shard_counts
from ..publish.marginals import bucketize_chunk, plan_marginal_chunks
from .common import check_keys, load_input, parse_sweeps

PARAMETERS = ("m", "s", "marginal", "w")
METHODS = (
    "marginals",
    "marginals_ends",
    "marginals_ml",
    "bound_group_marginals",
    "bound_exact_qi",
    "angel",
)
DEFAULT_METHODS = ("marginals", "angel")


@dataclass(frozen=True)
class MarginalsCompareConfig:
    input_path: str
    table: str | None
    sensitive: str
    marginals: tuple[tuple[str, tuple[str, ...]], ...]
    out: str = "out/compare/marginals"
    methods: tuple[str, ...] = METHODS
    defaults: dict[str, Any] = field(
        default_factory=lambda: {"m": 6, "s": 0.1, "marginal": None, "w": None}
    )
    sweeps: tuple[tuple[str, tuple], ...] = (("m", (4, 5, 6, 7, 8, 9, 10)),)
    repeats: int = 1
    queries: int = 1000
    seed: int = 1
    input_format: str | None = None
    sample_rows: int | None = None
    chunk_rows: int = 50_000
    tries: int = 5
    blocks: int = 32
    partitioning: str = "mondrian"


def marginals_compare_config_from_dict(d: dict, where: str = "config") -> MarginalsCompareConfig:
    known = {"engine", "input", "compare", "output", "seed", "privacy", "marginals"}
    check_keys(d, known, where)
    mg = dict(d.get("marginals") or {})
    schemas = mg.get("schemas")
    if not mg.get("sensitive") or not isinstance(schemas, dict) or not schemas:
        raise SpecError(
            f"{where}: marginals needs sensitive and schemas as a mapping {{M1: [age], M2: [age, gender], ...}}"
        )
    sw = parse_sweeps(
        d.get("compare"),
        parameters=PARAMETERS,
        methods=METHODS,
        default_methods=DEFAULT_METHODS,
        defaults={
            "m": (d.get("privacy") or {}).get("m", 6),
            "s": 0.1,
            "marginal": list(schemas)[-1],
            "w": None,
        },
        default_sweep={"vary": "m", "values": [4, 5, 6, 7, 8, 9, 10]},
        default_repeats=1,
        where=where,
    )
    for vary, values in sw.sweeps:
        if vary == "marginal" and set(values) - set(schemas):
            raise SpecError(f"{where}: marginal sweep values must be among {', '.join(schemas)}")
    inp = d["input"]
    return MarginalsCompareConfig(
        input_path=str(inp["path"]),
        table=inp.get("table"),
        sensitive=str(mg["sensitive"]),
        marginals=tuple((str(k), tuple(v)) for k, v in schemas.items()),
        out=str((d.get("output") or {}).get("path", "out/compare/marginals")),
        **sw.fields(),
        seed=int(d.get("seed", 1)),
        input_format=inp.get("format"),
        sample_rows=None if inp.get("sample_rows") is None else int(inp["sample_rows"]),
        chunk_rows=int(mg.get("chunk_rows", 50_000)),
        tries=int(mg.get("tries", 5)),
        blocks=int(mg.get("blocks", 32)),
        partitioning=_partitioning(mg.get("partitioning", "mondrian"), where),
    )


def _partitioning(how: str, where: str) -> str:
    known = MarginalSettings.PARTITIONINGS  # the publisher's choices
    if how not in known:
        raise SpecError(
            f"{where}: marginals.partitioning must be one of {', '.join(known)}, not {how!r}"
        )
    return how


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
            frame[part == p], qi, sensitive, m, extents, seed, p, tries, blocks, partitioning
        )
        t0 = time.perf_counter()  # the assigning step again, for its leftovers: not timed
        s = canon[sensitive].to_numpy(dtype=np.int64)
        left.append(assign_buckets(s, m, partition_seed(seed, 0, p) + 1, sub) < 0)
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


@dataclass(frozen=True)
class Published:
    """One marginal as the estimator sees it: boxes per row of `boxes`, and per row the
    cumulative sensitive counts (`cum[:, v]` = tuples with value < v) times a weight."""

    boxes: pd.DataFrame
    cum: np.ndarray

    def share(self, ranges: dict[str, tuple[int, int]]) -> np.ndarray:
        """Per box, the share of its tuples inside `ranges` (Zhang et al.: uniform)."""
        return box_fraction(self.boxes, ranges)

    def estimate(self, ranges: dict[str, tuple[int, int]], s_range: tuple[int, int]) -> float:
        lo, hi = s_range
        return float((self.share(ranges) * (self.cum[:, hi + 1] - self.cum[:, lo])).sum())


@dataclass(frozen=True)
class EndsPublished(Published):
    """`marginals_ends`: a group of n >= 2 tuples has one at each end of its box's
    interval on every attribute and n - 2 spread uniformly over the interval."""

    def share(self, ranges) -> np.ndarray:
        share = np.ones(len(self.boxes))
        n = self.boxes[COUNT].to_numpy(dtype=np.float64)
        for a, (ql, qh) in ranges.items():
            bmin, bmax = self.boxes[f"{a}_min"].to_numpy(), self.boxes[f"{a}_max"].to_numpy()
            w = bmax - bmin + 1
            cover = np.clip(np.minimum(bmax, qh) - np.maximum(bmin, ql) + 1, 0, None)
            ends = ((bmin >= ql) & (bmin <= qh)).astype(float) + ((bmax >= ql) & (bmax <= qh))
            share *= np.where(
                (w == 1) | (n < 2), cover / w, (ends + (n - 2) * cover / w) / np.maximum(n, 1)
            )
        return share


def turnbull(
    lo: np.ndarray, hi: np.ndarray, weight: np.ndarray, size: int, rounds: int = 200
) -> np.ndarray:
    """The maximum-likelihood distribution over 0..size-1 of values known only to lie in
    [lo, hi] (Turnbull's EM for interval-censored data): f <- f * E[share of each
    interval at x] / n, from the uniform distribution."""
    f = np.full(size, 1.0 / size)
    total = float(weight.sum())
    for _ in range(rounds):
        c = np.concatenate([[0.0], np.cumsum(f)])
        per = weight / np.maximum(c[hi + 1] - c[lo], 1e-300)
        diff = np.bincount(lo, per, size + 1) - np.bincount(hi + 1, per, size + 1)
        f = f * np.cumsum(diff)[:size] / total
    return f


@dataclass(frozen=True)
class FittedPublished(Published):
    """`marginals_ml`: each attribute's fitted distribution (`turnbull`) spread inside a box."""

    cdf: dict = field(default_factory=dict)

    def share(self, ranges) -> np.ndarray:
        share = np.ones(len(self.boxes))
        for a, (ql, qh) in ranges.items():
            c = self.cdf[a]
            bmin, bmax = self.boxes[f"{a}_min"].to_numpy(), self.boxes[f"{a}_max"].to_numpy()
            a0, a1 = np.maximum(bmin, ql), np.minimum(bmax, qh)
            inside = np.where(a1 >= a0, c[np.maximum(a1, a0 - 1) + 1] - c[a0], 0.0)
            share *= inside / np.maximum(c[bmax + 1] - c[bmin], 1e-300)
        return share


@dataclass(frozen=True)
class Bound(Published):
    """`bound_exact_qi` / `bound_group_marginals` (see the module docstring)."""

    codes: pd.DataFrame = field(default_factory=pd.DataFrame)
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    group: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    exact_qi: bool = True

    def estimate(self, ranges, s_range) -> float:
        lo, hi = s_range
        g, size = self.group, np.bincount(self.group).astype(np.float64)
        chosen = np.bincount(g, (self.values >= lo) & (self.values <= hi), len(size))
        inside = [
            (self.codes[a].to_numpy() >= ql) & (self.codes[a].to_numpy() <= qh)
            for a, (ql, qh) in ranges.items()
        ]
        if self.exact_qi:
            share = (
                np.bincount(g, np.logical_and.reduce(inside) if inside else None, len(size)) / size
            )
        else:
            share = (
                np.prod([np.bincount(g, m, len(size)) / size for m in inside], axis=0)
                if inside
                else np.ones(len(size))
            )
        return float((chosen * share).sum())


def fitted(pub: Published, attrs, sizes) -> FittedPublished:
    b, n = pub.boxes, pub.cum[:, -1]
    cdf = {
        a: np.concatenate(
            [
                [0.0],
                np.cumsum(
                    turnbull(b[f"{a}_min"].to_numpy(), b[f"{a}_max"].to_numpy(), n, sizes[a])
                ),
            ]
        )
        for a in attrs
    }
    return FittedPublished(pub.boxes, pub.cum, cdf)


def _cumulative(
    keys: np.ndarray, values: np.ndarray, weights: np.ndarray, rows: int, domain: int
) -> np.ndarray:
    mat = np.zeros((rows, domain + 1))
    np.add.at(mat, (keys, values + 1), weights)
    return np.cumsum(mat, axis=1)


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
    return Published(b, _cumulative(group, s, np.ones(len(s)), len(b), sizes[sensitive]))


def angel(
    frame: pd.DataFrame, batch: np.ndarray, qi, attrs, sensitive: str, m: int, sizes
) -> Published:
    """ANGEL's estimate: sum over GT rows of cnt * frac(box, R) * share of V in the batch."""
    s = frame[sensitive].to_numpy()
    gt, bt = angel_tables(frame[list(qi)], list(attrs), s, m, {a: sizes[a] - 1 for a in qi}, batch)
    size = bt.groupby("batch")["count"].sum()
    share = _cumulative(
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
    cache: dict[tuple[int, int], dict] = {}

    def built(m: int, rep: int) -> dict:
        """Every method's marginals for m and repeat `rep`, the last ones kept."""
        if (m, rep) not in cache:
            out = _built_marginals(cfg, frame, qi, sizes, schemas, m, cfg.seed + rep)
            cache.clear()  # keep one m in memory
            cache[(m, rep)] = out
        return cache[(m, rep)]

    for vary, values in cfg.sweeps:
        for value in values:
            p = dict(cfg.defaults) | {vary: value}
            for rep in range(cfg.repeats):
                made = built(int(p["m"]), rep)
                rows.extend(
                    _sweep_point_rows(cfg, frame, sizes, schemas, made, vary, value, p, rep)
                )
                if progress:
                    progress(1)
    return pd.DataFrame(rows)


def _built_marginals(cfg: MarginalsCompareConfig, frame, qi, sizes, schemas, m, seed) -> dict:
    """Every method's marginals for m (all of M1..Mk, timed like 002 Figure 5):
    method -> (marginal -> estimator, seconds, marginal -> diagnostics)."""
    ours_methods = [x for x in cfg.methods if x != "angel"]
    out: dict[str, Any] = {}
    if ours_methods:
        out.update(_our_marginals(cfg, frame, qi, sizes, schemas, m, seed, ours_methods))
    if "angel" in cfg.methods:
        out["angel"] = _angel_marginals(cfg, frame, qi, sizes, schemas, m)
    return out


def _our_marginals(
    cfg: MarginalsCompareConfig, frame, qi, sizes, schemas, m, seed, methods
) -> dict:
    """Our marginals for m, bucketized as the publisher does and timed together, per
    estimator in `methods`: method -> (marginal -> estimator, seconds, diagnostics)."""
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
                **diag[p["marginal"]],
            }
        )
    return rows
