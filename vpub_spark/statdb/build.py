"""`vpub statdb build`: the statistical database's store (004 §5) without publishing.

The first m-unique partition of the table and its bucketization U (004 Definition 11,
Lemma 5), made exactly as the marginal publisher makes them (publishing/marginals.py: the
same QI-local chunks from one counting pass, one task per chunk on Spark, the same
kernel) and kept in the same private store format (release/stores/store.py: the served
domains only, every file's SHA-256, signed with the config's `output.sign_key` if it
names one), with no marginal published yet: `vpub marginals add` can publish
marginals from it later, and every query answer and every marginal stays jointly
m-invariant (004 Lemma 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ..config import PublishConfig
from ..datasets.presets import resolve_table
from ..engines.base import Engine, LoadedTable
from ..errors import SpecError
from ..kernels.arrays import distinct
from ..kernels.minvariance import check_m_eligible_counts
from ..kernels.partitioning import fingerprint
from ..lake.commit import Steps, staged_directory
from ..publishing.marginals import MarginalsJob, plan_marginal_chunks, qi_of
from ..publishing.method import Plan, covered, sizes_of, source_entry, with_secret_seed
from ..release.stores.record_keys import check_key, keys_from_source
from ..release.stores.store import (
    BUCKET,
    STORE_FILE,
    STORE_FORMAT,
    bucket_files,
    check_store_location,
    file_digests,
    new_store_id,
    read_store,
    restrict,
    write_store,
)
from ..release.stores.versions import first_version
from ..storage import is_remote


@dataclass(frozen=True)
class Built:
    state: Path
    rows: int
    buckets: int
    chunks: int
    timings: dict[str, float]
    reused: bool = False


def reuse_store(state: str | Path) -> Built:
    """An existing store (the marginal publisher's or ours) as it is: opened, so checked
    owner-only and intact, never rebuilt; every answer from it stays m-invariant with
    every marginal published from it (004 Lemma 4)."""
    from .db import StatDB

    db = StatDB.open(state)
    return Built(Path(state), db.rows, len(db.cells.k), 0, {}, reused=True)


def build_store(cfg: PublishConfig, engine: Engine, observer=None) -> Built:
    """Bucketize the config's input into the private store `marginals.state`, or reuse
    the store already there (`reuse_store`)."""
    state, m = _settings(cfg)
    step = Steps(observer)
    cfg = with_secret_seed(cfg)  # kept in the private store only (release/secret.py)
    if (state / STORE_FILE).exists():
        _check_same_settings(cfg, read_store(state), m)
        return reuse_store(state)
    check_store_location(state, Path(cfg.output_path))
    path, spec = resolve_table(cfg.input_path, cfg.table)
    with staged_directory(state, private=True, wait_s=cfg.wait_s) as store:
        with step("read and encode"):
            loaded = engine.persist(engine.load(path, spec, cfg.input_format))
        try:
            qi, counts, chunks = _bucketize(cfg, engine, loaded, store, m, step)
            seen = None
            if cfg.marginals and cfg.marginals.key:
                with step("hash the record identifiers"):
                    seen = _keys(cfg, path, spec, loaded, store, qi)
            _write_meta(cfg, loaded, store, m, qi, counts, seen)
            ids = [
                pq.read_table(f, columns=[BUCKET])[BUCKET].to_numpy() for f in bucket_files(store)
            ]
            buckets = sum(len(distinct(i)) for i in ids)
        finally:
            engine.unpersist(loaded)
    return Built(state, loaded.rows, buckets, chunks.parts, dict(step.timings))


def _settings(cfg: PublishConfig) -> tuple[Path, int]:
    """The store's local directory and m, or a one-line error naming what is missing."""
    s = cfg.marginals
    if s is None or cfg.privacy.model != "m-invariance":
        raise SpecError(
            "vpub statdb build needs privacy {model: m-invariance, m} and a `marginals:` section (sensitive, qi, state)"
        )
    if is_remote(s.state):
        raise SpecError(
            f"a statistical database's store is opened from local disk by every query (vpub serve, statdb batch); marginals.state must be a local directory, not {s.state}"
        )
    return Path(s.state), int(cfg.privacy.m or 0)


def _check_same_settings(cfg: PublishConfig, meta: dict, m: int) -> None:
    """An existing store is reused only with the settings it was built with."""
    s = cfg.marginals
    assert s is not None
    if (meta["m"], meta["sensitive"]) != (m, s.sensitive) or not set(s.qi or ()) <= set(meta["qi"]):
        raise SpecError(
            f"{Path(s.state).name} exists with m = {meta['m']}, sensitive {meta['sensitive']}, qi {', '.join(meta['qi'])}; the config asks m = {m}, sensitive {s.sensitive}, qi {', '.join(s.qi or ())}: reuse it with those settings or choose another marginals.state"
        )


def _bucketize(
    cfg: PublishConfig, engine: Engine, loaded: LoadedTable, store: Path, m: int, step: Steps
):
    """The marginal publisher's chunks from one counting pass, each bucketized by one
    task into the store (no marginal written); the QI attributes, counts and chunks."""
    s = cfg.marginals
    assert s is not None
    qi = qi_of(cfg, loaded.names)
    if not qi:
        raise SpecError(
            "vpub statdb build needs marginals.qi: the QI attributes queries may constrain"
        )
    check_m_eligible_counts(*loaded.frequencies()[s.sensitive], m, s.sensitive)
    check_key(s.key, qi, s.sensitive)
    with step("plan chunks"):
        sharding, counts, chunks = plan_marginal_chunks(
            lambda sh: engine.shard_counts(loaded, [s.sensitive], sh),
            sizes_of(loaded),
            qi,
            s.sensitive,
            m,
            s.chunk_rows,
        )
        covered(Plan(counts, chunks), loaded)
    first = tuple(int(x) for x in chunks.first_group)
    job = MarginalsJob.store_only(
        str(store), qi, s.sensitive, m, cfg.secret_seed, s.blocks, first, loaded, sharding, s.assign
    )
    with step("bucketize"):
        engine.run_partitions(loaded, chunks, job)
    return qi, counts, chunks


def _keys(cfg: PublishConfig, path: str, spec, loaded: LoadedTable, store: Path, qi) -> str:
    """The record identifiers of the store's tuples (release/stores/record_keys.py); the source's
    fingerprint."""
    s = cfg.marginals
    assert s is not None and s.key is not None
    domains = {a: list(loaded.dictionaries[a].labels) for a in [*qi, s.sensitive]}
    return keys_from_source(store, path, spec, cfg.input_format, s.key, domains, cfg.secret_seed)


def _write_meta(
    cfg: PublishConfig,
    loaded: LoadedTable,
    store: Path,
    m: int,
    qi: tuple[str, ...],
    counts,
    seen: str | None = None,
) -> None:
    """store.json (with every file's digest; signed if the config names a key), then
    the store made owner-only."""
    s = cfg.marginals
    assert s is not None
    labels = {a: loaded.dictionaries[a].labels for a in loaded.names}
    store_id = new_store_id()
    meta = {
        "format": STORE_FORMAT,
        "store_id": store_id,
        "m": m,
        "assign": s.assign,
        "seed": cfg.secret_seed,
        "qi": list(qi),
        "sensitive": s.sensitive,
        "domains": {a: list(labels[a]) for a in [*qi, s.sensitive]},
        "source": source_entry(cfg, loaded, fingerprint(counts, labels)),
        "published": [],
        "files": file_digests(store),
    }
    if s.key:  # an updatable store: version 1 (release/stores/versions.py)
        meta["key"] = s.key
        meta["versions"] = [first_version(store_id, loaded.rows, str(seen))]
    write_store(store, meta, cfg.sign_key)
    restrict(store)
