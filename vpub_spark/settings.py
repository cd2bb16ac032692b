"""The methods' sections of a job config (docs/reference/config.md): `multi_sa:`,
`marginals:` and `streamliner:`, each parsed and checked once (`config.py` holds the
job config around them)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SpecError
from .model import UNSAFE_ASSIGN
from .options import option

BIP_MODES = ("exact", "partitioned")
PARTITIONINGS = ("mondrian", "ncp", "ncp+mondrian")  # the marginals' partition steps


@dataclass(frozen=True)
class MultiSaSettings:
    """`multi_sa:` of a config (000 Appendix B): `exact` solves Algorithm 3 on the whole
    table on the driver (tens of thousands of rows); `partitioned` solves it per QI-local
    chunk of about `chunk_rows` rows, in parallel. Each solve stops at `time_limit_s`."""

    mode: str = option(
        "exact",
        doc="`exact`: one program on the driver; `partitioned`: one per QI-local chunk, in parallel",
        choices=BIP_MODES,
    )
    solver: str = option("cbc", doc="the PuLP solver: `cbc` or `highs`")
    time_limit_s: float | None = option(60.0, doc="each program stops after this many seconds")
    chunk_rows: int = option(20_000, doc="`partitioned`: rows per chunk, about", minimum=1)

    def __post_init__(self) -> None:
        from .kernels.solvers import SOLVERS
        from .options import one_of

        one_of(self.solver, SOLVERS, "multi_sa.solver")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise SpecError(f"multi_sa.time_limit_s must be positive, not {self.time_limit_s!r}")


@dataclass(frozen=True)
class MarginalSettings:
    """`marginals:` of a config (002): the sensitive attribute, the QI attributes of each
    marginal to publish now (the sensitive attribute is added to each), the private
    bucket store (docs/explanation/architecture.md, "Private state"; later marginals are
    added from it with `vpub marginals add`), and the bucketization's knobs: `qi` (the
    attributes the buckets are made on), Spark chunks of at least `chunk_rows` rows, the
    `partitioning` step (`mondrian`, the default, or `ncp`: 002 Figure 1 with its `tries`
    and `blocks`; see publishing/marginals.subtables and docs/benchmarks/marginals.md, "Why
    002's error is not reproduced").
    Decision: `qi` defaults to the attributes of the listed marginals (002 §4's setup:
    the bucketization is made close on exactly those, which is what the queries see);
    list more in `qi` to be able to add marginals on them later (`vpub marginals add`
    can only use attributes the buckets were made on), at some cost in utility."""

    sensitive: str = option("", doc="the sensitive attribute", shown="required", required=True)
    schemas: tuple[tuple[str, ...], ...] = option(
        (), doc="the QI attributes of each marginal published now, e.g. `[[age], [age, sex]]`"
    )
    state: str = option(
        "",
        doc="the private bucket store (owner-only; never inside `output.path`)",
        shown="required",
        required=True,
    )
    qi: tuple[str, ...] | None = option(
        None,
        doc="the attributes the buckets are made on; later marginals (`vpub marginals add`) "
        "can only use these",
        shown="the marginals' attributes",
    )
    chunk_rows: int = option(50_000, doc="rows per Spark chunk, at least", minimum=1)
    tries: int = option(5, doc="`ncp`: tries per cut (002 Figure 1)", minimum=1)
    blocks: int = option(32, doc="`ncp`: blocks per attribute (002 Figure 1)", minimum=1)
    partitioning: str = option(
        "mondrian",
        doc="the partition step: `mondrian`, `ncp` or `ncp+mondrian`",
        choices=PARTITIONINGS,
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

    def __post_init__(self) -> None:
        from .options import one_of

        if self.assign == "local":
            raise SpecError(
                f"marginals.assign: local is now called {UNSAFE_ASSIGN}: it can let an "
                "adversary who knows the algorithm learn a value with probability above "
                f"1/m; write {UNSAFE_ASSIGN} to accept that, or random (the default)"
            )
        one_of(self.assign, ("random", UNSAFE_ASSIGN), "marginals.assign")


ANONYMIZERS = ("anatomy", "rda", "gda")  # how rule-based methods anonymize a sub-table


@dataclass(frozen=True)
class StreamlinerSettings:
    """`streamliner:` of a config (003, methods rda / gda / ria): the sensitive attribute,
    the QI attributes generalized (default: every other attribute), GDA's weights per
    QI attribute and segment rows (kernels/streamliner.py), and Spark chunks of at
    least `chunk_rows` rows (QI-local and l-eligible, 002's chunk planner)."""

    sensitive: str = option("", doc="the sensitive attribute", shown="required", required=True)
    qi: tuple[str, ...] | None = option(
        None, doc="the QI attributes generalized", shown="every other attribute"
    )
    weights: tuple[tuple[str, int], ...] | None = option(
        None, doc="GDA: an integer >= 0 per QI attribute, e.g. `{age: 1, gender: 10000}`"
    )
    segment: int | None = option(
        None, doc="GDA: rows per segment", shown="the kernel's default", minimum=1
    )
    chunk_rows: int = option(50_000, doc="rows per Spark chunk, at least", minimum=1)
