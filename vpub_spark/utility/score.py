"""KL scoring of candidate schemas on in-memory codes: what GD's add-back step calls
(000 Algorithm 1, steps 5-8). Each table is anonymized with the anatomy kernel (one
partition, the release seed) and cached by (attributes, sensitive)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

from ..estimate.models import EstimateModel, anonymized_model
from ..model import Schema
from .kl import kl_divergence


def kl_scorer(
    frame: pd.DataFrame, sizes: Mapping[str, int], l: int, seed: int
) -> Callable[[Schema], float]:
    domains = {a: range(n) for a, n in sizes.items()}  # only their sizes are used
    cache: dict[tuple, EstimateModel] = {}

    def model(attrs: tuple[str, ...], sensitive: str | None) -> EstimateModel:
        key = (frozenset(attrs), sensitive)
        if key not in cache:
            cache[key] = anonymized_model(frame, sorted(attrs), sensitive, l, seed)
        return cache[key]

    def score(schema: Schema) -> float:
        return kl_divergence(
            [model(t.attributes, t.sensitive) for t in schema.tables], frame, domains
        )

    return score
