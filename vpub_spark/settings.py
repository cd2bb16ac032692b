"""The methods' sections of a job config (docs/reference/config.md): `multi_sa:`,
`marginals:` and `streamliner:`, each parsed and checked once (`config.py` holds the
job config around them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .model import UNSAFE_ASSIGN, option, refuse_unknown, yaml_keys

BIP_MODES = ("exact", "partitioned")


@dataclass(frozen=True)
class MultiSaSettings:
    """`multi_sa:` of a config (000 Appendix B): `exact` solves Algorithm 3 on the whole
    table on the driver (tens of thousands of rows); `partitioned` solves it per QI-local
    chunk of about `chunk_rows` rows, in parallel. Each solve stops at `time_limit_s`."""

    mode: str = option(
        "exact",
        doc="`exact`: one program on the driver; `partitioned`: one per QI-local chunk, in parallel",
    )
    solver: str = option("cbc", doc="the PuLP solver: `cbc` or `highs`")
    time_limit_s: float | None = option(60.0, doc="each program stops after this many seconds")
    chunk_rows: int = option(20_000, doc="`partitioned`: rows per chunk, about")

    def __post_init__(self) -> None:
        from .kernels.solvers import SOLVERS

        one_of(self.mode, BIP_MODES, "multi_sa.mode")
        one_of(self.solver, SOLVERS, "multi_sa.solver")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise SpecError(f"multi_sa.time_limit_s must be positive, not {self.time_limit_s!r}")
        if (
            not isinstance(self.chunk_rows, int)
            or isinstance(self.chunk_rows, bool)
            or self.chunk_rows < 1
        ):
            raise SpecError(
                f"multi_sa.chunk_rows must be a positive integer, not {self.chunk_rows!r}"
            )

    @classmethod
    def from_dict(cls, d: dict) -> MultiSaSettings:
        refuse_unknown(d, yaml_keys(cls), "multi_sa")
        t = d.get("time_limit_s", 60.0)
        return cls(
            str(d.get("mode", "exact")),
            str(d.get("solver", "cbc")),
            number(t, "multi_sa.time_limit_s"),
            d.get("chunk_rows", 20_000),
        )


def one_of(value: Any, choices: tuple, key: str) -> None:
    """Refuse a setting that is not one of its choices, naming them."""
    if value not in choices:
        raise SpecError(f"{key} must be one of {', '.join(choices)}, not {value!r}")


def number(value: Any, key: str, kind: type = float, minimum: float = 0) -> Any:
    """`value` as a finite `kind` (float or int) >= `minimum`, or None; anything else is
    a SpecError naming `key`."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or (kind is int and not float(value).is_integer())
        or value < minimum
    ):
        what = f"{'a whole' if kind is int else 'a'} number >= {minimum:g}"
        raise SpecError(f"{key} must be {what}, not {value!r}")
    return kind(value)


def _names(v: Any, what: str) -> tuple[str, ...]:
    items = [x.strip() for x in v.split(",")] if isinstance(v, str) else v
    if (
        not isinstance(items, list | tuple)
        or not items
        or not all(isinstance(x, str) and x for x in items)
    ):
        raise SpecError(f"{what} must be a non-empty list of attribute names, not {v!r}")
    return tuple(items)


@dataclass(frozen=True)
class MarginalSettings:
    """`marginals:` of a config (002): the sensitive attribute, the QI attributes of each
    marginal to publish now (the sensitive attribute is added to each), the private
    bucket store (docs/explanation/architecture.md, "Private state"; later marginals are
    added from it with `vpub marginals add`), and the bucketization's knobs: `qi` (the
    attributes the buckets are made on), Spark chunks of at least `chunk_rows` rows, the
    `partitioning` step (`mondrian`, the default, or `ncp`: 002 Figure 1 with its `tries`
    and `blocks`; see publish/marginals.subtables and docs/benchmarks/marginals.md, "Why
    002's error is not reproduced").
    Decision: `qi` defaults to the attributes of the listed marginals (002 §4's setup:
    the bucketization is made close on exactly those, which is what the queries see);
    list more in `qi` to be able to add marginals on them later (`vpub marginals add`
    can only use attributes the buckets were made on), at some cost in utility."""

    sensitive: str = option("", doc="the sensitive attribute", shown="required")
    schemas: tuple[tuple[str, ...], ...] = option(
        (), doc="the QI attributes of each marginal published now, e.g. `[[age], [age, sex]]`"
    )
    state: str = option(
        "",
        doc="the private bucket store (owner-only; never inside `output.path`)",
        shown="required",
    )
    qi: tuple[str, ...] | None = option(
        None,
        doc="the attributes the buckets are made on; later marginals (`vpub marginals add`) "
        "can only use these",
        shown="the marginals' attributes",
    )
    chunk_rows: int = option(50_000, doc="rows per Spark chunk, at least")
    tries: int = option(5, doc="`ncp`: tries per cut (002 Figure 1)")
    blocks: int = option(32, doc="`ncp`: blocks per attribute (002 Figure 1)")
    partitioning: str = option(
        "mondrian", doc="the partition step: `mondrian`, `ncp` or `ncp+mondrian`"
    )
    assign: str = option(
        "random",
        doc="how the assigning step deals each value's tuples to buckets: `random` (002; "
        "keeps every posterior at 1/m) or `local-unsafe` (along a QI order: narrower "
        "boxes, but an adversary who knows the algorithm can learn a value with "
        "probability above 1/m; the manifest, the export and the page say so)",
    )
    key: str | None = option(
        None,
        doc="the record identifier column (never published; the store keeps a keyed hash "
        "of it), needed to update the store with a new snapshot (`vpub statdb update`)",
        shown="none: the store cannot be updated",
    )

    PARTITIONINGS = ("mondrian", "ncp", "ncp+mondrian")
    ASSIGNS = ("random", UNSAFE_ASSIGN)

    def __post_init__(self) -> None:
        one_of(self.partitioning, self.PARTITIONINGS, "marginals.partitioning")
        if self.assign == "local":
            raise SpecError(
                f"marginals.assign: local is now called {UNSAFE_ASSIGN}: it can let an "
                "adversary who knows the algorithm learn a value with probability above "
                f"1/m; write {UNSAFE_ASSIGN} to accept that, or random (the default)"
            )
        one_of(self.assign, self.ASSIGNS, "marginals.assign")
        for k in ("chunk_rows", "tries", "blocks"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise SpecError(f"marginals.{k} must be a positive integer, not {v!r}")

    @classmethod
    def from_dict(cls, d: dict) -> MarginalSettings | None:
        if not d:
            return None
        refuse_unknown(d, yaml_keys(cls), "marginals")
        for k in ("sensitive", "state"):
            if not d.get(k):
                raise SpecError(f"marginals.{k} is required")
        if not isinstance(d.get("schemas", []), list):
            raise SpecError(
                "marginals.schemas must be a list of attribute lists, e.g. [[age], [age, gender]]"
            )
        return cls(
            str(d["sensitive"]),
            tuple(_names(x, "each of marginals.schemas") for x in d.get("schemas") or []),
            str(d["state"]),
            None if d.get("qi") is None else _names(d["qi"], "marginals.qi"),
            d.get("chunk_rows", 50_000),
            d.get("tries", 5),
            d.get("blocks", 32),
            str(d.get("partitioning", "mondrian")),
            str(d.get("assign", "random")),
            None if d.get("key") is None else str(d["key"]),
        )


ANONYMIZERS = ("anatomy", "rda", "gda")  # how rule-based methods anonymize a sub-table


@dataclass(frozen=True)
class StreamlinerSettings:
    """`streamliner:` of a config (003, methods rda / gda / ria): the sensitive attribute,
    the QI attributes generalized (default: every other attribute), GDA's weights per
    QI attribute and segment rows (kernels/streamliner.py), and Spark chunks of at
    least `chunk_rows` rows (QI-local and l-eligible, 002's chunk planner)."""

    sensitive: str = option("", doc="the sensitive attribute", shown="required")
    qi: tuple[str, ...] | None = option(
        None, doc="the QI attributes generalized", shown="every other attribute"
    )
    weights: tuple[tuple[str, int], ...] | None = option(
        None, doc="GDA: an integer >= 0 per QI attribute, e.g. `{age: 1, gender: 10000}`"
    )
    segment: int | None = option(None, doc="GDA: rows per segment", shown="the kernel's default")
    chunk_rows: int = option(50_000, doc="rows per Spark chunk, at least")

    @classmethod
    def from_dict(cls, d: dict) -> StreamlinerSettings | None:
        if not d:
            return None
        refuse_unknown(d, yaml_keys(cls), "streamliner")
        if not d.get("sensitive"):
            raise SpecError("streamliner.sensitive is required")
        weights = d.get("weights")
        if weights is not None and (
            not isinstance(weights, dict)
            or not all(isinstance(v, int) and v >= 0 for v in weights.values())
        ):
            raise SpecError(
                "streamliner.weights must map QI attributes to integers >= 0, e.g. {age: 1, gender: 10000}"
            )
        for k in ("segment", "chunk_rows"):
            v = d.get(k)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise SpecError(f"streamliner.{k} must be a positive integer, not {v!r}")
        return cls(
            str(d["sensitive"]),
            None if d.get("qi") is None else _names(d["qi"], "streamliner.qi"),
            None if weights is None else tuple((str(k), int(v)) for k, v in weights.items()),
            d.get("segment"),
            number(d.get("chunk_rows", 50_000), "streamliner.chunk_rows", int),
        )
