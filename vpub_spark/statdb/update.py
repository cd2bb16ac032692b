"""`vpub statdb update STORE --input SNAPSHOT` (or `--upserts U --deletes D`): the store's
next version, m-invariant with every earlier one (kernels/dynamic.py; layout in
release/stores/versions.py).

How records are matched, where the randomness comes from and what a failure leaves:
docs/how-to/update-a-store.md.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError, SpecError, VpubError
from ..kernels.dynamic import republish
from ..kernels.hashing import KEY_COLUMNS, content_hash
from ..kernels.partitioning import partition_seed
from ..lake.commit import Steps, exclusive, staged_directory
from ..release.stores.integrity import verified_for_update
from ..release.stores.record_keys import (
    changes_fingerprint,
    coded_snapshot,
    read_identifiers,
    read_keys,
    with_keys,
)
from ..release.stores.store import BUCKET, ROW, SUB, file_digests, restrict, write_store
from ..release.stores.versions import (
    COUNT,
    VALUE,
    VERSIONS,
    latest,
    read_version,
    require_key,
    version_dir,
    version_entry,
    versions_of,
    write_version,
)
from ..tablespec import table_spec_from_dict


@dataclass(frozen=True)
class Updated:
    """What an update made: the new version's number, its rows and changes."""

    version: int
    rows: int
    inserted: int
    deleted: int
    counterfeits: int
    timings: dict[str, float]
    unchanged: bool = False  # the snapshot is the latest version's: nothing was written


@dataclass(frozen=True)
class Changes:
    """What an update reads: the whole table as it is now (`snapshot`), or only what
    changed (`upserts`: records added or changed, in the table's layout; `deletes`:
    identifiers of records removed, a table with the identifier column)."""

    snapshot: str | None = None
    upserts: str | None = None
    deletes: str | None = None
    fmt: str | None = None

    def __post_init__(self) -> None:
        delta = self.upserts is not None or self.deletes is not None
        if (self.snapshot is None) == (not delta):
            raise SpecError(
                "give the new snapshot (--input), or the changes (--upserts and/or --deletes), not both"
            )


def update_store(
    state: str | Path,
    changes: Changes | str,
    sign_key: str | None = None,
    wait_s: float | None = None,
    observer: Callable[[str], AbstractContextManager[object]] | None = None,
    fill: str = "counterfeits",
) -> Updated:
    """Write the store's next version, m-invariant with every earlier one (see
    docs/how-to/update-a-store.md).

    Args:
        state: the private store.
        changes: a new snapshot's path, or the change set (`Changes`).
        sign_key: an Ed25519 private key that signs the new version.
        wait_s: wait this long for a concurrent update of the store.
        observer: told each step as it starts and ends.
        fill: `counterfeits` (the default), or `inserts`, m-invariance's own balancing,
            kept for `vpub bench update`'s comparison only: an adversary who knows it
            learns more than 1/m (kernels/dynamic.py).

    Returns:
        The new version's number and counts."""
    state, step = Path(state), Steps(observer)
    changes = Changes(changes) if isinstance(changes, str) else changes
    with exclusive(state, wait_s):
        with step("check the store"):
            meta, base = verified_for_update(state, sign_key, semantic=False)
            key, n = require_key(meta, state.name), latest(meta)
            base = with_keys(base, read_keys(state))
        with step("read the store"):
            current = read_version(state, meta, base, n)
        with step("read the changes"):
            snap, ups, dels = _read_changes(meta, changes, key)
            frames = (snap, ups, dels)
            seen = changes_fingerprint(int(meta["seed"]), *(f for f in frames if f is not None))
        if versions_of(meta)[-1].get("fingerprint") == seen:  # a rerun: nothing to do
            e = versions_of(meta)[-1]
            return Updated(n, int(e["rows"]), 0, 0, int(e["counterfeits"]), {}, unchanged=True)
        with step("match records"):
            columns = [*meta["qi"], meta["sensitive"]]
            if snap is not None:
                gone, at = match_records(current.real, snap, columns)
                fresh = snap.iloc[at]
            else:
                gone, fresh = match_changes(current.real, ups, dels, columns)
        with step("republish"):
            added, fake, next_ids = _republish(meta, base, current, fresh, gone, n + 1, fill)
        with step("write the version"):
            _commit(state, meta, gone, added, fake, seen, next_ids, sign_key)
    rows = len(current.real) - len(gone) + len(added)
    total = int(fake[COUNT].sum())
    return Updated(n + 1, rows, len(added), len(gone), total, dict(step.timings))


def _read_changes(
    meta: dict, changes: Changes, key: str
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """(the snapshot, the upserts' frame, the deletes' frame): codes and identifier
    hashes, each None when not given."""
    fmt, seed = changes.fmt, int(meta["seed"])
    snap = None if changes.snapshot is None else read_snapshot(meta, changes.snapshot, fmt, key)
    ups = None if changes.upserts is None else read_snapshot(meta, changes.upserts, fmt, key)
    dels = None if changes.deletes is None else read_identifiers(changes.deletes, fmt, key, seed)
    return snap, ups, dels


def match_changes(
    current: pd.DataFrame, upserts: pd.DataFrame | None, deletes: pd.DataFrame | None, columns
) -> tuple[np.ndarray, pd.DataFrame]:
    """(the `row`s of `current` to delete, the tuples to insert) from a change set: an
    upserted record new to the store is inserted, one whose values changed is deleted and
    inserted, one unchanged is left; a deleted identifier must be in the store. Only the
    changed identifiers go into a hash table (each of the store's looks itself up)."""
    gone = np.zeros(len(current), dtype=bool)
    fresh = current.iloc[:0][[*columns, *KEY_COLUMNS]]  # no insert without upserts
    if deletes is not None:
        where = _lookup(current, deletes)
        if (where < 0).any():
            raise DataError(f"{int((where < 0).sum())} identifiers to delete are not in the store")
        gone[where] = True
    if upserts is not None:
        where = _lookup(current, upserts)
        if gone[where[where >= 0]].any():
            raise DataError(
                "an identifier is both deleted and upserted; give one change per record"
            )
        found = where >= 0
        same = np.zeros(len(upserts), dtype=bool)
        h = content_hash(upserts[columns], 0)
        same[found] = content_hash(current.iloc[where[found]][columns], 0) == h[found]
        gone[where[found & ~same]] = True
        fresh = upserts[~same].reset_index(drop=True)
    return current[ROW].to_numpy()[gone], fresh


def _lookup(current: pd.DataFrame, wanted: pd.DataFrame) -> np.ndarray:
    """Per wanted identifier hash, its position in `current` (-1: absent): each of the
    store's looked up in a hash table of the few wanted ones (6M against 60k: 0.08 s; a
    binary search of them, 0.7 s); the second hash must agree where the first does."""
    k0, w0 = (f[KEY_COLUMNS[0]].to_numpy(np.uint64) for f in (current, wanted))
    index = pd.Index(w0).get_indexer(k0)
    hit = index >= 0
    out = np.full(len(w0), -1, dtype=np.int64)
    out[index[hit]] = np.flatnonzero(hit)
    found = out >= 0
    k1, w1 = (f[KEY_COLUMNS[1]].to_numpy(np.uint64) for f in (current, wanted))
    if (k1[out[found]] != w1[found]).any():
        raise VpubError("two record identifiers share a 64-bit keyed hash; build a new store")
    return out


def read_snapshot(meta: dict, path: str, fmt: str | None, key: str) -> pd.DataFrame:
    """The snapshot's tuples in the store's codes, with their keyed identifier hash
    (release/stores/record_keys.py), read with the store's table spec."""
    spec = table_spec_from_dict(meta["source"]["table_spec"])
    served = [*meta["qi"], meta["sensitive"]]
    domains = {a: meta["domains"][a] for a in served}
    return coded_snapshot(path, spec, fmt, key, domains, int(meta["seed"]))


def match_records(
    current: pd.DataFrame, snap: pd.DataFrame, columns: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(the `row`s of `current` to delete, the positions in `snap` to insert): records
    matched by keyed hash (a hash table of the store's first hashes: 6M against 6M in
    1.1 s, against 2.2 s for sorting both); same values (equal 64-bit row hashes of
    their codes) survive, changed ones are deleted and inserted."""
    k0, k1 = (current[c].to_numpy(np.uint64) for c in KEY_COLUMNS)
    s0, s1 = (snap[c].to_numpy(np.uint64) for c in KEY_COLUMNS)
    at = pd.Index(k0).get_indexer(s0)
    found = at >= 0
    if (k1[at[found]] != s1[found]).any():
        raise VpubError("two record identifiers share a 64-bit keyed hash; build a new store")
    same = found.copy()
    same[found] = (
        content_hash(current[columns], 0)[at[found]] == content_hash(snap[columns], 0)[found]
    )
    kept = np.zeros(len(current), dtype=bool)
    kept[at[same]] = True
    return current[ROW].to_numpy()[~kept], np.flatnonzero(~same)


def _republish(meta, base, current, fresh: pd.DataFrame, gone, n: int, fill: str):
    """The kernel on the current version: (the added rows, the counterfeit cells)."""
    s, qi = meta["sensitive"], list(meta["qi"])
    rows, old_b, old_v = current.arrays(s)  # counterfeits last, rows < 0
    mark = np.zeros(int(rows.max(initial=0)) + 1, dtype=bool)  # row ids are dense: no sort
    mark[gone] = True
    kept = (rows >= 0) & ~mark[np.maximum(rows, 0)]
    next_row, next_bucket = _next_ids(meta, base)
    extents = {a: len(meta["domains"][a]) - 1 for a in qi}
    r = republish(
        old_b,
        old_v,
        kept,
        fresh[s].to_numpy(),
        fresh[qi].reset_index(drop=True),
        int(meta["m"]),
        extents,
        partition_seed(int(meta["seed"]), n, 0),
        next_bucket,
        len(meta["domains"][s]),
        fill=fill,
    )
    added = fresh.assign(
        **{ROW: next_row + np.arange(len(fresh)), SUB: -1, BUCKET: r.bucket}
    ).reset_index(drop=True)
    added = added[list(base.columns)].astype(base.dtypes.to_dict())
    fake = pd.DataFrame(
        {BUCKET: r.counterfeit_bucket, VALUE: r.counterfeit_value, COUNT: r.counterfeit_count}
    )
    used = max(int(r.bucket.max(initial=-1)), int(r.counterfeit_bucket.max(initial=-1))) + 1
    return added, fake, (next_row + len(fresh), max(next_bucket, used))


def _next_ids(meta: dict, base: pd.DataFrame) -> tuple[int, int]:
    """The first row and bucket ids never used by any version."""
    last = versions_of(meta)[-1]
    if "next_row" in last:
        return int(last["next_row"]), int(last["next_bucket"])
    return int(base[ROW].max()) + 1, int(base[BUCKET].max()) + 1


def _commit(state: Path, meta: dict, gone, added, fake, seen: str, next_ids, sign_key) -> None:
    """The version directory (staged, renamed into place), then store.json."""
    n = latest(meta) + 1
    target = version_dir(state, n)
    if target.exists():  # what an interrupted update left: never listed, never read
        shutil.rmtree(target)
    with staged_directory(target, private=True) as stage:
        write_version(stage, gone, added, fake)
    rows = int(versions_of(meta)[-1].get("rows", meta["source"]["rows"]))
    entry = version_entry(
        n,
        rows - len(gone) + len(added),
        len(added),
        len(gone),
        int(fake[COUNT].sum()),
        seen,
    )
    entry |= {"next_row": next_ids[0], "next_bucket": next_ids[1]}
    meta["versions"] = [*versions_of(meta), entry]
    meta["files"] = dict(meta["files"]) | file_digests(state, VERSIONS, str(n))
    write_store(state, meta, sign_key)
    restrict(state)
