"""One dispatch from a method name to its schema, shared by `vpub publish` and
`vpub compare` (schema level: GD's KL scorer is handed in by the caller)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import SpecError
from ..model import Rule, Schema
from .gd import GdCost, gd
from .multi_sa import multi_sa_schema
from .uad import single_attribute, uad

Design = Callable[..., tuple[Schema, GdCost | None]]

DESIGNS: dict[str, Design] = {
    "uad": lambda names, rules, seed, scorer, budget: (uad(names, rules, seed), None),
    "uad_plain": lambda names, rules, seed, scorer, budget: (
        uad(names, rules, seed, plain=True),
        None,
    ),
    "gd": lambda names, rules, seed, scorer, budget: gd(
        names, rules, seed, scorer() if scorer else None, budget
    ),
    "single_attribute": lambda names, rules, seed, scorer, budget: (
        single_attribute(names, rules),
        None,
    ),
    "multi_sa_bip": lambda names, rules, seed, scorer, budget: (
        multi_sa_schema(names, rules),
        None,
    ),
}
"""The decompositions by method name: (names, rules, seed, GD's scorer factory, GD's
budget) -> the schema, and GD's cost."""
METHODS = tuple(DESIGNS)


def design(
    method: str,
    names: Sequence[str],
    rules: Sequence[Rule],
    seed: int,
    gd_scorer: Callable[[], Callable[[Schema], float]] | None = None,
    gd_budget_s: float | None = None,
) -> tuple[Schema, GdCost | None]:
    """The schema of `method`; for GD also its cost. `gd_scorer` builds the KL scorer
    only when GD needs it (it draws a data sample)."""
    make = DESIGNS.get(method)
    if make is None:
        raise SpecError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return make(names, rules, seed, gd_scorer, gd_budget_s)
