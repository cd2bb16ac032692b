"""The two sums of a release's KL divergence over distinct source rows (000 §5.1,
`utility/kl.py`'s decomposition): KL = sum_x p log p - (1/n) sum_x c_x log p~(x), over
the source's distinct rows x with counts c_x. Pure pandas/NumPy: the Spark engine runs
it in every task over its share of the rows, the in-process engine once."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..kernels.anatomy import COUNT
from .base import ReleaseFiles


def kl_sums(
    release: ReleaseFiles, labels: dict[str, list[str]], n: int, frames: Iterable[pd.DataFrame]
) -> tuple[float, float]:
    """sum of p log p (p = c / n, c a row's count) and sum of c log p~(row) (-inf if some
    row has p~ = 0) over `frames` (the source's columns and COUNT, each distinct row in
    one frame). log p~ is a sum of per-term logs, so the counts are added up per key of
    each term (vectorized) and each term's marginal is evaluated once, at those keys:
    the model's fixed cost (grouping the release's tables) is paid once per term, not
    once per frame."""
    models = release.models()  # in source codes
    terms, rows, entropy = release.terms, 0, 0.0
    counts: list = [None] * len(terms)
    for frame in frames:
        p = frame[COUNT].to_numpy(float) / n
        rows, entropy = rows + int(frame[COUNT].sum()), entropy + float(np.sum(p * np.log(p)))
        for i, (_, cols, _) in enumerate(terms):
            c = frame.groupby(list(cols), sort=False)[COUNT].sum()
            counts[i] = c if counts[i] is None else counts[i].add(c, fill_value=0)
    total, zero = 0.0, False
    for (i, _, sign), c in zip(terms, counts, strict=True):
        if c is not None:
            est = models[i].marginal(c.index.to_frame(index=False))
            zero |= bool((est == 0).any())
            total += sign * float(
                np.sum(c.to_numpy(float) * np.log(np.where(est > 0, est, 1.0) / n))
            )
    covered = {a for m in models for a in m.attributes}
    total -= rows * sum(float(np.log(len(v))) for a, v in labels.items() if a not in covered)
    return entropy, -np.inf if zero else total
