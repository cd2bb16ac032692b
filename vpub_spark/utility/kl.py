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

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..estimate.models import EstimateModel
from .junction import log_terms


def _expected_log(source: pd.DataFrame, cols: list[str], model: EstimateModel, n: int) -> float:
    """sum over the source's distinct x_cols of p(x_cols) log p~_model(x_cols)."""
    proj = source.groupby(cols, sort=False).size().rename("__n").reset_index()
    p = proj.pop("__n").to_numpy(float) / n
    with np.errstate(divide="ignore"):
        return float(np.sum(p * np.log(model.marginal(proj) / n)))


def kl_divergence(
    models: Sequence[EstimateModel], source: pd.DataFrame, domains: Mapping[str, Sequence[Any]]
) -> float:
    """`source`: the source rows in the release's code space (one column per attribute)."""
    n = len(source)
    p = source.groupby(list(source.columns), sort=False).size().to_numpy(float) / n
    kl = float(np.sum(p * np.log(p)))
    for i, cols, sign in log_terms([m.attributes for m in models]):
        kl -= sign * _expected_log(source, cols, models[i], n)
    covered = {a for m in models for a in m.attributes}
    kl += sum(float(np.log(len(domains[a]))) for a in source.columns if a not in covered)
    return kl
