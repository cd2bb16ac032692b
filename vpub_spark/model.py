"""Frozen, validated value types shared by every layer (docs/explanation/architecture.md).

Attributes are discrete. A numeric attribute is ordered by value; a categorical one by
its declared `order` (or its groups' order, or sorted labels). Binning generalizes raw
values to coarser labels before encoding: numeric bins are closed intervals
`[lo, hi]`, categorical groups map a label to the raw values it covers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import SpecError
from .options import option, parse_options
from .privacy import thresholds

UNSAFE_ASSIGN = "local-unsafe"  # marginals.assign's QI-local dealing: the name says its cost
SHARED_GROUPING = "shared"  # a table entry's `grouping`: its groups are every such table's
UNSAFE_GD_SCORE = "kl-unsafe"  # gd.score's KL on the data: the schema picked tells of it


def unsafe_option(manifest: Mapping[str, Any]) -> str | None:
    """The option without the posterior guarantee a release was made with (as
    `section.key: value`), read from its manifest's `method_cost`; None for none.

    Args:
        manifest: the release's manifest.

    Returns:
        The option's words, or None.
    """
    cost = manifest.get("method_cost") or {}
    if cost.get("assign") == UNSAFE_ASSIGN:
        return f"marginals.assign: {UNSAFE_ASSIGN}"
    if cost.get("score") == UNSAFE_GD_SCORE:
        return f"gd.score: {UNSAFE_GD_SCORE}"
    return None


def joined_sensitive_tables(manifest: Mapping[str, Any]) -> list[str]:
    """The tables of a release that publish groups of different sensitive attributes
    over the same people, each table grouped on its own: anatomy tables of a release
    made before they shared one grouping (their entries carry no `grouping: shared`; a
    design of several generalized tables is refused now). An adversary who knows how
    those attributes go together can combine such groupings: the posterior guarantee
    holds for each table alone (docs/explanation/threat-model.md). Empty when at most
    one attribute is left.

    Args:
        manifest: the release's manifest.

    Returns:
        Their names, or an empty list.
    """
    tables = [t for t in manifest.get("tables") or [] if isinstance(t.get("sensitive"), str)]
    apart = [t for t in tables if t.get("grouping") != SHARED_GROUPING]
    if not apart or len({t["sensitive"] for t in tables}) < 2:
        return []
    return [str(t["name"]) for t in tables]


ATTRIBUTE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
Kind = Literal["numeric", "categorical"]
MissingPolicy = Literal["drop", "reject"]
TableKind = Literal["anatomy", "generalized", "projection", "multi_sa"]


def number_label(x: float) -> str:
    """The label of a numeric value: `37` for 37.0, `2.5` otherwise."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _labels(v: Any, key: str) -> tuple[str, ...]:
    """A list of labels as written (numbers read as their text)."""
    if not isinstance(v, list | tuple) or isinstance(v, str):
        raise SpecError(f"{key} must be a list of labels, not {v!r}")
    return tuple(str(x) for x in v)


def _bins(v: Any, key: str) -> tuple[NumericBin, ...]:
    """`bins:` as `[[17, 24], ...]` or `[{label, min, max}, ...]`."""
    if not isinstance(v, list | tuple):
        raise SpecError(f"{key} must be a list of bins, not {v!r}")
    out = []
    for b in v:
        if isinstance(b, list | tuple) and len(b) == 2:
            lo, hi = _bound(b[0], key), _bound(b[1], key)
            out.append(NumericBin(f"{number_label(lo)}-{number_label(hi)}", lo, hi))
        elif isinstance(b, Mapping) and {"min", "max"} <= set(b):
            lo, hi = _bound(b["min"], key), _bound(b["max"], key)
            out.append(
                NumericBin(str(b.get("label", f"{number_label(lo)}-{number_label(hi)}")), lo, hi)
            )
        else:
            raise SpecError(f"{key}: a bin is [min, max] or {{label, min, max}}, not {b!r}")
    return tuple(out)


def _bound(x: Any, key: str) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise SpecError(f"{key}: a bin's bound must be a number, not {x!r}") from None


def _groups(v: Any, key: str) -> tuple[CategoryGroup, ...]:
    """`groups:` as `{label: [values]}`, in the labels' order."""
    if not isinstance(v, Mapping):
        raise SpecError(f"{key} must be a mapping of labels to value lists, not {v!r}")
    return tuple(CategoryGroup(str(k), _labels(m, f"{key}.{k}")) for k, m in v.items())


@dataclass(frozen=True)
class NumericBin:
    label: str
    lo: float
    hi: float

    def __post_init__(self) -> None:
        if self.lo > self.hi:
            raise SpecError(
                f"bin {self.label!r}: lower bound {self.lo} exceeds upper bound {self.hi}"
            )


@dataclass(frozen=True)
class CategoryGroup:
    label: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class Attribute:
    """One attribute of a table spec's `attributes:` list."""

    name: str = option(
        doc="the attribute's name in the releases: a letter, then letters, digits, `_`, `-`, `.`"
    )
    kind: Kind = option("categorical", doc="`numeric` (ordered by value) or `categorical`")
    source: str | None = option(None, doc="the input column it is read from", shown="`name`")
    order: tuple[str, ...] | None = option(
        None,
        doc="a categorical attribute's labels in their order",
        shown="sorted labels",
        parse=_labels,
    )
    bins: tuple[NumericBin, ...] | None = option(
        None,
        doc="a numeric attribute generalized to closed intervals: `[[17, 24], [25, 34]]` "
        "(labels `17-24`, ...) or `[{label, min, max}]`; a value in no bin is an error",
        parse=_bins,
    )
    groups: tuple[CategoryGroup, ...] | None = option(
        None,
        doc="a categorical attribute generalized: `{label: [values]}`, in the labels' order",
        parse=_groups,
    )
    rest: str | None = option(
        None, doc="with `groups`: the label of every value no group lists (else an error)"
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not ATTRIBUTE_NAME.match(self.name):
            raise SpecError(
                f"attribute name {self.name!r} must start with a letter and hold only letters, digits, '_', '-', '.'"
            )
        if self.kind not in ("numeric", "categorical"):
            raise SpecError(
                f"attribute {self.name}: kind must be numeric or categorical, not {self.kind!r}"
            )
        if self.bins is not None and self.kind != "numeric":
            raise SpecError(f"attribute {self.name}: bins apply to numeric attributes; use groups")
        if self.groups is not None and self.kind != "categorical":
            raise SpecError(
                f"attribute {self.name}: groups apply to categorical attributes; use bins"
            )
        if self.bins is not None:
            _no_duplicates(self.name, "bin label", [b.label for b in self.bins])
            ordered = sorted(self.bins, key=lambda b: b.lo)
            for a, b in zip(ordered, ordered[1:], strict=False):
                if b.lo <= a.hi:
                    raise SpecError(
                        f"attribute {self.name}: bins {a.label!r} and {b.label!r} overlap"
                    )
        if self.groups is not None:
            _no_duplicates(self.name, "group label", [g.label for g in self.groups])
            _no_duplicates(self.name, "grouped value", [m for g in self.groups for m in g.members])
        if self.rest is not None and self.groups is None:
            raise SpecError(f"attribute {self.name}: rest needs groups")
        if self.order is not None:
            _no_duplicates(self.name, "value in order", list(self.order))
            if self.groups is not None and set(self.order) != set(self.group_labels):
                raise SpecError(f"attribute {self.name}: order must list exactly the group labels")

    @property
    def group_labels(self) -> tuple[str, ...]:
        labels = tuple(g.label for g in self.groups or ())
        return labels + ((self.rest,) if self.rest is not None and self.rest not in labels else ())

    @property
    def column(self) -> str:
        return self.source or self.name


def _no_duplicates(attr: str, what: str, values: list[str]) -> None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise SpecError(f"attribute {attr}: duplicate {what} {v!r}")
        seen.add(v)


def _labels_list(v: Any, key: str) -> list:
    if not isinstance(v, list | tuple):
        raise SpecError(f"{key} must be a list of attributes, not {v!r}")
    return list(v)


def attribute_from_dict(d: Any) -> Attribute:
    """One attribute of a table spec's YAML, by the options `Attribute` declares.

    Args:
        d: its mapping (`{name, kind, ...}`).

    Returns:
        The attribute.

    Raises:
        SpecError: no name, an unknown key, or a value its option refuses.
    """
    if not isinstance(d, Mapping) or "name" not in d:
        raise SpecError(f"an attribute needs at least a name: {d!r}")
    return parse_options(Attribute, d, f"attribute {d['name']}")


@dataclass(frozen=True)
class TableSpec:
    """How to read a microdata table: its attributes and the missing-value policy."""

    attributes: tuple[Attribute, ...] = option(
        doc="the attributes read, in order (below); other input columns are ignored",
        parse=lambda v, key: tuple(attribute_from_dict(a) for a in _labels_list(v, key)),
    )
    name: str = option("table", doc="the table's name (release ids, messages)")
    missing: MissingPolicy = option(
        "drop",
        doc="a row with a missing value: `drop` it (the release counts them) or `reject` "
        "the input (an error that counts them)",
    )
    missing_values: tuple[str, ...] = option(
        ("?", ""), doc="the values that mean missing, compared after trimming spaces", parse=_labels
    )
    encoding: str = option(
        "utf-8",
        doc="of CSV input (any Python codec in process; utf-8, latin-1, us-ascii, utf-16, "
        "utf-32 on Spark); undecodable bytes are an error naming file and line, never replaced",
    )

    def __post_init__(self) -> None:
        import codecs

        if not self.attributes:
            raise SpecError("a table spec needs at least one attribute")
        try:
            codecs.lookup(self.encoding)
        except LookupError:
            raise SpecError(f"encoding {self.encoding!r} is not a known text encoding") from None
        _no_duplicates(self.name, "attribute", [a.name for a in self.attributes])
        if self.missing not in ("drop", "reject"):
            raise SpecError(f"missing must be 'drop' or 'reject', not {self.missing!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise SpecError(f"unknown attribute {name!r}; the table has: {', '.join(self.names)}")


@dataclass(frozen=True, order=True)
class Rule:
    """A privacy rule Q -> S (000 §2.2): knowing Q must not reveal S beyond 1/l."""

    lhs: frozenset[str]
    rhs: str

    def __str__(self) -> str:
        return f"{', '.join(sorted(self.lhs))} -> {self.rhs}"

    def as_dict(self) -> dict:
        return {"lhs": sorted(self.lhs), "rhs": self.rhs}


@dataclass(frozen=True)
class PrivacySpec:
    """The privacy model: l-diversity in 000's sense (no sensitive value above 1/l of
    its group) or m-invariance (002), and `also`, further criteria every group must
    meet (`privacy.CRITERIA`: k, distinct_l, entropy_l, recursive_c, t). Which method
    enforces which: publishing/registry.check_models."""

    model: Literal["l-diversity", "m-invariance"] = option(
        "l-diversity",
        doc="`l-diversity` (no sensitive value above 1/l of a group; 000) or `m-invariance` "
        "(002; the marginals and the statistical database)",
    )
    l: int | None = option(2, doc="l >= 2, for `l-diversity`")
    m: int | None = option(None, doc="m >= 2, for `m-invariance`")
    also: tuple[tuple[str, float], ...] = option(
        (),
        doc="further criteria every group must meet, e.g. `{distinct_l: 3, entropy_l: 3, "
        "recursive_c: 2, k: 5, t: 0.3}`; refused when the method cannot guarantee them "
        "([privacy models](../explanation/privacy-models.md))",
        shown="`{}`",
    )
    suppression: float = option(
        0.0, doc="the share of rows the rules may suppress, in [0, 1) (publishing/suppression.py)"
    )

    def __post_init__(self) -> None:
        if self.model == "l-diversity":
            if not isinstance(self.l, int) or self.l < 2:
                raise SpecError(f"l-diversity needs an integer l >= 2, got l = {self.l!r}")
        elif self.model == "m-invariance":
            if not isinstance(self.m, int) or self.m < 2:
                raise SpecError(f"m-invariance needs an integer m >= 2, got m = {self.m!r}")
        else:
            raise SpecError(
                f"privacy model must be l-diversity or m-invariance, not {self.model!r}"
            )
        if not isinstance(self.suppression, int | float) or not 0 <= self.suppression < 1:
            raise SpecError(
                f"privacy.suppression must be a share of the rows in [0, 1), not {self.suppression!r}"
            )
        thresholds(self.also, "privacy.also")

    @property
    def parameter(self) -> int:
        return int(self.l if self.model == "l-diversity" else self.m)  # type: ignore[arg-type]

    @property
    def letter(self) -> str:
        """The parameter's name: l (l-diversity) or m (m-invariance)."""
        return "l" if self.model == "l-diversity" else "m"

    @property
    def extra(self) -> dict[str, float]:
        return dict(self.also)

    def as_dict(self) -> dict:
        base = (
            {"model": self.model, "l": self.l}
            if self.model == "l-diversity"
            else {"model": self.model, "m": self.m}
        )
        return (
            base
            | ({"also": dict(self.also)} if self.also else {})
            | ({"suppression": self.suppression} if self.suppression else {})
        )


@dataclass(frozen=True)
class PublishedTable:
    """One table of a publication schema: its attributes and what protects it.

    A table anonymized for `sensitive` (anatomy) protects that attribute against every
    other attribute of the table; a projection protects nothing. A multi-SA table (000
    Appendix B) protects each attribute of `sensitive_set` against all the others.
    """

    name: str
    attributes: tuple[str, ...]
    sensitive: str | None = None
    enforces: tuple[int, ...] = field(default=())
    sensitive_set: tuple[str, ...] = field(default=())
    generalized: bool = False  # an m-unique generalized marginal (002) of `sensitive`

    def __post_init__(self) -> None:
        if not self.attributes:
            raise SpecError(f"table {self.name}: no attributes")
        if len(set(self.attributes)) != len(self.attributes):
            raise SpecError(f"table {self.name}: duplicate attributes")
        if self.sensitive is not None and self.sensitive not in self.attributes:
            raise SpecError(
                f"table {self.name}: sensitive attribute {self.sensitive} is not in the table"
            )
        if self.sensitive_set and (
            self.sensitive is not None or not set(self.sensitive_set) <= set(self.attributes)
        ):
            raise SpecError(
                f"table {self.name}: a multi-SA table's sensitive attributes must be among its attributes"
            )

    @property
    def kind(self) -> TableKind:
        if self.sensitive_set:
            return "multi_sa"
        if self.generalized:
            return "generalized"
        return "anatomy" if self.sensitive is not None else "projection"

    @classmethod
    def from_entry(cls, e: dict) -> PublishedTable:
        """A manifest's table entry (docs/reference/release-format.md; a multi-SA entry lists its
        sensitive attributes)."""
        if e.get("kind") == "multi_sa":
            return cls(
                e["name"],
                tuple(e["attributes"]),
                None,
                tuple(e.get("enforces", ())),
                tuple(e["sensitive"]),
            )
        return cls(
            e["name"],
            tuple(e["attributes"]),
            e.get("sensitive"),
            tuple(e.get("enforces", ())),
            generalized=e.get("kind") == "generalized",
        )

    def protects(self, attribute: str) -> bool:
        return attribute == self.sensitive or attribute in self.sensitive_set


@dataclass(frozen=True)
class Schema:
    """A set of published tables (000 §4)."""

    tables: tuple[PublishedTable, ...]

    @property
    def attributes(self) -> frozenset[str]:
        return frozenset(a for t in self.tables for a in t.attributes)
