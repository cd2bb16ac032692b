"""Guardian Normal Form on schemas (000 §4): reachability (Definition 3), guardian
tables (Definition 4) and the GNF verdict per rule (Definition 5). No data involved.

A table anonymized for S (anatomy) protects S against every other attribute of that
table, so condition (ii) of Definition 4 holds for a table exactly when its sensitive
attribute is S, or when (Q ∩ A_i) ∪ Q* is empty (the rule's LHS cannot reach the table's
other attributes at all; S alone is safe because rules are l-eligible, Lemma 1's premise).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .model import PublishedTable, Rule, Schema

if TYPE_CHECKING:
    import networkx as nx

Status = Literal["unreachable", "guardian", "violated"]


def _graph(tables: Iterable[tuple[str, Iterable[str]]]) -> nx.Graph:
    """Bipartite graph: attribute nodes ('a', A) joined to the tables ('t', T) that hold
    them. (networkx is imported here, not with the module: a partition task that
    unpickles a publishing job imports this module and never draws a graph.)"""
    import networkx as nx

    g = nx.Graph()
    for name, attrs in tables:
        for a in attrs:
            g.add_edge(("a", a), ("t", name))
    return g


def _reachable(g: nx.Graph, a: str, b: str) -> bool:
    """Definition 3: a and b are reachable iff a chain of tables links them."""
    import networkx as nx

    return ("a", a) in g and ("a", b) in g and nx.has_path(g, ("a", a), ("a", b))


def _path(g: nx.Graph, sources: Iterable[str], target: str) -> tuple[str, ...]:
    """A shortest chain `A -[T]- B -[U]- S` from any source to the target, or ()."""
    import networkx as nx

    best: list | None = None
    for s in sorted(sources):
        if _reachable(g, s, target):
            p = nx.shortest_path(g, ("a", s), ("a", target))
            if best is None or len(p) < len(best):
                best = p
    return tuple(n[1] for n in best) if best else ()


def render_path(path: Sequence[str]) -> str:
    """`gender -[T3]- age -[T4]- zipcode` (attributes at even positions, tables between)."""
    out = path[0]
    for i in range(1, len(path) - 1, 2):
        out += f" -[{path[i]}]- {path[i + 1]}"
    return out


@dataclass(frozen=True)
class Verdict:
    index: int
    rule: Rule
    status: Status
    guardian: str | None = None
    path: tuple[str, ...] = ()
    reason: str = ""

    def as_dict(self) -> dict:
        d: dict[str, object] = {"rule": self.index, "status": self.status, "reason": self.reason}
        if self.guardian is not None:
            d["guardian"] = self.guardian
        if self.path:
            d["path"] = list(self.path)
        return d


def _entries(tables: Sequence[PublishedTable], skip: str | None = None, drop: str | None = None):
    for t in tables:
        attrs = [a for a in t.attributes if not (t.name == skip and a == drop)]
        if t.name == skip and drop is None:
            continue
        yield t.name, attrs


def guardian_failure(
    tables: Sequence[PublishedTable], t: PublishedTable, rule: Rule
) -> tuple[str, tuple[str, ...]] | None:
    """Why `t` is not the guardian of `rule` (Definition 4), or None if it is."""
    q, s = rule.lhs, rule.rhs
    if s not in t.attributes:
        return f"{t.name} does not contain {s}", ()
    others = _graph(_entries(tables, skip=t.name))
    q_star = {a for a in t.attributes if a != s and any(_reachable(others, x, a) for x in q)}
    exposed = (q & set(t.attributes)) | q_star
    if exposed and not t.protects(s):
        how = {"projection": "a projection", "anatomy": f"anonymized for {t.sensitive}"}.get(
            t.kind, f"multi-SA for {', '.join(t.sensitive_set)}"
        )
        return (
            f"{t.name} is {how}, not for {s}, yet joins it to {', '.join(sorted(exposed))} "
            f"which the LHS reaches",
            (),
        )
    without_s = _graph(_entries(tables, skip=t.name, drop=s))
    path = _path(without_s, q, s)
    if path:
        return (
            f"after removing {s} from {t.name}, {s} is still reachable: {render_path(path)}",
            path,
        )
    return None


def verdict(tables: Sequence[PublishedTable], rule: Rule, index: int = 0) -> Verdict:
    """Definition 5 for one rule: unreachable, guarded by one table, or violated (with why)."""
    g = _graph((t.name, t.attributes) for t in tables)
    path = _path(g, rule.lhs, rule.rhs)
    if not path:
        return Verdict(index, rule, "unreachable", reason=f"no LHS attribute reaches {rule.rhs}")
    failures = []
    for t in tables:
        if rule.rhs not in t.attributes:
            continue
        why = guardian_failure(tables, t, rule)
        if why is None:
            return Verdict(
                index, rule, "guardian", guardian=t.name, reason=f"{t.name} is the guardian table"
            )
        failures.append(why)
    shown = next((p for _, p in failures if p), path)
    return Verdict(index, rule, "violated", path=shown, reason="; ".join(w for w, _ in failures))


@dataclass(frozen=True)
class GnfReport:
    verdicts: tuple[Verdict, ...]

    @property
    def ok(self) -> bool:
        return all(v.status != "violated" for v in self.verdicts)

    @property
    def violated(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.status == "violated")


def check_gnf(schema: Schema, rules: Sequence[Rule]) -> GnfReport:
    """Definition 5 over every rule; rule indices are 0-based positions in `rules`."""
    return GnfReport(tuple(verdict(schema.tables, r, i) for i, r in enumerate(rules)))


def load_schema(path: str) -> Schema:
    """A publication schema from YAML: `tables:` with {name, attributes, sensitive}."""
    from .errors import VpubError
    from .tablespec import load_yaml

    data = load_yaml(path)
    tables = data.get("tables") if isinstance(data, dict) else data
    if not isinstance(tables, list) or not tables:
        raise VpubError(
            f"{path}: expected `tables:` with a list of {{name, attributes, sensitive}}"
        )
    out = []
    for i, t in enumerate(tables):
        if not isinstance(t, dict) or "attributes" not in t:
            raise VpubError(f"{path}: table {i + 1} needs `attributes`")
        attrs = t["attributes"]
        if not isinstance(attrs, list) or not all(isinstance(a, str) and a for a in attrs):
            raise VpubError(f"{path}: table {i + 1}'s `attributes` must be a list of names")
        attrs = tuple(attrs)
        out.append(PublishedTable(str(t.get("name", f"T{i + 1}")), attrs, t.get("sensitive")))
    return Schema(tuple(out))
