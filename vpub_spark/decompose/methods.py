"""One dispatch from a method name to its schema, shared by `vpub publish` and
`vpub compare` (schema level: GD's KL scorer is handed in by the caller)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import SpecError
from ..model import Rule, Schema
from .gd import GdCost, gd
from .multi_sa import multi_sa_schema
from .uad import single_attribute, uad

METHODS = ("uad", "uad_plain", "gd", "single_attribute", "multi_sa_bip")


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
    if method == "uad":
        return uad(names, rules, seed), None
    if method == "uad_plain":
        return uad(names, rules, seed, plain=True), None
    if method == "single_attribute":
        return single_attribute(names, rules), None
    if method == "multi_sa_bip":
        return multi_sa_schema(names, rules), None
    if method == "gd":
        return gd(names, rules, seed, gd_scorer() if gd_scorer else None, gd_budget_s)
    raise SpecError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
