"""KL divergence of a release from its source (000 §5.1, Eq. 3).

D(p || p~) = sum_x p(x) log(p(x) / p~(x)) over the DISTINCT rows x of the source only
(terms with p(x) = 0 vanish), so the full domain is never enumerated. With the
decomposable estimate, log p~(x) = sum_T log p~_T(x_T) - sum_S log p~_S(x_S) -
sum_{unpublished a} log |dom a|, and each expectation under p needs only p's marginal
on that table's (or separator's) attributes:

  D = sum_x p log p - sum_T sum_{x_T} p(x_T) log p~_T(x_T)
      + sum_S sum_{x_S} p(x_S) log p~_S(x_S) + sum_{unpublished a} log |dom a|.

So every term is one aggregate of the source projected on a table, joined with that
table's estimate at the projected keys: the shape the Spark adapter computes too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from ..engines.pool import MIN_ROWS, default_workers
from ..estimate.models import EstimateModel
from ..kernels.arrays import packed, run_starts
from .junction import log_terms

Distinct = tuple[np.ndarray, np.ndarray, list[int]]
"""Distinct rows as (packed keys ascending, their counts, each column's radix)."""


def sorted_distinct(source: pd.DataFrame, cols: Sequence[str]) -> Distinct | None:
    """The distinct rows of `source` on `cols` (codes) packed into one int64 each (the
    first column most significant) with their counts: by `bincount` when the packed
    range is small, else by one sort. The columns are packed in place as stored (no
    int64 copy of each). None when the codes do not pack."""
    both = packed([source[c].to_numpy() for c in cols])
    if both is None:
        return None
    key, radix = both
    if math.prod(radix) <= 4 * len(key) + 65536:
        counts = np.bincount(key, minlength=math.prod(radix))
        keys = np.flatnonzero(counts)
        return keys, counts[keys], radix
    key.sort()
    first = run_starts(key)
    return key[first], np.diff(first, append=len(key)), radix


def coarser(rows: Distinct, k: int) -> Distinct:
    """`rows` on their first k columns only: the packed keys divided by the radix of
    the rest stay in order, so equal keys are neighbours and their counts add up by
    runs, without a sort."""
    keys, counts, radix = rows
    if k == len(radix):
        return rows
    keys = keys // math.prod(radix[k:])
    first = run_starts(keys)
    return keys[first], np.add.reduceat(counts, first) if len(first) else counts, radix[:k]


def unpacked(
    rows: Distinct, cols: Sequence[str], dtypes: Sequence, framed: Sequence[str] | None = None
) -> pd.DataFrame:
    """The distinct rows' codes as a frame: `cols` in the packing's order, framed in the
    order of `framed` (the same names; by default `cols`)."""
    rest, _, radix = rows
    columns = {}
    for c, r, dtype in zip(reversed(cols), reversed(radix), reversed(dtypes), strict=True):
        columns[c] = (rest % r).astype(dtype)
        rest = rest // r
    # copy=False: one block per column, not one consolidated copy
    return pd.DataFrame({c: columns[c] for c in framed or cols}, copy=False)


def distinct_counts(source: pd.DataFrame, cols: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct rows of `source` on `cols` and how often each occurs, as
    `groupby(cols).size()` gives them, in key order (`sorted_distinct`). Falls back to
    pandas when the codes do not pack."""
    rows = sorted_distinct(source, cols) if cols else None
    if rows is None:
        sizes = source.groupby(list(cols), sort=False).size()
        return sizes.index.to_frame(index=False), sizes.to_numpy()
    return unpacked(rows, cols, [source[c].dtype for c in cols]), rows[1]


def _expected_log(
    projected: tuple[pd.DataFrame, np.ndarray], model: EstimateModel, n: int
) -> float:
    """sum over the source's distinct x_cols (`projected`: them and their counts) of
    p(x_cols) log p~_model(x_cols); the keys' estimates in slices on threads, one per
    worker (NumPy lets go of the GIL in its loops: on 2 cores the 10M-row release's
    term took 1.1 s on 2 threads, 2.2 s on one, 1.2 s on 2 forked workers, without
    sending anything back). The model's held arrays are built before (`_warm`)."""
    proj, counts = projected
    if not len(proj):
        return 0.0
    p = counts.astype(float) / n
    workers = default_workers() if len(proj) >= MIN_ROWS else 1
    bounds = np.linspace(0, len(proj), workers + 1).astype(np.int64)

    def part(span: tuple[int, int]) -> float:
        a, b = span
        with np.errstate(divide="ignore"):
            return float(np.sum(p[a:b] * np.log(model.marginal(proj.iloc[a:b]) / n)))

    spans = list(zip(bounds[:-1], bounds[1:], strict=True))
    if workers == 1:
        return part(spans[0])
    with ThreadPoolExecutor(workers) as threads:
        return float(sum(threads.map(part, spans)))


def _warm(models: Sequence[EstimateModel], terms, row: pd.DataFrame) -> None:
    """Each term's model asked once (at one source row), so that it builds the arrays it
    holds (an anatomy table's sorted QI runs, its table of counts) before the threads
    share it."""
    for i, cols, _ in terms:
        models[i].marginal(row[list(cols)])


def _projected(source: pd.DataFrame, every: Distinct | None, order: list[str], cols: list[str]):
    """The source's distinct rows on `cols` and their counts: by `coarser` when `cols`
    are the first columns of `order` (how `every` is packed), else counted anew. Framed
    in `cols`' order, as `_warm` asks the model (which keeps its arrays per order)."""
    k = len(cols)
    if every is None or set(cols) != set(order[:k]):
        return distinct_counts(source, cols)
    rows = coarser(every, k)
    return unpacked(rows, order[:k], [source[c].dtype for c in order[:k]], cols), rows[1]


def kl_divergence(
    models: Sequence[EstimateModel], source: pd.DataFrame, domains: Mapping[str, Sequence[Any]]
) -> float:
    """`source`: the source rows in the release's code space (one column per attribute).
    The source's distinct rows are counted once, packed with the widest term's columns
    first, so that term's (and any term on a prefix of them) distinct rows follow by
    `coarser`, without a second sort of the rows. Meanwhile a thread has the models
    build what they hold (`_warm`): the two share nothing (10M rows: 1.3 s and 2.0 s).
    Below `MIN_ROWS` rows all of it runs serially, with no thread to start or model to
    warm: GD's KL scoring (`gd.score: kl-unsafe`) of 90 six-row tables, 14 calls each
    (`tests/decompose/test_gd.py`'s KL-pick test, run alone), 45.5 s -> 25.6 s."""
    n = len(source)
    terms = log_terms([m.attributes for m in models])
    widest = max((cols for _, cols, _ in terms), key=len, default=[])
    order = [*widest, *(c for c in source.columns if c not in widest)]
    with ThreadPoolExecutor(1) as background:  # a thread starts only when submitted to
        # below MIN_ROWS the terms run on no thread: nothing to warm
        warm = background.submit(_warm, models, terms, source.iloc[:1]) if n >= MIN_ROWS else None
        every = sorted_distinct(source, order)
        counts = every[1] if every is not None else distinct_counts(source, order)[1]
        projections = [_projected(source, every, order, cols) for _, cols, _ in terms]
        if warm is not None:
            warm.result()
    p = counts.astype(float) / n
    kl = float(np.sum(p * np.log(p)))
    for (i, _, sign), projected in zip(terms, projections, strict=True):
        kl -= sign * _expected_log(projected, models[i], n)
    covered = {a for m in models for a in m.attributes}
    kl += sum(float(np.log(len(domains[a]))) for a in source.columns if a not in covered)
    return kl
