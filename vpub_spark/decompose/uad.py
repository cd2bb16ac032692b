"""Utility-Aware Decomposition (000 §5.4, Algorithm 2) and single-attribute publishing (§1.3).

Algorithm 2's open choices (DSATUR with seeded ties, colour classes grown to maximal
independent sets, the largest table first): docs/explanation/algorithms.md, "UAD's open
choices".
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from ..errors import SpecError
from ..gnf import check_gnf
from ..model import PublishedTable, Rule, Schema


def rule_graph(attributes: Sequence[str], rules: Sequence[Rule]) -> nx.DiGraph:
    """Algorithm 2 line 1: an edge q -> s for every rule with q on the LHS and s its RHS."""
    g = nx.DiGraph()
    g.add_nodes_from(attributes)
    for r in rules:
        for q in sorted(r.lhs):
            g.add_edge(q, r.rhs)
    return g


def _check(attributes: Sequence[str], rules: Sequence[Rule]) -> None:
    names = set(attributes)
    for r in rules:
        unknown = sorted((r.lhs | {r.rhs}) - names)
        if unknown:
            raise SpecError(f"rule '{r}' names {', '.join(unknown)}, which the table does not have")


def _enforced(table: tuple[str, ...], v: str | None, rules: Sequence[Rule]) -> tuple[int, ...]:
    return tuple(i for i, r in enumerate(rules) if r.rhs == v and r.lhs & set(table))


def uad(
    attributes: Sequence[str], rules: Sequence[Rule], seed: int = 0, plain: bool = False
) -> Schema:
    """UAD's schema. `plain=True` is Algorithm 2 as written (largest DSATUR colour class,
    no growing), kept to measure what the choices above are worth."""
    _check(attributes, rules)
    g = rule_graph(attributes, rules)
    order = [attributes[i] for i in np.random.default_rng(seed).permutation(len(attributes))]
    rank = {a: i for i, a in enumerate(order)}
    remaining = list(order)
    tables: list[PublishedTable] = []
    while remaining:
        left = set(remaining)
        sub = nx.Graph()
        sub.add_nodes_from(remaining)
        sub.add_edges_from((a, b) for a, b in g.to_undirected().edges if a in left and b in left)
        colours = nx.greedy_color(sub, strategy="DSATUR")
        classes: dict[int, list[str]] = {}
        for a in remaining:
            classes.setdefault(colours[a], []).append(a)
        best = None
        for members in classes.values():
            cls = list(members)
            if not plain:
                for a in remaining:
                    if a not in cls and not any(sub.has_edge(a, b) for b in cls):
                        cls.append(a)
            v = _sensitive(g, cls, remaining, rank)
            first = -min(rank[a] for a in cls)
            if plain:  # Algorithm 2 line 3: the largest colour class
                key = (len(cls), 0, first)
            else:  # the largest table with its v, then the most rules protected
                key = (len(cls) + (v is not None), sum(1 for b in cls if g.has_edge(b, v)), first)
            if best is None or key > best[0]:
                best = (key, cls, v)
        assert best is not None
        _, cls, v = best
        attrs = tuple(sorted(cls, key=rank.__getitem__)) + ((v,) if v else ())
        tables.append(PublishedTable(f"t{len(tables) + 1}", attrs, v, _enforced(attrs, v, rules)))
        remaining = [a for a in remaining if a not in attrs]
    schema = Schema(tuple(tables))
    _require_gnf(schema, rules, "uad")
    return schema


def _sensitive(
    g: nx.DiGraph, cls: list[str], remaining: list[str], rank: dict[str, int]
) -> str | None:
    """Algorithm 2 line 5: no outgoing edge into the class, most incoming edges from it."""
    members = set(cls)
    best, best_key = None, None
    for v in remaining:
        if v in members or any(g.has_edge(v, b) for b in members):
            continue
        incoming = sum(1 for b in members if g.has_edge(b, v))
        if incoming == 0:
            continue
        key = (incoming, -rank[v])
        if best_key is None or key > best_key:
            best, best_key = v, key
    return best


def single_attribute(attributes: Sequence[str], rules: Sequence[Rule]) -> Schema:
    """000 §1.3's baseline: every attribute its own projection table (no rule reachable)."""
    _check(attributes, rules)
    schema = Schema(tuple(PublishedTable(a, (a,)) for a in attributes))
    _require_gnf(schema, rules, "single_attribute")
    return schema


def _require_gnf(schema: Schema, rules: Sequence[Rule], method: str) -> None:
    report = check_gnf(schema, rules)
    if not report.ok:  # a bug, not a user error: stop the job
        raise AssertionError(
            f"{method} produced a schema that is not GNF: {[v.reason for v in report.violated]}"
        )
