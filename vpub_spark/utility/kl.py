"""KL divergence of a release from its source (000 §5.1, Eq. 3).

D(p || p~) = sum_x p(x) log(p(x) / p~(x)) over the DISTINCT rows x of the source only
(the terms with p(x) = 0 vanish), so the full domain is never enumerated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .model import TableModel, estimate_rows


def kl_divergence(models: Sequence[TableModel], source: pd.DataFrame, domains: Mapping[str, Sequence[str]]) -> float:
    """`source`: the source rows in the release's code space (one column per attribute)."""
    n = len(source)
    distinct = source.groupby(list(source.columns), sort=False).size().rename("__n").reset_index()
    p = distinct.pop("__n").to_numpy(float) / n
    p_est = estimate_rows(models, distinct, n, domains)
    with np.errstate(divide="ignore"):
        return float(np.sum(p * (np.log(p) - np.log(p_est))))
