"""`vpub compare` for m-invariant marginals against ANGEL (002 §4, Figures 2-5).

Per m (and repeat), the table is bucketized exactly as the publisher does it (the same
QI-local chunks, `bucketize_chunk` per chunk, in memory) and every marginal M1..Mk
decomposed; ANGEL (ALGORITHMS.md §1) makes its batches once and one GT per marginal.
Both are timed the same way (002 Figure 5: the cost of computing all the marginals).

Workload (002 §4): a query on marginal M_j has dimension w (default: every attribute
of M_j): w - 1 distinct QI attributes of M_j drawn at random plus the sensitive
attribute; each attribute A gets a random interval of length floor(|A| * s^(1/w))
(at least 1) of its domain order. Decision (as for 000's workloads): a query whose
exact answer is 0 is redrawn (its relative error is undefined), and redraws are counted.
Estimates: Zhang et al. from our generalized marginal (uniform inside a box, the
sensitive counts of the group) and ANGEL's estimator from GT and BT
(utility/generalized.py; both vectorized here over the groups, tested equal to it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SpecError
from ..kernels.angel import angel_batches, angel_tables, box_fraction, boxes
from ..kernels.minvariance import decompose
from ..kernels.partitioning import shard_counts
from ..publish.marginals import bucketize_chunk, plan_marginal_chunks
from .common import check_keys, load_input, parse_sweeps

PARAMETERS = ("m", "s", "marginal", "w")
METHODS = ("marginals", "angel")


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
        default_methods=METHODS,
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
        input_path=str(inp["path"]), table=inp.get("table"), sensitive=str(mg["sensitive"]),
        marginals=tuple((str(k), tuple(v)) for k, v in schemas.items()), out=str((d.get("output") or {}).get("path", "out/compare/marginals")),
        methods=sw.methods, defaults=sw.defaults, sweeps=sw.sweeps, repeats=sw.repeats, queries=sw.queries, seed=int(d.get("seed", 1)),
        input_format=inp.get("format"), sample_rows=None if inp.get("sample_rows") is None else int(inp["sample_rows"]),
        chunk_rows=int(mg.get("chunk_rows", 50_000)), tries=int(mg.get("tries", 5)), blocks=int(mg.get("blocks", 32)),
    )  # fmt: skip


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
) -> tuple[pd.DataFrame, np.ndarray]:
    """The publisher's bucketization in memory: (rows in chunk and canonical order, bucket)."""
    sharding, _, plan = plan_marginal_chunks(
        lambda sh: shard_counts(frame, [sensitive], sh), sizes, qi, sensitive, m, chunk_rows
    )
    extents = {a: sizes[a] - 1 for a in qi}
    part = plan.part_of(sharding.of(frame))
    frames, buckets, base = [], [], 0
    for p in range(plan.parts):
        canon, _, bucket = bucketize_chunk(
            frame[part == p], qi, sensitive, m, extents, seed, p, tries, blocks
        )
        frames.append(canon)
        buckets.append(bucket + base)
        base += len(canon)
    return pd.concat(frames, ignore_index=True), np.concatenate(buckets)


@dataclass(frozen=True)
class Published:
    """One marginal as the estimator sees it: boxes per row of `boxes`, and per row the
    cumulative sensitive counts (`cum[:, v]` = tuples with value < v) times a weight."""

    boxes: pd.DataFrame
    cum: np.ndarray

    def estimate(self, ranges: dict[str, tuple[int, int]], s_range: tuple[int, int]) -> float:
        lo, hi = s_range
        return float(
            (box_fraction(self.boxes, ranges) * (self.cum[:, hi + 1] - self.cum[:, lo])).sum()
        )


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


def generalized_estimator(frame: pd.DataFrame, group: np.ndarray, attrs, sensitive: str, sizes) -> Published:  # fmt: skip
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


def _errors(pub: Published, queries, exact: np.ndarray) -> np.ndarray:
    est = np.array([pub.estimate(r, sr) for r, sr in queries])
    return np.abs(est - exact) / exact


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
        """Both methods' marginals for m (all of M1..Mk, timed like 002 Figure 5)."""
        if (m, rep) not in cache:
            seed = cfg.seed + rep
            out: dict[str, Any] = {}
            if "marginals" in cfg.methods:
                t0 = time.perf_counter()
                canon, bucket = bucketize_table(
                    frame, qi, cfg.sensitive, m, sizes, seed, cfg.chunk_rows, cfg.tries, cfg.blocks
                )
                pubs = {
                    k: ours(canon, bucket, attrs, cfg.sensitive, sizes)
                    for k, attrs in schemas.items()
                }
                out["marginals"] = (pubs, time.perf_counter() - t0)
            if "angel" in cfg.methods:
                t0 = time.perf_counter()
                batch = angel_batches(
                    frame[list(qi)],
                    frame[cfg.sensitive].to_numpy(),
                    m,
                    {a: sizes[a] - 1 for a in qi},
                )
                pubs = {
                    k: angel(frame, batch, qi, attrs, cfg.sensitive, m, sizes)
                    for k, attrs in schemas.items()
                }
                out["angel"] = (pubs, time.perf_counter() - t0)
            cache.clear()  # keep one m in memory
            cache[(m, rep)] = out
        return cache[(m, rep)]

    for vary, values in cfg.sweeps:
        for value in values:
            p = dict(cfg.defaults) | {vary: value}
            for rep in range(cfg.repeats):
                made = built(int(p["m"]), rep)
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
                for method, (pubs, seconds) in made.items():
                    err = _errors(pubs[p["marginal"]], queries, exact)
                    rows.append({
                        "sweep": vary, "value": str(value), "method": method, "m": int(p["m"]), "s": float(p["s"]),
                        "marginal": p["marginal"], "w": p["w"] or len(attrs) + 1, "repeat": rep, "relative_error": float(err.mean()),
                        "median_error": float(np.median(err)), "time_s": seconds, "queries": len(queries), "redrawn": redrawn, "rows": len(frame),
                    })  # fmt: skip
                if progress:
                    progress(1)
    return pd.DataFrame(rows)
