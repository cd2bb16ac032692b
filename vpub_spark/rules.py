"""Privacy rules Q -> S (000 §2-§3): parsing, validation, irreducible reduction,
l-eligibility and a seeded generator of random irreducible rule sets (000 §6.1)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import PrivacyError, SpecError
from .model import ATTRIBUTE_NAME, Rule


def _names(value: object, where: str) -> list[str]:
    """A rule side: one attribute name, or a list of them (each a string)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(a, str) for a in items):
        raise SpecError(f"{where} must be an attribute name or a list of them")
    return [a.strip() for a in items]


def parse_rule(item: object, attributes: Iterable[str] | None = None, where: str = "rule") -> Rule:
    """Parse `"a, b -> c"` or `{lhs: [a, b], rhs: c}` and validate it.

    Only one RHS attribute is supported (000 §2.2 focuses on single-RHS rules); a rule
    written with several RHS attributes must be split into one rule per attribute.
    """
    if isinstance(item, str):
        if item.count("->") != 1:
            raise SpecError(f"{where} {item!r}: write it as 'A, B -> S' (exactly one '->')")
        left, right = item.split("->")
        lhs = [p.strip() for p in left.split(",")]
        rhs_parts = [p.strip() for p in right.split(",")]
    elif isinstance(item, Mapping):
        unknown = set(item) - {"lhs", "rhs"}
        if unknown or "lhs" not in item or "rhs" not in item:
            raise SpecError(
                f"{where} {dict(item)!r}: a rule mapping needs exactly the keys lhs and rhs"
            )
        lhs = _names(item["lhs"], f"{where} {dict(item)!r}: lhs")
        rhs_parts = _names(item["rhs"], f"{where} {dict(item)!r}: rhs")
    else:
        raise SpecError(
            f"{where} {item!r}: expected a string 'A, B -> S' or a mapping with lhs and rhs"
        )
    text = f"{', '.join(lhs)} -> {', '.join(rhs_parts)}"
    if len(rhs_parts) != 1 or not rhs_parts[0]:
        raise SpecError(
            f"{where} '{text}': needs exactly one RHS attribute; write one rule per sensitive attribute"
        )
    rhs = rhs_parts[0]
    if not lhs or any(not a for a in lhs):
        raise SpecError(f"{where} '{text}': the LHS is empty or has an empty name")
    if len(set(lhs)) != len(lhs):
        dup = sorted({a for a in lhs if lhs.count(a) > 1})
        raise SpecError(f"{where} '{text}': attribute {', '.join(dup)} appears twice on the LHS")
    if rhs in lhs:
        raise SpecError(f"{where} '{text}': the RHS {rhs} also appears on the LHS")
    for a in [*lhs, rhs]:
        if not ATTRIBUTE_NAME.match(a):
            raise SpecError(f"{where} '{text}': {a!r} is not a valid attribute name")
    if attributes is not None:
        known = list(attributes)
        missing = [a for a in [*lhs, rhs] if a not in known]
        if missing:
            raise SpecError(
                f"{where} '{text}': unknown attribute {', '.join(missing)}; the table has: {', '.join(known)}"
            )
    return Rule(frozenset(lhs), rhs)


def parse_rules(
    items: Sequence[object], attributes: Iterable[str] | None = None
) -> tuple[Rule, ...]:
    if isinstance(items, (str, Mapping)) or not isinstance(items, Sequence):
        raise SpecError("rules must be a list of rules")
    known = list(attributes) if attributes is not None else None
    return tuple(parse_rule(item, known, where=f"rule {i + 1}") for i, item in enumerate(items))


@dataclass(frozen=True)
class Reduction:
    """The irreducible subset of a rule list and, for every dropped rule, the rule implying it."""

    kept: tuple[Rule, ...]
    dropped: tuple[tuple[Rule, Rule], ...]


def implies(stronger: Rule, weaker: Rule) -> bool:
    """Theorem 3.1: Q -> S follows from Q' -> S exactly when Q is a subset of Q'."""
    return stronger.rhs == weaker.rhs and weaker.lhs <= stronger.lhs


def reduce_rules(rules: Sequence[Rule]) -> Reduction:
    """Drop every rule implied by another (Definition 2); of duplicates keep the first.

    The kept rules stay in their input order, so rule indices remain meaningful.
    """
    kept: list[Rule] = []
    dropped: list[tuple[Rule, Rule]] = []
    for i, r in enumerate(rules):
        by = next(
            (o for j, o in enumerate(rules) if j != i and implies(o, r) and (o != r or j < i)),
            None,
        )
        if by is None:
            kept.append(r)
        else:
            dropped.append((r, by))
    return Reduction(tuple(kept), tuple(dropped))


def is_irreducible(rules: Sequence[Rule]) -> bool:
    return len(reduce_rules(rules).kept) == len(rules)


@dataclass(frozen=True)
class Ineligible:
    attribute: str
    value: str
    share: float
    limit: float
    distinct: int = 0
    count: int = 0
    rows: int = 0

    def __str__(self) -> str:
        covers = (
            f"{self.count:,} of {self.rows:,} rows ({self.share:.2%})"
            if self.rows
            else f"{self.share:.2%} of the rows"
        )
        text = f"value {self.value!r} of {self.attribute} covers {covers}, more than 1/l = {self.limit:.2%}"
        l = round(1 / self.limit)
        if self.distinct < l:
            text += f" ({self.attribute} has only {self.distinct} distinct values; l = {l} needs at least {l})"
        return text


def ineligibility(
    attribute: str, labels: Sequence[str], counts: Sequence[int] | np.ndarray, l: int
) -> Ineligible | None:
    """None if the attribute is l-eligible (its most frequent value covers <= 1/l of the rows)."""
    counts = np.asarray(counts)
    n = int(counts.sum())
    if n == 0:
        return Ineligible(attribute, "<none>", 1.0, 1.0 / l)
    top = int(np.argmax(counts))
    if int(counts[top]) * l > n:
        return Ineligible(
            attribute,
            str(labels[top]),
            counts[top] / n,
            1.0 / l,
            int((counts > 0).sum()),
            int(counts[top]),
            n,
        )
    return None


def check_eligibility(
    rules: Sequence[Rule], frequencies: Mapping[str, tuple[Sequence[str], np.ndarray]], l: int
) -> None:
    """Reject rules whose RHS no publication can protect (docs/explanation/architecture.md,
    "The data model")."""
    problems = []
    for i, r in enumerate(rules):
        labels, counts = frequencies[r.rhs]
        bad = ineligibility(r.rhs, labels, counts, l)
        if bad is not None:
            problems.append(f"rule {i + 1} '{r}' cannot be met: {bad}")
    if problems:
        raise PrivacyError("; ".join(problems))


def random_rules(
    attributes: Sequence[str],
    c: int,
    lhs: int,
    seed: int,
    eligible_rhs: Iterable[str] | None = None,
    max_tries: int = 10_000,
) -> tuple[Rule, ...]:
    """A seeded random irreducible set of `c` rules with `lhs` LHS attributes each (000 §6.1).

    RHS attributes are drawn from `eligible_rhs` (the l-eligible attributes), so that
    every rule can be met at least by publishing its RHS alone, as the paper requires.
    """
    attrs = list(attributes)
    rhs_pool = [a for a in attrs if eligible_rhs is None or a in set(eligible_rhs)]
    if c < 1 or lhs < 1:
        raise SpecError(f"random rules need c >= 1 and lhs >= 1 (got c = {c}, lhs = {lhs})")
    if lhs > len(attrs) - 1:
        raise SpecError(
            f"lhs = {lhs} needs at least {lhs + 1} attributes; the table has {len(attrs)}"
        )
    if not rhs_pool:
        raise PrivacyError("no attribute is eligible as a rule's RHS for this l; lower l")
    rng = np.random.default_rng(seed)
    rules: list[Rule] = []
    for _ in range(max_tries):
        if len(rules) == c:
            break
        rhs = rhs_pool[int(rng.integers(len(rhs_pool)))]
        others = [a for a in attrs if a != rhs]
        picked = rng.choice(len(others), size=lhs, replace=False)
        r = Rule(frozenset(others[int(i)] for i in picked), rhs)
        if all(not implies(o, r) and not implies(r, o) for o in rules):
            rules.append(r)
    if len(rules) < c:
        raise SpecError(
            f"could not draw {c} irreducible rules with lhs = {lhs} from {len(attrs)} attributes "
            f"({len(rhs_pool)} eligible as RHS)"
        )
    return tuple(rules)


def load_rules(path: str) -> list:
    """The rule items of a YAML file: a list, or a mapping with a `rules` list."""
    from .errors import VpubError
    from .tablespec import load_yaml

    data = load_yaml(path)
    if isinstance(data, dict):
        data = data.get("rules")
    if data is None:
        raise VpubError(f"{path}: expected a list of rules (or a mapping with a `rules` list)")
    return data
