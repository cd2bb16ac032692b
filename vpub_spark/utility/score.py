"""KL scoring of candidate schemas on in-memory codes: what GD's add-back step calls
(000 Algorithm 1, steps 5-8). Each table is anonymized with the anatomy kernel (one
partition, the release seed) and cached by (attributes, sensitive)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

from ..kernels.anatomy import anatomize
from ..model import Schema
from .kl import kl_divergence
from .model import TableModel


def kl_scorer(frame: pd.DataFrame, sizes: Mapping[str, int], l: int, seed: int) -> Callable[[Schema], float]:  # noqa: E741
    domains = {a: range(n) for a, n in sizes.items()}
    cache: dict[tuple, TableModel] = {}

    def model(attrs: tuple[str, ...], sensitive: str | None) -> TableModel:
        key = (frozenset(attrs), sensitive)
        if key not in cache:
            cols = sorted(attrs)
            if sensitive is None:
                counts = frame.groupby(cols, sort=False).size().rename("count").reset_index()
                cache[key] = TableModel("t", tuple(cols), None, counts=counts)
            else:
                qit, st = anatomize(frame[cols], sensitive, l, seed)
                cache[key] = TableModel("t", tuple(cols), sensitive, qit=qit, st=st)
        return cache[key]

    def score(schema: Schema) -> float:
        return kl_divergence([model(t.attributes, t.sensitive) for t in schema.tables], frame, domains)

    return score
