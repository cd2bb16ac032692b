"""The m-invariant marginal publisher (002) in the release format: QI-local m-eligible
chunks, then per chunk the partitioning and assigning steps, the leftovers and every
marginal's decomposition; each task writes its parts and its part of the private store.

How it runs, the layout and the decisions: docs/explanation/marginals.md; the store:
docs/explanation/architecture.md, "Private state".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..encoding import Dictionary, write_decoded
from ..engines.base import LoadedTable
from ..errors import SpecError
from ..kernels.marginal_groups import decompose
from ..kernels.minvariance import bucketize, check_m_eligible_counts, partition
from ..kernels.mondrian import blind_mondrian, qi_order
from ..kernels.partitioning import QiShards, combine_counts, partition_seed, plan_chunks
from ..model import UNSAFE_ASSIGN, PublishedTable, Rule
from ..release.layout import COUNT, COUNTERFEITS, GROUP, SIZE, part_file, part_location
from ..release.manifest import table_entry
from ..release.stores.record_keys import check_key, keys_from_source
from ..release.stores.store import (
    BUCKET,
    BUCKETS,
    ROW,
    STORE_FORMAT,
    SUB,
    check_store_location,
    file_digests,
    group_dir,
    new_store_id,
    release_location,
    restrict,
    store_location,
    write_store,
)
from ..release.stores.versions import first_version
from ..storage import is_remote
from .method import Design, Plan, sizes_of, summary_frame, summary_schema

SUMMARY_COLUMNS = {
    "table": "string",
    "part": "int32",
    "rows": "int64",
    "groups": "int64",
    "buckets": "int64",
    "subtables": "int64",
    "task": "int32",
}


def marginal_name(attributes, sensitive: str) -> str:
    return "-".join([*attributes, sensitive])


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows in an order that depends on their content only (ties in the kernels go
    to lower rows, so a retried task, which may see its rows in another order, repeats
    every choice)."""
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


def write_marginal(
    stage: str | Path,
    groups_dir: str | Path,
    table: str,
    codes: pd.DataFrame,
    sensitive: str,
    s: np.ndarray,
    group: np.ndarray,
    first: int,
    rows: np.ndarray,
    dictionaries: Mapping[str, Dictionary],
    part: int,
    fake: np.ndarray | None = None,
) -> int:
    """Write one part of one marginal: `groups` (boxes, size) and `st` in the release,
    the tuple-to-group links in the store. Group ids are `first` + the local group;
    `fake`: which rows are counterfeits (`write_generalized`)."""
    n = write_generalized(stage, table, codes, sensitive, s, group, first, dictionaries, part, fake)
    gid = first + group.astype(np.int64)
    write_decoded(pd.DataFrame({ROW: rows, GROUP: gid}), {}, groups_dir, part_file(part))
    return n


def write_generalized(
    stage: str | Path,
    table: str,
    codes: pd.DataFrame,
    sensitive: str,
    s: np.ndarray,
    group: np.ndarray,
    first: int,
    dictionaries: Mapping[str, Dictionary],
    part: int,
    fake: np.ndarray | None = None,
) -> int:
    """Write one part of a generalized table (each group's MBR,
    docs/reference/release-format.md): `groups` (boxes, size) and `st`; group ids are
    `first` + the local group. Returns the groups. With `fake` (a store version's
    counterfeits, kernels/dynamic.py): boxes and `size` count the real rows only, `st`
    every row, and `groups` gets each group's `counterfeits` (m-invariance's count)."""
    gid = first + group.astype(np.int64)
    name = part_file(part)
    attrs = list(codes.columns)
    real = slice(None) if fake is None else ~fake
    frame = codes.assign(**{GROUP: gid})[real]
    agg = frame.groupby(GROUP, sort=True)
    box = (
        pd.concat(
            [agg[a].agg(["min", "max"]).set_axis([f"{a}_min", f"{a}_max"], axis=1) for a in attrs],
            axis=1,
        )
        if attrs
        else pd.DataFrame(index=agg.size().index)
    )
    groups = box.assign(**{SIZE: agg.size().astype(np.int64)})
    if fake is not None:
        cf = np.bincount(gid[fake] - first, minlength=int(group.max(initial=-1)) + 1)
        groups = groups.assign(**{COUNTERFEITS: cf[groups.index.to_numpy() - first]})
    groups = groups.reset_index()
    names = {f"{a}_{e}": dictionaries[a] for a in attrs for e in ("min", "max")}
    write_decoded(groups, names, part_location(stage, table, "groups"), name)
    st = (
        pd.DataFrame({GROUP: gid, sensitive: s})
        .groupby([GROUP, sensitive], sort=True)
        .size()
        .rename(COUNT)
        .reset_index()
    )
    write_decoded(st, {sensitive: dictionaries[sensitive]}, part_location(stage, table, "st"), name)
    return len(groups)


def subtables(
    codes: pd.DataFrame,
    s: np.ndarray,
    m: int,
    extents,
    seed: int,
    tries: int,
    blocks: int,
    how: str,
):
    """The partitioning step's m-eligible sub-tables (docs/benchmarks/marginals.md: why 002's error is not reproduced):
    `mondrian` (the default) cuts at the QI boundary nearest the middle of the widest
    attribute, only where both sides are m-eligible however the values lie
    (kernels/mondrian.blind_mondrian: the cuts tell nothing of where values lie);
    `ncp` is 002 Figure 1's NCP-greedy splits (seeded by extreme tuples, `tries`
    shuffles) under the same acceptance rule; `ncp+mondrian` continues 002's sub-tables with Mondrian cuts
    (the stopping-rule experiment); `none` keeps the chunk whole (statdb's buckets)."""
    if how == "none":
        return np.zeros(len(s), dtype=np.int64)
    start = None if how == "mondrian" else partition(codes, s, m, extents, seed, tries, blocks)
    return start if how == "ncp" else blind_mondrian(codes, extents, s, m, start=start)


def bucketize_chunk(
    frame: pd.DataFrame,
    qi,
    sensitive: str,
    m: int,
    extents,
    seed: int,
    part: int,
    tries: int,
    blocks: int,
    partitioning: str = "mondrian",
    assign: str = "random",
):
    """One chunk's rows in canonical order, their sub-tables and buckets (seeded by part);
    `assign`: `random` (002's dealing) or `local-unsafe` (along `mondrian.qi_order`)."""
    canon = canonical(frame[[*qi, sensitive]])
    codes, s, seed = (
        canon[list(qi)],
        canon[sensitive].to_numpy(dtype=np.int64),
        partition_seed(seed, 0, part),
    )
    sub = subtables(codes, s, m, extents, seed, tries, blocks, partitioning)
    local = qi_order(codes, extents, m, sub) if assign == UNSAFE_ASSIGN else None
    return (canon, *bucketize(codes, s, m, extents, seed, sub=sub, local=local))


def plan_marginal_chunks(
    shard_counts_of, sizes: Mapping[str, int], qi, sensitive: str, m: int, chunk_rows: int
):
    """(sharding, shard counts, plan): QI-local m-eligible chunks of >= chunk_rows rows.
    `shard_counts_of(sharding)` is the engine's count of the rows per shard and value."""
    order = tuple(
        sorted(qi, key=lambda a: (-sizes[a], a))
    )  # the finest attribute first: finer cuts
    sharding = QiShards(order, tuple(sizes[a] for a in order))
    counts = combine_counts(shard_counts_of(sharding), [sensitive], sizes)
    return sharding, counts, plan_chunks(counts, m, chunk_rows)


@dataclass(frozen=True)
class Marginal:
    name: str
    attributes: tuple[str, ...]  # the QI attributes; the sensitive attribute is added


@dataclass(frozen=True)
class MarginalsJob:
    """What a chunk's task needs (small; shipped to the workers)."""

    stage: str
    store: str
    release_id: str
    qi: tuple[str, ...]
    sensitive: str
    m: int
    seed: int
    tries: int
    blocks: int
    marginals: tuple[Marginal, ...]
    first_id: tuple[int, ...]
    dictionaries: Mapping[str, Dictionary]
    sharding: QiShards
    partitioning: str = "mondrian"
    assign: str = "random"

    summary_schema = summary_schema(SUMMARY_COLUMNS)

    @classmethod
    def store_only(
        cls,
        store: str,
        qi: tuple[str, ...],
        sensitive: str,
        m: int,
        seed: int,
        blocks: int,
        first_id: tuple[int, ...],
        loaded: LoadedTable,
        sharding: QiShards,
        assign: str = "random",
    ) -> MarginalsJob:
        """The job that only bucketizes into the store (vpub statdb build): no release,
        no marginal, the chunk's rows as they come (no partitioning into groups)."""
        return cls(
            "",
            store,
            "",
            qi,
            sensitive,
            m,
            seed,
            0,
            blocks,
            (),
            first_id,
            dict(loaded.dictionaries),
            sharding,
            "none",
            assign,
        )

    def shards(self, frame: pd.DataFrame) -> np.ndarray:
        return self.sharding.of(frame)

    def run(self, frame: pd.DataFrame, part: int, task: int = -1) -> pd.DataFrame:
        extents = {a: self.dictionaries[a].size - 1 for a in self.qi}
        canon, sub, bucket = bucketize_chunk(
            frame,
            self.qi,
            self.sensitive,
            self.m,
            extents,
            self.seed,
            part,
            self.tries,
            self.blocks,
            self.partitioning,
            self.assign,
        )
        codes, s = canon[list(self.qi)], canon[self.sensitive].to_numpy(dtype=np.int64)
        first = self.first_id[part]
        rows = first + np.arange(len(canon), dtype=np.int64)
        store = canon.assign(**{ROW: rows, SUB: first + sub, BUCKET: first + bucket})
        write_decoded(store, {}, store_location(self.store, BUCKETS), part_file(part))
        out = []
        for mg in self.marginals:
            own = codes[list(mg.attributes)]
            g = decompose(own, s, bucket, extents)
            n = write_marginal(
                self.stage,
                group_dir(self.store, self.release_id, mg.name),
                mg.name,
                own,
                self.sensitive,
                s,
                g,
                first,
                rows,
                self.dictionaries,
                part,
            )
            out.append(
                {
                    "table": mg.name,
                    "part": part,
                    "rows": len(canon),
                    "groups": n,
                    "buckets": int(bucket.max()) + 1,
                    "subtables": int(sub.max()) + 1,
                    "task": task,
                }
            )
        return summary_frame(out, SUMMARY_COLUMNS)


def marginals_of(schemas, qi, sensitive: str) -> tuple[Marginal, ...]:
    out = []
    for attrs in schemas:
        attrs = tuple(a for a in attrs if a != sensitive)
        unknown = [a for a in attrs if a not in qi]
        if unknown or not attrs:
            raise SpecError(
                f"marginal {list(attrs)}: {', '.join(unknown) or 'no QI attribute'} not among the QI attributes {', '.join(qi)}"
            )
        out.append(Marginal(marginal_name(attrs, sensitive), attrs))
    if len({m.name for m in out}) != len(out):
        raise SpecError("the same marginal is listed twice")
    return tuple(out)


GNF_NOTE = {
    "ok": None,
    "note": "m-invariance (002 Theorems 3-4): checked as identical signatures, not as GNF",
}


def marginal_rules(marginals, sensitive: str) -> tuple[Rule, ...]:
    """Each marginal enforces `its QI attributes -> sensitive`."""
    return tuple(Rule(frozenset(mg.attributes), sensitive) for mg in marginals)


def marginal_entry(
    stage: Path,
    mg: Marginal,
    sensitive: str,
    index: int,
    rows: int,
    groups: int,
    dictionaries: Mapping[str, Dictionary],
    counterfeits: bool = False,
) -> dict:
    """A generalized table's entry; `domains` lists each QI attribute's labels in order
    (a box's share of a query range counts domain points: readers need the ruler);
    `counterfeits`: its groups part has the column (a store version's marginal)."""
    extra = {COUNTERFEITS: True} if counterfeits else {}
    return table_entry(
        stage,
        name=mg.name,
        kind="generalized",
        parts=("groups", "st"),
        attributes=[*mg.attributes, sensitive],
        sensitive=sensitive,
        enforces=[index],
        rows=rows,
        groups=groups,
        domains={a: list(dictionaries[a].labels) for a in mg.attributes},
        **extra,
    )


@dataclass(frozen=True)
class Chosen:
    """The design's extra for the later steps: the QI the buckets are made on and the
    marginals to publish."""

    qi: tuple[str, ...]
    marginals: tuple[Marginal, ...]


def qi_of(cfg, names) -> tuple[str, ...]:
    """The QI attributes the buckets are made on (the sensitive attribute must exist)."""
    s = cfg.marginals
    if s.sensitive not in names:
        raise SpecError(
            f"marginals.sensitive {s.sensitive!r} is not an attribute; the table has {', '.join(names)}"
        )
    # default: the schemas' attributes; listing the sensitive one in a schema is allowed
    # (it is added to every marginal anyway), so it is never a default QI attribute
    qi = tuple(
        s.qi or [a for a in names if a != s.sensitive and any(a in attrs for attrs in s.schemas)]
    )
    unknown = [a for a in qi if a not in names or a == s.sensitive]
    if unknown:
        others = ", ".join(a for a in names if a != s.sensitive)
        raise SpecError(
            f"marginals.qi: {', '.join(unknown)} not a QI attribute of the table ({others})"
        )
    return qi


@dataclass(frozen=True)
class MarginalsMethod:
    """`marginals`: 002's m-invariant marginals with a private bucket store."""

    name: str = "marginals"
    privacy_model: str = "m-invariance"
    needs_rules: bool = False
    section: str | None = "marginals"
    generalizes: bool = True
    anonymizers: tuple[str, ...] = ("anatomy",)
    suppresses: bool = False
    also_models: bool = True
    design_step: str = "check the marginals"
    plan_step: str = "plan chunks"
    run_step: str = "bucketize, decompose and write"

    def design(self, cfg, engine, loaded) -> Design:
        s, names = cfg.marginals, loaded.names
        if s is None:
            raise SpecError(
                "method marginals needs a `marginals:` section with sensitive, schemas and state"
            )
        qi = qi_of(cfg, names)
        check_key(s.key, qi, s.sensitive)
        if s.key and (is_remote(s.state) or is_remote(cfg.input_path)):
            raise SpecError(
                "marginals.key: an updatable store and the input it reads identifiers from must be local (the update runs in this process)"
            )
        if not s.schemas:
            raise SpecError(
                "marginals.schemas lists no marginal to publish (for a store alone: vpub statdb build)"
            )
        marginals = marginals_of(s.schemas, qi, s.sensitive)
        labels, counts = loaded.frequencies()[s.sensitive]
        check_m_eligible_counts(labels, counts, int(cfg.privacy.m or 0), s.sensitive)
        tables = tuple(
            PublishedTable(
                mg.name, (*mg.attributes, s.sensitive), s.sensitive, (i,), generalized=True
            )
            for i, mg in enumerate(marginals)
        )
        rules = marginal_rules(marginals, s.sensitive)
        return Design(
            rules, tables, GNF_NOTE, store_id=new_store_id(), detail=Chosen(qi, marginals)
        )

    def plan(self, cfg, engine, loaded, design) -> Plan:
        s, qi = cfg.marginals, design.detail.qi
        sharding, counts, plan = plan_marginal_chunks(
            lambda sh: engine.shard_counts(loaded, [s.sensitive], sh),
            sizes_of(loaded),
            qi,
            s.sensitive,
            cfg.privacy.m,
            s.chunk_rows,
        )
        return Plan(counts, plan, sharding)

    def job(self, cfg, loaded, design, plan, stage, store) -> MarginalsJob:
        s, chosen = cfg.marginals, design.detail
        first = tuple(int(x) for x in plan.partitions.first_group)
        return MarginalsJob(
            str(stage),
            str(store),
            cfg.release_id,
            chosen.qi,
            s.sensitive,
            cfg.privacy.m,
            cfg.secret_seed,
            s.tries,
            s.blocks,
            chosen.marginals,
            first,
            dict(loaded.dictionaries),
            plan.detail,
            s.partitioning,
            s.assign,
        )

    def table_entries(self, stage, design, loaded, summary) -> list[dict]:
        s = design.tables[0].sensitive
        return [
            marginal_entry(
                stage,
                mg,
                s,
                i,
                loaded.rows,
                int(summary.loc[summary["table"] == mg.name, "groups"].sum()),
                loaded.dictionaries,
            )
            for i, mg in enumerate(design.detail.marginals)
        ]

    def cost(self, cfg, design, plan, summary) -> dict:
        s, one = cfg.marginals, summary.drop_duplicates("part")
        return {
            "chunks": plan.partitions.parts,
            "chunk_rows": s.chunk_rows,
            "subtables": int(one["subtables"].sum()),
            "buckets": int(one["buckets"].sum()),
            "partitioning": s.partitioning,
            "assign": s.assign,
            "tries": s.tries,
            "blocks": s.blocks,
        }

    def store(self, cfg) -> str | Path:
        """The private store (local, or an `s3://` URI): never inside the output, never an
        existing store."""
        state = cfg.marginals.state
        check_store_location(state, cfg.output_path)
        return state if is_remote(state) else Path(state)

    def record(self, cfg, design, loaded, store, manifest, target) -> None:
        """store.json: what later `marginals add` and the private audit need: the served
        domains only (QI and sensitive: marginals are made of them), every file's
        SHA-256, signed with the release's `sign_key`."""
        s, chosen = cfg.marginals, design.detail
        domains = {a: list(loaded.dictionaries[a].labels) for a in [*chosen.qi, s.sensitive]}
        seen = None
        if s.key:  # an updatable store: its record identifiers (release/stores/record_keys.py)
            fmt, path = cfg.input_format, cfg.input_path
            seen = keys_from_source(store, path, loaded.spec, fmt, s.key, domains, cfg.secret_seed)
        published = [
            {
                "release_id": manifest["release_id"],
                "release": release_location(target),
                "table": mg.name,
                "attributes": list(mg.attributes),
            }
            for mg in chosen.marginals
        ]
        meta = {
            "format": STORE_FORMAT,
            "store_id": design.store_id,
            "m": cfg.privacy.m,
            "seed": cfg.secret_seed,
            "qi": list(chosen.qi),
            "sensitive": s.sensitive,
            "domains": domains,
            "source": manifest["source"],
            "published": published,
            "files": file_digests(store),
        }
        if s.key:
            first = first_version(design.store_id, loaded.rows, str(seen))
            meta |= {"key": s.key, "versions": [first]}
        write_store(store, meta, cfg.sign_key)
        restrict(store)
