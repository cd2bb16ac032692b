"""Counting queries (000 §6.1): SELECT COUNT(*) WHERE A1 in V1 AND ... AND Aqd in Vqd.

A query is a mapping attribute -> set of codes. The estimate from a release follows
the decomposable model (`Estimator`): for tables that share no attribute (UAD,
single-attribute) it factorizes, est = n * prod_T est_T(q_T) / n, where an anatomy table gives
est_T(q) = sum_g n_g(q_QI) * c_g(q_S) / |g| (docs/explanation/algorithms.md) and a projection its
filtered count; an attribute no table publishes counts |V| / |domain|.

Workloads (000 §6.1): `qd` attributes drawn at random, each with a random set of
round(p * |domain|) values (at least one). Decision: the relative error |act - est| /
act is undefined when act = 0, so such queries are redrawn, and how many were redrawn
is reported; the error is averaged over the accepted queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SpecError
from ..estimate.codes import EST, Query, mask
from ..estimate.models import AnatomyModel, EstimateModel, ProjectionModel
from .junction import estimate_rows, junction_tree


def exact_count(source: pd.DataFrame, query: Query) -> int:
    return int(mask(source, query).sum())


CELLS = 2_000_000


class Estimator:
    """COUNT(*) estimates from a release's models. Tables that share no attribute
    (UAD, single-attribute) factorize; overlapping tables (GD) are summed over the
    query's region by sum-product message passing on the junction tree: each clique's
    estimated distribution restricted to the region, times its children's messages,
    summed onto its separator and divided by the separator's marginal (of the same
    clique, as in `estimate_rows`); roots multiply. Small domains take a shortcut
    (`_domain_cells`); the tests check both paths against enumeration."""

    def __init__(
        self, models: Sequence[EstimateModel], n: int, domains: Mapping[str, Sequence[Any]]
    ):
        self.models, self.n, self.domains = list(models), n, domains
        names = [a for m in self.models for a in m.attributes]
        self.overlapping = len(names) != len(set(names))
        self.published = set(names)
        self.tree = junction_tree([m.attributes for m in self.models]) if self.overlapping else []
        self.views = bool(self.models) and all(m.view for m in self.models)
        self._separators: dict[int, pd.DataFrame] = {}
        self._cells: tuple[pd.DataFrame, np.ndarray] | bool | None = None
        self._cubes: dict[tuple[int, tuple[str, ...]], np.ndarray] = {}

    def _separator(self, i: int, sep: tuple[str, ...]) -> pd.DataFrame:
        if i not in self._separators:
            j = self.models[i].joint
            self._separators[i] = (
                j.groupby(list(sep), sort=False)[EST].sum().rename("__sep").reset_index()
            )
        return self._separators[i]

    def _tree_probability(self, query: Query) -> float:
        messages: dict[int, list[tuple[tuple[str, ...], pd.DataFrame | float]]] = {}
        total = 1.0
        for i, parent, sep in reversed(self.tree):
            joint = self.models[i].joint
            pot = joint.loc[mask(joint, query)]
            weight = pot[EST].to_numpy(float) / self.n
            frame = pot.drop(columns=[EST])
            for child_sep, msg in messages.pop(i, []):
                if isinstance(msg, float):
                    weight = weight * msg
                else:
                    got = (
                        frame[list(child_sep)]
                        .merge(msg, on=list(child_sep), how="left")["__msg"]
                        .fillna(0.0)
                        .to_numpy()
                    )
                    weight = weight * got
            if parent is None:
                total *= float(weight.sum())
                continue
            if not sep:
                messages.setdefault(parent, []).append(((), float(weight.sum())))
                continue
            summed = (
                frame[list(sep)]
                .assign(__w=weight)
                .groupby(list(sep), sort=False)["__w"]
                .sum()
                .reset_index()
            )
            summed = summed.merge(self._separator(i, sep), on=list(sep), how="left")
            summed["__msg"] = np.where(
                summed["__sep"] > 0, summed["__w"] / (summed["__sep"] / self.n), 0.0
            )
            messages.setdefault(parent, []).append((sep, summed[[*sep, "__msg"]]))
        return total

    def _domain_cells(self) -> tuple[pd.DataFrame, np.ndarray] | None:
        """p~ of every cell of the domain, when it has at most CELLS cells (Adult: 14,112):
        then a query is one masked sum instead of a pass of messages."""
        if self._cells is None:
            sizes = [len(self.domains[a]) for a in self.domains]
            if float(np.prod(sizes, dtype=np.float64)) > CELLS:
                self._cells = False
            else:
                grid = np.indices(sizes).reshape(len(sizes), -1)
                cells = pd.DataFrame(
                    {a: grid[i].astype(np.int32) for i, a in enumerate(self.domains)}
                )
                self._cells = (cells, estimate_rows(self.models, cells, self.n, self.domains))
        return self._cells if isinstance(self._cells, tuple) else None

    def _view_count(self, query: Query) -> float:
        """Views (generalized marginals, 002 §4): the smallest table holding every
        published attribute of the query answers it alone."""
        asked = {a for a in query if a in self.published}
        covering = [m for m in self.models if asked <= set(m.attributes)]
        if not covering:
            raise SpecError(
                f"no table of this release holds all of {', '.join(sorted(asked))}; "
                "ask a query on one marginal's attributes"
            )
        return min(covering, key=lambda m: len(m.attributes)).count(query)

    def counts(self, queries: Sequence[Query]) -> np.ndarray:
        """`count` of each query. When the tables factorize, an anatomy or projection
        table's factor comes from its estimate cube over the query's attributes
        (`_cube_count`), all of them summed down from fewer covering cubes (`covers`).
        1,000 queries on the 1M `sal` release: 11.0 s one `count` at a time, 2.7 s with
        one cube per attribute set, 1.07 s with covering cubes (measured; docs/explanation/performance.md)."""
        factorize = not self.overlapping and not self.views  # `count`'s product branch
        for i, m in enumerate(self.models if factorize else []):
            if isinstance(m, AnatomyModel | ProjectionModel):
                self._fill_cubes(i, m, queries)
        return np.array([self.count(q, cubes=True) for q in queries], dtype=float)

    def _fill_cubes(
        self, i: int, m: AnatomyModel | ProjectionModel, queries: Sequence[Query]
    ) -> None:
        """Table i's estimate cube over each attribute set `queries` ask of it (within
        `CUBE_CELLS`), summed down from covering cubes (`cover_cubes`). An anatomy cube
        with S does not sum down to one without it (the QIT's rows count a suppressed
        value, -1; the shares do not), so sets with S and sets without are covered apart."""
        sizes = {a: len(self.domains[a]) for a in m.attributes}
        asked = {tuple(a for a in m.attributes if a in q) for q in queries}
        sets = sorted(
            c
            for c in asked
            if c and math.prod(sizes[a] for a in c) <= CUBE_CELLS and (i, c) not in self._cubes
        )
        sensitive = getattr(m, "sensitive", None)
        for part in ([c for c in sets if sensitive in c], [c for c in sets if sensitive not in c]):
            self._cubes |= {
                (i, c): v for c, v in cover_cubes(partial(m.cube, sizes=sizes), part, sizes).items()
            }

    def _cube_count(self, i: int, query: Query) -> float:
        """Table i's `count` of `query` as a sum over its sub-cube of the table's estimate
        cube over the query's attributes (`AnatomyModel.cube`, `ProjectionModel.cube`),
        when `_fill_cubes` made one; other tables, and cubes over `CUBE_CELLS`, count
        the query alone. 1,000 queries on the 1M `sal` release: see `counts`."""
        m = self.models[i]
        cols = tuple(a for a in m.attributes if a in query)
        held = self._cubes.get((i, cols))
        if held is None:
            return m.count(query)
        return float(held[np.ix_(*[sorted(query[a]) for a in cols])].sum())

    def count(self, query: Query, cubes: bool = False) -> float:
        """The estimate of `query` (`cubes`: tables that factorize answer from the
        estimate cubes `counts` made, `_cube_count`, the same figure up to rounding)."""
        if self.views:
            est = self._view_count(query)
        elif self.overlapping:
            cells = self._domain_cells()
            if cells is not None:
                return float(self.n * cells[1][mask(cells[0], query)].sum())
            est = self.n * self._tree_probability(query)
        else:
            est = float(self.n)
            for i, m in enumerate(self.models):
                if any(a in m.attributes for a in query):
                    est *= (self._cube_count(i, query) if cubes else m.count(query)) / self.n
        for a, values in query.items():
            if a not in self.published:
                est *= len(values) / len(self.domains[a])
        return est


def estimate_count(
    models: Sequence[EstimateModel], query: Query, n: int, domains: Mapping[str, Sequence[Any]]
) -> float:
    """The estimate of COUNT(*) WHERE `query` over a release (000 §6.1).

    Args:
        models: the release's tables' estimate models (`release_models`).
        query: attribute -> the codes it may hold (`parse_where`).
        n: the release's rows.
        domains: each attribute's labels in code order.

    Returns:
        The estimated count."""
    return Estimator(models, n, domains).count(query)


@dataclass(frozen=True)
class Workload:
    queries: tuple[dict[str, frozenset[int]], ...]
    actual: np.ndarray
    redrawn: int


def workload(
    source: pd.DataFrame,
    domains: Mapping[str, Sequence[Any]],
    qd: int,
    p: float,
    size: int,
    seed: int,
    max_draws: int | None = None,
) -> Workload:
    """`size` random queries with a non-zero exact answer (see the module's decision),
    answered on `source` by contingency cubes (`CubeCounts`)."""
    sizes = {a: len(domains[a]) for a in source.columns}
    counts = CubeCounts(sizes, partial(cubes, source, sizes=sizes), partial(exact_count, source))
    return draw_workload(list(source.columns), domains, qd, p, size, seed, counts, max_draws)


def _draw(
    rng: np.random.Generator, attrs: list[str], domains, qd: int, p: float
) -> dict[str, frozenset[int]]:
    picked = rng.choice(len(attrs), size=qd, replace=False)
    q = {}
    for i in sorted(picked):
        a = attrs[int(i)]
        d = len(domains[a])
        q[a] = frozenset(int(v) for v in rng.choice(d, size=max(1, round(p * d)), replace=False))
    return q


def draw_workload(
    attrs: list[str],
    domains: Mapping[str, Sequence[Any]],
    qd: int,
    p: float,
    size: int,
    seed: int,
    counts: Callable[[Sequence[Query]], np.ndarray],
    max_draws: int | None = None,
) -> Workload:
    """The workload of `workload`, with exact answers from `counts` (a batch of queries
    at a time). Candidates are drawn from one random stream in order and the first
    `size` non-zero ones kept, so the workload does not depend on how many are counted
    at once: each round draws exactly as many as are still missing."""
    if not 1 <= qd <= len(attrs):
        raise SpecError(f"query dimension qd must be between 1 and {len(attrs)}, not {qd}")
    if not 0 < p <= 1:
        raise SpecError(f"value percentage p must be in (0, 1], not {p}")
    rng = np.random.default_rng(seed)
    queries: list[dict[str, frozenset[int]]] = []
    actual: list[int] = []
    redrawn, limit = 0, max_draws or size * 100
    while len(queries) < size:
        if len(queries) + redrawn >= limit:
            raise SpecError(
                f"only {len(queries)} of {size} queries had a non-zero answer after {limit} draws; raise p or lower qd"
            )
        batch = [
            _draw(rng, attrs, domains, qd, p)
            for _ in range(min(size - len(queries), limit - len(queries) - redrawn))
        ]
        for q, act in zip(batch, counts(batch), strict=True):
            if act == 0:
                redrawn += 1
            else:
                queries.append(q)
                actual.append(int(act))
    return Workload(tuple(queries), np.asarray(actual), redrawn)


CUBE_CELLS = 1 << 22
"""An attribute set whose domains multiply to more cells than this is counted query by
query instead of by a contingency cube."""


def cube(
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    cols: tuple[str, ...],
    sizes: Mapping[str, int],
    key: np.ndarray | None = None,
) -> np.ndarray:
    """The contingency table of `frame` (a frame, or columns as arrays) on `cols`
    (codes), as a dense array. The cell key is built in place in one int64 array
    (`key`, one per row, when given: `cubes` reuses one for all its cubes): a new
    array per step (and a converted copy of each column) made 56 cubes of 2M rows take
    2.59 s against 0.31 s."""
    key = np.empty(_rows(frame), np.int64) if key is None else key  # built on in place
    if cols:
        np.copyto(key, np.asarray(frame[cols[0]]), casting="unsafe")
        for c in cols[1:]:
            key *= sizes[c]
            key += np.asarray(frame[c])
    else:
        key.fill(0)
    shape = tuple(sizes[c] for c in cols)
    return np.bincount(key, minlength=int(np.prod(shape))).reshape(shape)


def _rows(frame: pd.DataFrame | Mapping[str, np.ndarray]) -> int:
    """The rows of a frame, or of columns given as arrays (none: 0)."""
    if isinstance(frame, Mapping):
        return len(next(iter(frame.values()), []))
    return len(frame)


COVER_CELLS = 1 << 20
"""`covers` grows a covering cube up to this many cells (8 MB of int64)."""


def covers(
    sets: Sequence[tuple[str, ...]], sizes: Mapping[str, int], budget: int | None = None
) -> dict[tuple[str, ...], list[tuple[str, ...]]]:
    """Larger attribute sets (`sizes`' order) that hold `sets`, each with the sets it
    holds: greedily, the set with the most cells first, grown one attribute at a time
    (the one completing the most other sets) while its cells stay within `budget`
    (default `COVER_CELLS`). A set
    over `budget` is its own cover. `cubes` counts only the covers from the rows."""
    budget = COVER_CELLS if budget is None else budget
    cells = lambda s: math.prod(sizes[a] for a in s)  # noqa: E731
    order = sorted(dict.fromkeys(sets), key=lambda s: (-cells(s), s))
    found: list[set[str]] = []
    for s in order:
        if any(set(s) <= c for c in found):
            continue
        grown, open_ = set(s), [set(x) for x in order if not any(set(x) <= c for c in found)]
        while True:
            fits = [
                a
                for a in sorted({a for x in open_ for a in x} - grown)
                if cells(grown | {a}) <= budget
            ]
            gain = {a: sum(x <= grown | {a} and not x <= grown for x in open_) for a in fits}
            best = max(fits, key=lambda a: (gain[a], -cells(grown | {a}), a), default=None)
            if best is None or gain[best] == 0:
                break
            grown.add(best)
        found.append(grown)
    out: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for s in order:
        home = next(c for c in found if set(s) <= c)
        out.setdefault(tuple(a for a in sizes if a in home), []).append(s)
    return out


def cubes(
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    sets: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
) -> dict[tuple[str, ...], np.ndarray]:
    """The contingency cube (`cube`) of each of `sets`: the rows are counted into
    `covers`' fewer, larger cubes, each then summed down to the sets it holds. On the
    10M `sal` source, 1,000 queries of 3 attributes need 56 cubes, held by 13 covers:
    the in-process workload took 1.31 s against 3.64 s (measured; docs/explanation/performance.md).
    The covers' cell keys are built in one array, reused: a fresh row-sized array per
    cover is memory the kernel zeroes at first touch (the 10M `sal` workload's 13
    covers: 2.45-2.81 -> 2.19-2.46 s, paired runs)."""
    key = np.empty(_rows(frame), np.int64)
    return cover_cubes(partial(cube, frame, sizes=sizes, key=key), sets, sizes)


def cover_cubes(
    count: Callable[[tuple[str, ...]], np.ndarray],
    sets: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
) -> dict[tuple[str, ...], np.ndarray]:
    """The cube of each of `sets`, in its own attribute order, summed down from
    `count`'s cube of each of `covers`' covering sets (a dense array in the cover's
    order): cubes of counts or of estimates alike, as both add up over cells."""
    out: dict[tuple[str, ...], np.ndarray] = {}
    for cover, held in covers(sets, sizes).items():
        whole = count(cover)
        for s in held:
            kept = [a for a in cover if a in s]
            summed = whole.sum(axis=tuple(i for i, a in enumerate(cover) if a not in s))
            out[s] = np.transpose(summed, [kept.index(a) for a in s])
    return out


class CubeCounts:
    """Exact answers to counting queries from one contingency cube per attribute set
    (`cubes`, which computes the missing ones in one pass), each query then a sum over a
    sub-cube; sets too large for a cube (`CUBE_CELLS`) go to `exact`."""

    def __init__(
        self,
        sizes: Mapping[str, int],
        cubes: Callable[[list[tuple[str, ...]]], dict[tuple[str, ...], np.ndarray]],
        exact: Callable[[Query], int],
    ):
        self.sizes, self.cubes, self.exact = sizes, cubes, exact
        self.held: dict[tuple[str, ...], np.ndarray] = {}

    def _cols(self, q: Query) -> tuple[str, ...]:
        return tuple(a for a in self.sizes if a in q)

    def __call__(self, queries: Sequence[Query]) -> np.ndarray:
        fits = {
            c for c in map(self._cols, queries) if math.prod(self.sizes[a] for a in c) <= CUBE_CELLS
        }
        missing = sorted(fits - set(self.held))
        if missing:
            self.held |= self.cubes(missing)
        return np.array([self._count(q) for q in queries], dtype=np.int64)

    def _count(self, q: Query) -> int:
        cols = self._cols(q)
        if cols not in self.held:
            return self.exact(q)
        return int(self.held[cols][np.ix_(*[sorted(q[a]) for a in cols])].sum())


def relative_errors(
    models: Sequence[EstimateModel], wl: Workload, n: int, domains: Mapping[str, Sequence[Any]]
) -> np.ndarray:
    estimator = Estimator(models, n, domains)
    est = estimator.counts(wl.queries)
    return np.abs(wl.actual - est) / wl.actual


def duckdb_estimate(rel, where: str) -> tuple[float, str]:
    """`vpub query --reader duckdb`: DuckDB's estimate of COUNT(*) WHERE `where` over
    the release's tables (lake/duckdb.py: one table, a product over tables that share
    no attribute, or the junction tree over tables that overlap), and the tables'
    names; the labels are read by DuckDB from those tables, so no model is built."""
    from ..estimate.codes import sort_labels
    from ..lake.duckdb import duckdb_count, overlapping, table_domains, tables_for, tree_count
    from .junction import junction_tree
    from .where import parse_conditions, parse_where

    attrs = {c.attr for c in parse_conditions(where)}
    tables = tables_for(rel, attrs)
    seen: dict[str, set[str]] = {}
    for e, held in tables:
        for a, values in table_domains(rel, e, held).items():
            seen.setdefault(a, set()).update(values)
    domains = {a: sort_labels(v) for a, v in seen.items()}
    query = parse_where(where, domains)
    n = int(rel.manifest["source"]["rows"])
    if overlapping(rel):
        tree = junction_tree([t["attributes"] for t in rel.tables])
        labels = {a: [domains[a][c] for c in sorted(codes)] for a, codes in query.items()}
        return tree_count(rel, tree, labels, n), ", ".join(t["name"] for t in rel.tables)
    counts = [duckdb_count(rel, {a: query[a] for a in held}, domains, e)[0] for e, held in tables]
    est = counts[0] * math.prod(c / n for c in counts[1:])
    return est, ", ".join(e["name"] for e, _ in tables)
