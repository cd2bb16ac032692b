"""The m-invariant marginal publisher (002) in the release format (DESIGN.md §4, §9).

`vpub publish` with `method: marginals`:
1. QI-local chunks (kernels/partitioning.QiShards, the finest attribute first) of at
   least `chunk_rows` rows, each m-eligible (`plan_chunks` from one Spark aggregate):
   these are the first cuts of 002 Figure 1, made from aggregates;
2. per chunk, in its own task (applyInPandas): the rows in a canonical order, 002
   Figure 1's recursion inside the chunk, the assigning step and the leftovers
   (kernels/minvariance.bucketize), then each marginal decomposed from the buckets
   (002 §3); the task writes the marginals' `groups`/`st` parts and its part of the
   private store (buckets and tuple-to-group links);
3. the staged release is audited (every group m-unique, sizes agree), the store is
   committed, then the release.
`vpub marginals add` decomposes the stored buckets for new attributes and publishes
them as a new release: every marginal from one store keeps each tuple's signature
(004 Lemma 4), which `vpub audit --state` re-checks from the files.

Layout of a `generalized` table (one per marginal, named by its attributes, e.g.
`age-gender-occupation`): `groups` has `group_id`, `<A>_min`, `<A>_max` (labels) for
each QI attribute A and `size`; `st` has `group_id`, the sensitive attribute, `count`.
Decision: the manifest's table entry lists each QI attribute's domain (`domains`,
labels in order): a box's share of a query range counts domain points, so readers need
the ruler the boxes were cut on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from .. import __version__
from ..encoding import Dictionary
from ..errors import PrivacyError, SpecError
from ..kernels.minvariance import bucketize, check_m_eligible_counts, decompose
from ..kernels.partitioning import (
    QiShards,
    combine_counts,
    fingerprint,
    partition_seed,
    plan_chunks,
)
from ..model import Rule
from ..staging import staged_directory
from ..state import (
    BUCKET,
    BUCKETS,
    ROW,
    STORE_FORMAT,
    SUB,
    bucket_files,
    check_store_location,
    group_dir,
    new_store_id,
    read_store,
    restrict,
    write_store,
)
from .parts import arrow_schema, table_dir, write_parquet
from .reader import COUNT, FORMAT_VERSION, GROUP

SIZE = "size"
SUMMARY_COLUMNS = {
    "table": "string",
    "part": "int32",
    "rows": "int64",
    "groups": "int64",
    "buckets": "int64",
    "subtables": "int64",
    "task": "int32",
}
SUMMARY_SCHEMA = arrow_schema(SUMMARY_COLUMNS)


def marginal_name(attributes, sensitive: str) -> str:
    return "-".join([*attributes, sensitive])


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows in an order that depends on their content only (ties in the kernels go
    to lower rows, so a retried task, which may see its rows in another order, repeats
    every choice)."""
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


def write_marginal(stage: str | Path, groups_dir: Path, table: str, codes: pd.DataFrame, sensitive: str, s: np.ndarray,
                   group: np.ndarray, first: int, rows: np.ndarray, dictionaries: Mapping[str, Dictionary], part: int) -> int:  # fmt: skip
    """Write one part of one marginal: `groups` (boxes, size) and `st` in the release,
    the tuple-to-group links in the store. Group ids are `first` + the local group."""
    gid = first + group.astype(np.int64)
    name = f"part-{part:05d}.parquet"
    attrs = list(codes.columns)
    frame = codes.assign(**{GROUP: gid})
    agg = frame.groupby(GROUP, sort=True)
    box = (
        pd.concat(
            [agg[a].agg(["min", "max"]).set_axis([f"{a}_min", f"{a}_max"], axis=1) for a in attrs],
            axis=1,
        )
        if attrs
        else pd.DataFrame(index=agg.size().index)
    )
    groups = box.assign(**{SIZE: agg.size().astype(np.int64)}).reset_index()
    names = {f"{a}_{e}": dictionaries[a] for a in attrs for e in ("min", "max")}
    write_parquet(groups, names, table_dir(stage, table, "groups"), name)
    st = (
        pd.DataFrame({GROUP: gid, sensitive: s})
        .groupby([GROUP, sensitive], sort=True)
        .size()
        .rename(COUNT)
        .reset_index()
    )
    write_parquet(st, {sensitive: dictionaries[sensitive]}, table_dir(stage, table, "st"), name)
    write_parquet(pd.DataFrame({ROW: rows, GROUP: gid}), {}, groups_dir, name)
    return len(groups)


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
):
    """One chunk's rows in canonical order, their sub-tables and buckets (seeded by part)."""
    canon = canonical(frame[[*qi, sensitive]])
    sub, bucket = bucketize(
        canon[list(qi)],
        canon[sensitive].to_numpy(dtype=np.int64),
        m,
        extents,
        partition_seed(seed, 0, part),
        tries,
        blocks,
    )
    return canon, sub, bucket


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

    summary_schema = SUMMARY_SCHEMA

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
        )
        codes, s = canon[list(self.qi)], canon[self.sensitive].to_numpy(dtype=np.int64)
        first = self.first_id[part]
        rows = first + np.arange(len(canon), dtype=np.int64)
        store = canon.assign(**{ROW: rows, SUB: first + sub, BUCKET: first + bucket})
        write_parquet(store, {}, Path(self.store) / BUCKETS, f"part-{part:05d}.parquet")
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
        return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS)).astype(SUMMARY_COLUMNS)


def _marginals(schemas, qi, sensitive: str) -> tuple[Marginal, ...]:
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


def manifest_for(
    release_id: str,
    seed: int,
    engine: str,
    source: dict,
    m: int,
    tables: list[dict],
    sensitive: str,
    store_id: str,
    config: dict,
    cost: dict,
) -> dict:
    rules = [
        Rule(frozenset(a for a in t["attributes"] if a != sensitive), sensitive) for t in tables
    ]
    return {
        "format_version": FORMAT_VERSION, "release_id": release_id,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "software_version": __version__,
        "seed": seed, "engine": engine, "source": source, "privacy": {"model": "m-invariance", "m": m},
        "rules": [r.as_dict() for r in rules], "rules_dropped": [], "method": "marginals", "method_cost": cost,
        "store": {"store_id": store_id}, "tables": tables,
        "gnf": {"ok": None, "note": "m-invariance (002 Theorems 3-4): checked as identical signatures, not as GNF"},
        "config": config, "audit": None,
    }  # fmt: skip


def table_entry(
    stage: Path,
    mg: Marginal,
    sensitive: str,
    index: int,
    rows: int,
    groups: int,
    dictionaries: Mapping[str, Dictionary],
) -> dict:
    parts = {}
    for part in ("groups", "st"):
        d = table_dir(stage, mg.name, part)
        files = sorted(d.glob("*.parquet"))
        parts[part] = {
            "path": str(d.relative_to(stage)),
            "files": len(files),
            "rows": sum(pq.ParquetFile(f).metadata.num_rows for f in files),
        }
    return {
        "name": mg.name, "kind": "generalized", "attributes": [*mg.attributes, sensitive], "sensitive": sensitive,
        "enforces": [index], "rows": rows, "groups": groups, "parts": parts,
        "domains": {a: list(dictionaries[a].labels) for a in mg.attributes},
    }  # fmt: skip


def publish_marginals(
    cfg, engine, loaded, release_id: str, target: Path, step, source: dict, t_start: float
):
    """`vpub publish` with method marginals (see the module docstring)."""
    from .writer import PublishResult, audit_and_commit

    s, m = cfg.marginals, cfg.privacy.m
    names = loaded.names
    if s.sensitive not in names:
        raise SpecError(
            f"marginals.sensitive {s.sensitive!r} is not an attribute; the table has {', '.join(names)}"
        )
    qi = tuple(s.qi or [a for a in names if any(a in attrs for attrs in s.schemas)])
    unknown = [a for a in qi if a not in names or a == s.sensitive]
    if unknown:
        raise SpecError(
            f"marginals.qi: {', '.join(unknown)} not a QI attribute of the table ({', '.join(a for a in names if a != s.sensitive)})"
        )
    marginals = _marginals(s.schemas, qi, s.sensitive)
    state = Path(s.state)
    check_store_location(state, Path(cfg.output_path))
    labels, counts = loaded.frequencies()[s.sensitive]
    check_m_eligible_counts(labels, counts, m, s.sensitive)
    sizes = {a: loaded.dictionaries[a].size for a in names}
    with step("plan chunks"):
        sharding, shard, plan = plan_marginal_chunks(
            lambda sh: engine.shard_counts(loaded, [s.sensitive], sh),
            sizes,
            qi,
            s.sensitive,
            m,
            s.chunk_rows,
        )
    if shard.total != loaded.rows:
        raise PrivacyError(f"shard counts cover {shard.total} rows, the table has {loaded.rows}")
    source = source | {
        "fingerprint": fingerprint(shard, {a: loaded.dictionaries[a].labels for a in names})
    }
    store_id = new_store_id()
    with (
        staged_directory(target, cfg.overwrite) as stage,
        staged_directory(state, private=True) as store,
    ):
        job = MarginalsJob(str(stage), str(store), release_id, qi, s.sensitive, m, cfg.seed, s.tries, s.blocks, marginals,
                           tuple(int(x) for x in plan.first_group), dict(loaded.dictionaries), sharding)  # fmt: skip
        with step("bucketize, decompose and write"):
            summary = engine.run_partitions(loaded, plan, job)
        one = summary.drop_duplicates("part")
        cost = {
            "chunks": plan.parts,
            "chunk_rows": s.chunk_rows,
            "subtables": int(one["subtables"].sum()),
            "buckets": int(one["buckets"].sum()),
            "tries": s.tries,
            "blocks": s.blocks,
        }
        tables = [
            table_entry(
                stage,
                mg,
                s.sensitive,
                i,
                loaded.rows,
                int(summary.loc[summary["table"] == mg.name, "groups"].sum()),
                loaded.dictionaries,
            )
            for i, mg in enumerate(marginals)
        ]
        manifest = manifest_for(
            release_id,
            cfg.seed,
            engine.name,
            source,
            m,
            tables,
            s.sensitive,
            store_id,
            cfg.effective(),
            cost,
        )
        manifest["partitions"] = plan.parts
        report = audit_and_commit(stage, manifest, step, t_start)
        write_store(store, {
            "format": STORE_FORMAT, "store_id": store_id, "m": m, "seed": cfg.seed, "qi": list(qi), "sensitive": s.sensitive,
            "domains": {a: list(loaded.dictionaries[a].labels) for a in names}, "source": source,
            "published": [{"release_id": release_id, "release": str(target.resolve()), "table": mg.name, "attributes": list(mg.attributes)} for mg in marginals],
        })  # fmt: skip
        restrict(store)
    return PublishResult(target, manifest, report, dict(step.timings), summary)


def add_marginal(
    state: str | Path,
    attributes,
    output: str | Path,
    release_id: str | None = None,
    overwrite: bool = False,
    step=None,
):
    """`vpub marginals add`: decompose the stored buckets for `attributes` and publish
    them as a new release (the same signatures as every earlier marginal of the store)."""
    import time

    from .writer import PublishResult, Steps, audit_and_commit

    step = step or Steps()
    t0 = time.perf_counter()
    state = Path(state)
    meta = read_store(state)
    sensitive, qi = meta["sensitive"], tuple(meta["qi"])
    (mg,) = _marginals([tuple(attributes)], qi, sensitive)
    dictionaries = {a: Dictionary(a, tuple(v)) for a, v in meta["domains"].items()}
    release_id = release_id or f"{mg.name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
    target = Path(output) / release_id
    check_store_location(state, Path(output), new=False)
    extents = {a: dictionaries[a].size - 1 for a in qi}
    groups = 0
    with (
        staged_directory(target, overwrite) as stage,
        staged_directory(group_dir(state, release_id, mg.name), overwrite, private=True) as links,
    ):
        with step("decompose and write"):
            for p, f in enumerate(bucket_files(state)):
                b = pq.read_table(f).to_pandas()
                codes = b[list(mg.attributes)]
                first = int(b[ROW].iloc[0]) if len(b) else 0
                g = decompose(
                    codes,
                    b[sensitive].to_numpy(dtype=np.int64),
                    b[BUCKET].to_numpy(dtype=np.int64) - int(b[BUCKET].min()),
                    extents,
                )
                groups += write_marginal(
                    stage,
                    links,
                    mg.name,
                    codes,
                    sensitive,
                    b[sensitive].to_numpy(),
                    g,
                    first,
                    b[ROW].to_numpy(),
                    dictionaries,
                    p,
                )
        entry = table_entry(
            stage, mg, sensitive, 0, int(meta["source"]["rows"]), groups, dictionaries
        )
        cfg = {
            "state_id": meta["store_id"],
            "attributes": list(mg.attributes),
            "release_id": release_id,
        }
        manifest = manifest_for(
            release_id,
            meta["seed"],
            "inprocess",
            meta["source"],
            meta["m"],
            [entry],
            sensitive,
            meta["store_id"],
            cfg,
            {"added_from_store": True},
        )
        report = audit_and_commit(stage, manifest, step, t0)
    meta = read_store(state)
    meta["published"].append(
        {
            "release_id": release_id,
            "release": str(target.resolve()),
            "table": mg.name,
            "attributes": list(mg.attributes),
        }
    )
    write_store(state, meta)
    restrict(state)
    return PublishResult(target, manifest, report, dict(step.timings), None)
