"""A release as a decomposable model (000 §5.1; DESIGN.md §6; ALGORITHMS.md §7).

Each published table gives an estimated distribution over its attributes:
- a projection gives its counts;
- an anatomy table gives, for any subset A of its attributes (QI part Q_A, maybe S),
  est_A(x) = sum_g n_g(x_{Q_A}) * (c_g(x_S) / |g| if S in A else 1),
  the within-group independence of QI values and the sensitive value.
The tables are the cliques of a junction tree (maximum spanning tree on the sizes of
their intersections, networkx); the estimate of a full row is
p~(x) = prod_T p~_T(x_T) / prod_separators p~_S(x_S), each separator's marginal taken
from its own clique (ALGORITHMS.md §7). Attributes no table publishes are uniform.

Everything works in code space: each attribute's domain is the set of labels the
release itself shows (every table covers every row, so every value present appears),
ordered numerically when all labels are numbers, else as strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np
import pandas as pd

from ..release.reader import COUNT, GROUP, Release

EST = "__est"


def sort_labels(labels) -> list[str]:
    labels = sorted({str(v) for v in labels})
    try:
        return sorted(labels, key=float)
    except ValueError:
        return labels


@dataclass(frozen=True)
class Groups:
    """Anatomy groups as dense indices: for QIT rows, ST rows, and each group's size."""

    qit: np.ndarray
    st: np.ndarray
    size: np.ndarray

    @property
    def count(self) -> int:
        return len(self.size)


@dataclass(frozen=True)
class TableModel:
    """One published table in code space. Anatomy: `qit` (group_id + QI codes) and `st`
    (group_id, S code, count); projection: `counts` (codes + count)."""

    name: str
    attributes: tuple[str, ...]
    sensitive: str | None
    qit: pd.DataFrame | None = None
    st: pd.DataFrame | None = None
    counts: pd.DataFrame | None = None

    @property
    def qi(self) -> list[str]:
        return [a for a in self.attributes if a != self.sensitive]

    @cached_property
    def groups(self) -> Groups:
        ids, index = np.unique(self.st[GROUP].to_numpy(), return_inverse=True)
        size = np.bincount(index, weights=self.st[COUNT].to_numpy(), minlength=len(ids))
        return Groups(np.searchsorted(ids, self.qit[GROUP].to_numpy()), index, size)

    def marginal(self, keys: pd.DataFrame) -> np.ndarray:
        """Estimated count of each row of `keys` (codes of a subset of the attributes)."""
        cols = list(keys.columns)
        if not cols:
            return np.full(len(keys), float(self.rows()))
        if self.sensitive is None:
            agg = self.counts.groupby(cols, sort=False)[COUNT].sum().rename(EST).reset_index()
            return keys.merge(agg, on=cols, how="left")[EST].fillna(0.0).to_numpy(float)
        q = [c for c in cols if c != self.sensitive]
        per_q = self.qit.groupby([GROUP, *q], sort=False).size().rename("n").reset_index()
        if self.sensitive in cols:
            needed = keys.drop_duplicates()
            joined = (
                needed.merge(per_q, on=q, how="inner") if q else needed.merge(per_q, how="cross")
            )
            joined = joined.merge(self.share, on=[GROUP, self.sensitive], how="inner")
            est = (
                (joined["n"] * joined["w"])
                .groupby([joined[c] for c in cols], sort=False)
                .sum()
                .rename(EST)
                .reset_index()
            )
        else:
            est = per_q.groupby(q, sort=False)["n"].sum().rename(EST).reset_index()
        return keys.merge(est, on=cols, how="left")[EST].fillna(0.0).to_numpy(float)

    @cached_property
    def share(self) -> pd.DataFrame:
        """Anatomy: per (group, sensitive value), `w` = c_g(s) / |g|."""
        size = self.st.groupby(GROUP)[COUNT].sum().rename("size")
        share = self.st.join(size, on=GROUP)
        return share.assign(w=share[COUNT] / share["size"])[[GROUP, self.sensitive, "w"]]

    @cached_property
    def joint(self) -> pd.DataFrame:
        """The table's whole estimated distribution: codes of its attributes + EST counts
        (anatomy: every QI combination of a group with every sensitive value of it)."""
        cols = list(self.attributes)
        if self.sensitive is None:
            return self.counts.groupby(cols, sort=False)[COUNT].sum().rename(EST).reset_index()
        per_q = self.qit.groupby([GROUP, *self.qi], sort=False).size().rename("n").reset_index()
        j = per_q.merge(self.share, on=GROUP)
        return (
            (j["n"] * j["w"])
            .groupby([j[c] for c in cols], sort=False)
            .sum()
            .rename(EST)
            .reset_index()
        )

    def rows(self) -> int:
        return int(len(self.qit) if self.sensitive is not None else self.counts[COUNT].sum())


def anonymized_model(
    frame: pd.DataFrame, attributes: Sequence[str], sensitive: str | None, l: int, seed: int
) -> TableModel:
    """The model of one table anonymized in memory by the release's kernel (one
    partition): anatomy for `sensitive`, or the aggregated projection."""
    from ..kernels.anatomy import anatomize

    cols = list(attributes)
    if sensitive is None:
        return TableModel(
            "t",
            tuple(cols),
            None,
            counts=frame.groupby(cols, sort=False).size().rename(COUNT).reset_index(),
        )
    qit, st = anatomize(frame[cols], sensitive, l, seed)
    return TableModel("t", tuple(cols), sensitive, qit=qit, st=st)


def _domains(parts: Mapping[tuple[str, str], pd.DataFrame]) -> dict[str, list[str]]:
    """Each attribute's labels as the release shows them (every table covers every row)."""
    labels: dict[str, set] = {}
    for frame in parts.values():
        for a in frame.columns:
            if a not in (GROUP, COUNT):
                col = frame[a]
                labels.setdefault(a, set()).update(
                    col.cat.categories
                    if isinstance(col.dtype, pd.CategoricalDtype)
                    else col.dropna().unique()
                )
    return {a: sort_labels(v) for a, v in labels.items()}


def to_codes(frame: pd.DataFrame, domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Labels -> codes of `domains` (-1 for a label outside the domain)."""
    out = frame.copy()
    for a in frame.columns:
        if a in domains:
            labels = frame[a].astype(str).where(frame[a].notna(), None)  # null (suppressed) -> -1
            out[a] = pd.Categorical(labels, categories=list(domains[a])).codes.astype(np.int32)
    return out


def release_models(
    rel: Release, domains: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[TableModel], dict[str, list[str]]]:
    """The models of a release's tables in code space (each part read once), and the
    domains used: the given ones, or those the release shows."""
    parts = {
        (t["name"], part): rel.read(t["name"], part).to_pandas()
        for t in rel.tables
        for part in t["parts"]
    }
    domains = dict(domains) if domains is not None else _domains(parts)
    models = []
    for t in rel.tables:
        coded = {part: to_codes(parts[(t["name"], part)], domains) for part in t["parts"]}
        if t["kind"] == "anatomy":
            models.append(
                TableModel(
                    t["name"],
                    tuple(t["attributes"]),
                    t["sensitive"],
                    qit=coded["qit"],
                    st=coded["st"],
                )
            )
        elif t["kind"] == "projection":
            models.append(
                TableModel(t["name"], tuple(t["attributes"]), None, counts=coded["counts"])
            )
        elif t["kind"] == "multi_sa":
            from .multi_sa import MultiSaModel

            sizes = {a: len(domains[a]) for a in t["sensitive"]}
            models.append(
                MultiSaModel(
                    t["name"],
                    tuple(t["attributes"]),
                    tuple(t["sensitive"]),
                    coded["qit"],
                    coded["st"],
                    sizes,
                )
            )
        else:
            raise NotImplementedError(f"table kind {t['kind']!r} has no estimate yet")
    return models, domains


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


def estimate_rows(
    models: Sequence[TableModel], rows: pd.DataFrame, n: int, domains: Mapping[str, Sequence[str]]
) -> np.ndarray:
    """p~(x) for each row of `rows` (codes of every attribute)."""
    log_p = np.zeros(len(rows))
    zero = np.zeros(len(rows), dtype=bool)  # a clique marginal of 0: p~ = 0 (and 0/0 := 0)
    covered: set[str] = set()
    for i, _, sep in junction_tree([m.attributes for m in models]):
        m = models[i]
        clique = m.marginal(rows[list(m.attributes)])
        zero |= clique == 0
        log_p += np.log(np.where(clique > 0, clique, 1.0) / n)
        if sep:
            s = m.marginal(rows[list(sep)])
            log_p -= np.log(np.where(s > 0, s, 1.0) / n)
        covered |= set(m.attributes)
    for a in rows.columns:
        if a not in covered:  # unpublished: uniform over its domain
            log_p -= np.log(len(domains[a]))
    return np.where(zero, 0.0, np.exp(log_p))


def source_codes(loaded, domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """A loaded source table (its own codes) recoded into a release's code space."""
    out = {}
    for a in loaded.names:
        lookup = pd.Categorical(
            list(loaded.dictionaries[a].labels), categories=list(domains[a])
        ).codes.astype(np.int32)
        out[a] = lookup[loaded.data[a].to_numpy()]
    return pd.DataFrame(out)
