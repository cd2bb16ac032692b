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
from typing import Any

import numpy as np
import pandas as pd

from ..engines.pool import MIN_ROWS, default_workers, run_tasks
from ..estimate.models import EstimateModel
from ..kernels.arrays import packed
from .junction import log_terms


def distinct_counts(source: pd.DataFrame, cols: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct rows of `source` on `cols` (codes) and how often each occurs: the
    codes packed into one int64 per row and counted (by `bincount` when the packed range
    is small, else by one sort), as `groupby(cols).size()` gives them, in key order.
    Falls back to pandas when the codes do not pack."""
    both = packed([source[c].to_numpy(np.int64) for c in cols]) if cols else None
    if both is None:
        sizes = source.groupby(list(cols), sort=False).size()
        return sizes.index.to_frame(index=False), sizes.to_numpy()
    key, radix = both
    if math.prod(radix) <= 4 * len(key) + 65536:
        counts = np.bincount(key, minlength=math.prod(radix))
        keys = np.flatnonzero(counts)
        counts = counts[keys]
    else:
        key = np.sort(key)
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else key
        keys, counts = key[first], np.diff(np.r_[first, len(key)])
    columns = {}
    for c, r in zip(reversed(cols), reversed(radix), strict=True):
        keys, columns[c] = np.divmod(keys, r)
    # copy=False: one block per column, not one consolidated copy (0.4 s at 10M rows)
    frame = pd.DataFrame({c: columns[c].astype(source[c].dtype) for c in cols}, copy=False)
    return frame, counts


def _expected_log(
    projected: tuple[pd.DataFrame, np.ndarray], model: EstimateModel, n: int
) -> float:
    """sum over the source's distinct x_cols (`projected`: them and their counts) of
    p(x_cols) log p~_model(x_cols); the keys' estimates in slices on the in-process
    workers (`engines/pool.py`; the model's sorted arrays built here first, so the
    workers share them)."""
    proj, counts = projected
    if not len(proj):
        return 0.0
    p = counts.astype(float) / n
    model.marginal(proj.iloc[:1])  # builds the model's held arrays before the workers fork
    workers = default_workers() if len(proj) >= MIN_ROWS else 1
    bounds = np.linspace(0, len(proj), workers + 1).astype(np.int64)

    def part(span: tuple[int, int]) -> float:
        a, b = span
        with np.errstate(divide="ignore"):
            return float(np.sum(p[a:b] * np.log(model.marginal(proj.iloc[a:b]) / n)))

    return float(sum(run_tasks(part, list(zip(bounds[:-1], bounds[1:], strict=True)), workers)))


def kl_divergence(
    models: Sequence[EstimateModel], source: pd.DataFrame, domains: Mapping[str, Sequence[Any]]
) -> float:
    """`source`: the source rows in the release's code space (one column per attribute)."""
    n = len(source)
    every = distinct_counts(source, list(source.columns))  # also a term's, if on every column
    p = every[1].astype(float) / n
    kl = float(np.sum(p * np.log(p)))
    for i, cols, sign in log_terms([m.attributes for m in models]):
        whole = set(cols) == set(source.columns)
        projected = (every[0][list(cols)], every[1]) if whole else distinct_counts(source, cols)
        kl -= sign * _expected_log(projected, models[i], n)
    covered = {a for m in models for a in m.attributes}
    kl += sum(float(np.log(len(domains[a]))) for a in source.columns if a not in covered)
    return kl
