"""A release as a decomposable model (000 §5.1; docs/explanation/algorithms.md, junction tree).

The tables are the cliques of a junction tree (maximum spanning tree on the sizes of
their intersections, networkx); the estimate of a full row is
p~(x) = prod_T p~_T(x_T) / prod_separators p~_S(x_S), each separator's marginal taken
from its own clique. Attributes no table publishes are uniform.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from ..estimate.models import EstimateModel


def junction_tree(
    cliques: Sequence[Sequence[str]],
) -> list[tuple[int, int | None, tuple[str, ...]]]:
    """(model index, parent index, separator) in breadth-first order of a maximum spanning
    tree on intersection sizes; a separator is the clique's intersection with its
    parent, which for a decomposable schema is its intersection with all before it."""
    g = nx.Graph()
    g.add_nodes_from(range(len(cliques)))
    for i in range(len(cliques)):
        for j in range(i + 1, len(cliques)):
            w = len(set(cliques[i]) & set(cliques[j]))
            if w:
                g.add_edge(i, j, weight=w)
    tree = nx.maximum_spanning_tree(g)
    order: list[tuple[int, int | None, tuple[str, ...]]] = []
    seen: set[int] = set()
    for root in range(len(cliques)):
        if root in seen:
            continue
        order.append((root, None, ()))
        seen.add(root)
        for parent, node in nx.bfs_edges(tree, root):
            up = set(cliques[parent])
            order.append((node, parent, tuple(a for a in cliques[node] if a in up)))
            seen.add(node)
    return order


def log_terms(cliques: Sequence[Sequence[str]]) -> list[tuple[int, list[str], float]]:
    """The terms of log p~(x) = sum_T log p~_T(x_T) - sum_S log p~_S(x_S): (clique index,
    columns, sign), +1 per table and -1 per separator (its marginal from its own clique),
    in the junction tree's order; what KL and the row estimates sum."""
    out: list[tuple[int, list[str], float]] = []
    for i, _, sep in junction_tree(cliques):
        out.append((i, list(cliques[i]), 1.0))
        if sep:
            out.append((i, list(sep), -1.0))
    return out


def log_estimate_rows(
    models: Sequence[EstimateModel],
    rows: pd.DataFrame,
    n: int,
    domains: Mapping[str, Sequence[Any]],
) -> tuple[np.ndarray, np.ndarray]:
    """log p~(x) for each row of `rows` (codes of every attribute), and where p~(x) = 0
    (a clique marginal of 0; its log is then left at a finite placeholder)."""
    log_p = np.zeros(len(rows))
    zero = np.zeros(len(rows), dtype=bool)
    for i, cols, sign in log_terms([m.attributes for m in models]):
        est = models[i].marginal(rows[cols])
        if sign > 0:  # a separator's 0 is its clique's 0 too
            zero |= est == 0
        log_p += sign * np.log(np.where(est > 0, est, 1.0) / n)
    covered = {a for m in models for a in m.attributes}
    for a in rows.columns:
        if a not in covered:  # unpublished: uniform over its domain
            log_p -= np.log(len(domains[a]))
    return log_p, zero


def estimate_rows(
    models: Sequence[EstimateModel],
    rows: pd.DataFrame,
    n: int,
    domains: Mapping[str, Sequence[Any]],
) -> np.ndarray:
    """p~(x) for each row of `rows` (codes of every attribute); 0/0 := 0."""
    log_p, zero = log_estimate_rows(models, rows, n, domains)
    return np.where(zero, 0.0, np.exp(log_p))
