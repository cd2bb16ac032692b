"""`vpub statdb update STORE --input SNAPSHOT`: the store's next version, m-invariant
with every earlier one (kernels/dynamic.py; layout in release/versions.py).

The snapshot is the whole table as it is now, read with the store's table spec and
encoded in the store's domains (a value outside them is refused: the published domains
are version 1's). Records are matched by their keyed identifier hash: a record in both
with the same QI and sensitive values survives; one whose values changed is, as in
m-invariance, a deletion and an insertion (a different tuple); the rest are deleted or
inserted. The update's randomness is drawn from the store's secret seed and the version
number: the same store and snapshot give the same version. It runs in the calling
process (the kernel is vectorized over every tuple), holds the store's lock, and commits
the version directory before store.json: a failure leaves the current version intact.
A snapshot equal to the one the latest version was made from (by keyed fingerprint)
writes nothing, so a rerun of a scheduled update is harmless.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import VpubError
from ..kernels.dynamic import republish
from ..kernels.hashing import KEY_COLUMNS, content_hash
from ..kernels.partitioning import partition_seed
from ..lake.commit import Steps, exclusive, staged_directory
from ..release.secret import keyed
from ..release.store import BUCKET, ROW, SUB, file_digests, restrict, write_store
from ..release.store_integrity import verified_for_update
from ..release.versions import (
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
from .keys import Snapshot, coded_snapshot, read_keys, with_keys


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


def update_store(
    state: str | Path,
    snapshot: str,
    fmt: str | None = None,
    sign_key: str | None = None,
    wait_s: float | None = None,
    observer=None,
    fill: str = "counterfeits",
) -> Updated:
    """Write the store's next version from `snapshot` (see the module docstring).
    `fill="inserts"` is m-invariance's own balancing, kept for `vpub bench update`'s
    comparison only: an adversary who knows it learns more than 1/m
    (kernels/dynamic.py)."""
    state, step = Path(state), Steps(observer)
    with exclusive(state, wait_s):
        with step("check the store"):
            meta, base = verified_for_update(state, sign_key, semantic=False)
            key, n = require_key(meta, state.name), latest(meta)
            base = with_keys(base, read_keys(state))
        with step("read the store"):
            current = read_version(state, meta, base, n)
        with step("read and encode the snapshot"):
            snap = read_snapshot(meta, snapshot, fmt, key)
        seen = _fingerprint(meta, snap.frame)
        if versions_of(meta)[-1].get("fingerprint") == seen:  # a rerun: nothing to do
            e = versions_of(meta)[-1]
            return Updated(n, int(e["rows"]), 0, 0, int(e["counterfeits"]), {}, unchanged=True)
        with step("match records"):
            gone, fresh = match_records(current.real, snap, [*meta["qi"], meta["sensitive"]])
        with step("republish"):
            added, fake, next_ids = _republish(
                meta, base, current, snap.frame.iloc[fresh], gone, n + 1, fill
            )
        with step("write the version"):
            _commit(state, meta, gone, added, fake, seen, next_ids, sign_key)
    rows = len(current.real) - len(gone) + len(added)
    total = int(fake[COUNT].sum())
    return Updated(n + 1, rows, len(added), len(gone), total, dict(step.timings))


def read_snapshot(meta: dict, path: str, fmt: str | None, key: str) -> Snapshot:
    """The snapshot's tuples in the store's codes, with their keyed identifier hash
    (statdb/keys.py), read with the store's table spec."""
    spec = table_spec_from_dict(meta["source"]["table_spec"])
    served = [*meta["qi"], meta["sensitive"]]
    domains = {a: meta["domains"][a] for a in served}
    return coded_snapshot(path, spec, fmt, key, domains, int(meta["seed"]))


def match_records(
    current: pd.DataFrame, snapshot: Snapshot, columns: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(the `row`s of `current` to delete, the positions in `snap` to insert): records
    matched by keyed hash; same values (equal 64-bit row hashes of their codes) survive,
    changed ones are deleted and inserted.
    Both sides in the order of their first hash and merged (a binary search of 6M
    unordered keys missed the cache: 7 s, against 0.2 s for ordered ones)."""
    k0, k1 = (current[c].to_numpy(np.uint64) for c in KEY_COLUMNS)
    mine = np.argsort(k0)
    snap, theirs = snapshot.frame, snapshot.by_key
    s0, s1 = (snap[c].to_numpy(np.uint64) for c in KEY_COLUMNS)
    ordered = k0[mine]
    pos = np.minimum(np.searchsorted(ordered, s0[theirs]), max(len(mine) - 1, 0))
    at = np.zeros(len(snap), dtype=np.int64)
    at[theirs] = mine[pos] if len(mine) else 0
    found = np.zeros(len(snap), dtype=bool)
    found[theirs] = ordered[pos] == s0[theirs] if len(mine) else False
    if (found & (k1[at] != s1)).any():
        raise VpubError("two record identifiers share a 64-bit keyed hash; build a new store")
    # same values: one row hash each side (a gather per column missed the cache)
    same = found & (content_hash(current[columns], 0)[at] == content_hash(snap[columns], 0))
    kept = np.zeros(len(current), dtype=bool)
    kept[at[same]] = True
    return current[ROW].to_numpy()[~kept], np.flatnonzero(~same)


def _republish(meta, base, current, fresh: pd.DataFrame, gone, n: int, fill: str):
    """The kernel on the current version: (the added rows, the counterfeit cells)."""
    s, qi = meta["sensitive"], list(meta["qi"])
    real, fakes = current.real, current.counterfeits
    count = fakes[COUNT].to_numpy(np.int64)
    old_b = np.concatenate([real[BUCKET].to_numpy(), np.repeat(fakes[BUCKET].to_numpy(), count)])
    old_v = np.concatenate([real[s].to_numpy(), np.repeat(fakes[VALUE].to_numpy(), count)])
    survive = ~np.isin(real[ROW].to_numpy(), gone)
    kept = np.concatenate([survive, np.zeros(int(count.sum()), dtype=bool)])
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


def _fingerprint(meta: dict, snap: pd.DataFrame) -> str:
    """The snapshot's content (identifier hashes and codes, in any row order), keyed by
    the store's seed: the same snapshot twice is recognized, and nothing is learned
    from it without the seed."""
    rows = content_hash(snap, 0)  # summed: any row order gives the same
    total = int(rows.sum(dtype=np.uint64)) if len(rows) else 0
    digest = hashlib.sha256(f"{len(rows)}:{total}".encode()).hexdigest()
    return keyed(int(meta["seed"]), digest.encode())


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
