"""Guardian Decomposition (000 §5.3, Algorithm 1).

Steps 1-4 decompose the schema while some rule violates GNF; steps 5-8 add attributes
back while GNF holds, a candidate scored by the caller's `score` (schema-level code never
touches data). Decisions: docs/explanation/algorithms.md ("GD's open choices"); why the
paper's KL scoring is `kl-unsafe`: docs/explanation/threat-model.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..gnf import check_gnf
from ..model import PublishedTable, Rule, Schema
from .uad import _check, _enforced, _require_gnf


@dataclass(frozen=True)
class GdCost:
    decomposition_steps: int
    isolated: tuple[str, ...]
    kl_evaluations: int
    added_back: tuple[tuple[str, str], ...]  # (attribute, table)
    seconds: float
    budget_exhausted: bool

    def as_dict(self) -> dict:
        return {
            "decomposition_steps": self.decomposition_steps,
            "isolated": list(self.isolated),
            "kl_evaluations": self.kl_evaluations,
            "added_back": [list(p) for p in self.added_back],
            "seconds": round(self.seconds, 3),
            "budget_exhausted": self.budget_exhausted,
        }


def _schema(tables: list[tuple[list[str], str | None]], rules: Sequence[Rule]) -> Schema:
    out = []
    for i, (attrs, s) in enumerate(tables):
        t = tuple(attrs)
        out.append(PublishedTable(f"t{i + 1}", t, s, _enforced(t, s, rules) if s else ()))
    return Schema(tuple(out))


def _tidy(tables: list[tuple[list[str], str | None]]) -> list[tuple[list[str], str | None]]:
    tables = [(a, None if a == [s] else s) for a, s in tables if a]
    keep = []
    for i, (a, s) in enumerate(tables):
        inside = any(
            j != i and set(a) <= set(b) and (set(a) != set(b) or j < i)
            for j, (b, _) in enumerate(tables)
        )
        if s is None and inside:
            continue
        keep.append((a, s))
    return keep


def in_order(schema: Schema) -> float:
    """The data-free score: every candidate alike, so GD takes the first one in its
    seeded order (docs/explanation/algorithms.md)."""
    return 0.0


def gd(
    attributes: Sequence[str],
    rules: Sequence[Rule],
    seed: int = 0,
    score: Callable[[Schema], float] | None = None,
    budget_s: float | None = None,
) -> tuple[Schema, GdCost]:
    """Algorithm 1: steps 1-4 (`_split`) until the schema is in GNF, then, with a
    `score`, steps 5-8: add the best-scoring attribute while one fits (within
    `budget_s`)."""
    _check(attributes, rules)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    rule_order = [int(i) for i in rng.permutation(len(rules))]
    attr_order = [attributes[int(i)] for i in rng.permutation(len(attributes))]
    tables, steps, isolated = _split(rules, rule_order, attr_order)
    evaluations, added, exhausted = 0, [], False
    while score is not None:
        candidates = _candidates(tables, rules, attr_order)
        if not candidates:
            break
        best = None
        for a, j, trial in candidates:
            if budget_s is not None and time.perf_counter() - t0 > budget_s:
                exhausted = True
                break
            kl = score(_schema(trial, rules))
            evaluations += score is not in_order
            if best is None or kl < best[0]:
                best = (kl, a, j, trial)
        if exhausted or best is None:
            break
        _, a, j, tables = best
        added.append((a, f"t{j + 1}"))
    schema = _schema(tables, rules)
    _require_gnf(schema, rules, "gd")
    return schema, GdCost(
        steps, tuple(isolated), evaluations, tuple(added), time.perf_counter() - t0, exhausted
    )


def _split(rules: Sequence[Rule], rule_order: list[int], attr_order: list[str]):
    """Split off the first violated rule (in `rule_order`) until the schema is in GNF;
    a schema seen before (or too many steps) isolates each rule's RHS instead."""
    tables: list[tuple[list[str], str | None]] = (
        [(list(attr_order), rules[rule_order[0]].rhs)] if rules else [(list(attr_order), None)]
    )
    seen: set[tuple] = set()
    steps, isolate = 0, False
    isolated: list[str] = []
    cap = 10 * (len(rules) + len(attr_order))
    while True:
        report = check_gnf(_schema(tables, rules), rules)
        if report.ok:
            return tables, steps, isolated
        violated = {v.index for v in report.violated}
        r = rules[next(i for i in rule_order if i in violated)]
        tables = [
            ([a for a in attrs if a != r.rhs], None if s == r.rhs else s) for attrs, s in tables
        ]
        if isolate:
            tables.append(([r.rhs], None))
            isolated.append(r.rhs)
        else:
            tables.append(([a for a in attr_order if a in r.lhs] + [r.rhs], r.rhs))
        tables = _tidy(tables)
        key = tuple(sorted((tuple(sorted(a)), s or "") for a, s in tables))
        steps += 1
        if key in seen or steps > cap:
            isolate = True
        seen.add(key)


def _candidates(tables, rules: Sequence[Rule], attr_order: list[str]) -> list:
    """Every schema one attribute larger (an attribute added to a table) still in GNF."""
    candidates = []
    for a in attr_order:
        for j, (attrs, s) in enumerate(tables):
            if a in attrs:
                continue
            trial = [(list(x), y) for x, y in tables]
            trial[j] = (attrs + [a], s)
            if check_gnf(_schema(trial, rules), rules).ok:
                candidates.append((a, j, trial))
    return candidates
