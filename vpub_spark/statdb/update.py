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
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..engines.inprocess import InProcessEngine
from ..errors import DataError, VpubError
from ..kernels.dynamic import republish
from ..kernels.hashing import KEY_COLUMNS, content_hash, key_hash
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


@dataclass(frozen=True)
class Updated:
    """What an update made: the new version's number, its rows and changes."""

    version: int
    rows: int
    inserted: int
    deleted: int
    counterfeits: int
    timings: dict[str, float]


def update_store(
    state: str | Path,
    snapshot: str,
    fmt: str | None = None,
    sign_key: str | None = None,
    wait_s: float | None = None,
    observer=None,
) -> Updated:
    """Write the store's next version from `snapshot` (see the module docstring)."""
    state, step = Path(state), Steps(observer)
    with exclusive(state, wait_s):
        meta, base = verified_for_update(state, sign_key)
        key, n = require_key(meta, state.name), latest(meta)
        with step("read the store"):
            current = read_version(state, meta, base, n)
        with step("read and encode the snapshot"):
            snap = read_snapshot(meta, snapshot, fmt, key)
        with step("match records"):
            gone, fresh = match_records(current.real, snap, [*meta["qi"], meta["sensitive"]])
        with step("republish"):
            added, fake, next_ids = _republish(meta, base, current, snap.iloc[fresh], gone, n + 1)
        with step("write the version"):
            _commit(state, meta, gone, added, fake, snap, next_ids, sign_key)
    rows = len(current.real) - len(gone) + len(added)
    total = int(fake[COUNT].sum())
    return Updated(n + 1, rows, len(added), len(gone), total, dict(step.timings))


def read_snapshot(meta: dict, path: str, fmt: str | None, key: str) -> pd.DataFrame:
    """The snapshot's tuples in the store's codes, with their keyed identifier hash."""
    spec = table_spec_from_dict(meta["source"]["table_spec"])
    loaded = InProcessEngine(workers=1).load(path, spec, fmt)
    if not loaded.rows:
        raise DataError(f"{Path(path).name}: the snapshot holds no rows")
    twice = int((loaded.counts[key] > 1).sum())
    if twice:
        raise DataError(
            f"{Path(path).name}: {twice} values of the record identifier {key} appear more than once; it must name one record"
        )
    data, out = loaded.data, {}
    for a in [*meta["qi"], meta["sensitive"]]:
        out[a] = _store_codes(a, loaded.dictionaries[a].labels, meta["domains"][a])[data[a]]
    hashes = key_hash(loaded.dictionaries[key].labels, int(meta["seed"]))
    codes = data[key].to_numpy()
    out |= {c: h[codes] for c, h in zip(KEY_COLUMNS, hashes, strict=True)}
    return pd.DataFrame(out)


def _store_codes(attribute: str, labels, domain: list) -> np.ndarray:
    """The store's code of each of the snapshot's labels, or an error naming the new ones."""
    index = {str(v): i for i, v in enumerate(domain)}
    new = [str(v) for v in labels if str(v) not in index]
    if new:
        raise DataError(
            f"{attribute}: {', '.join(new[:5])}{' ...' if len(new) > 5 else ''} not in the store's domain; an update keeps version 1's domains (build a new store for new values)"
        )
    return np.array([index[str(v)] for v in labels], dtype=np.int64)


def match_records(
    current: pd.DataFrame, snap: pd.DataFrame, columns: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(the `row`s of `current` to delete, the positions in `snap` to insert): records
    matched by keyed hash; same values survive, changed ones are deleted and inserted."""
    k0, k1 = (current[c].to_numpy(np.uint64) for c in KEY_COLUMNS)
    order = np.argsort(k0, kind="stable")
    s0, s1 = (snap[c].to_numpy(np.uint64) for c in KEY_COLUMNS)
    pos = np.minimum(np.searchsorted(k0[order], s0), max(len(order) - 1, 0))
    found = (k0[order][pos] == s0) if len(order) else np.zeros(len(snap), dtype=bool)
    at = order[pos]
    if (found & (k1[at] != s1)).any():
        raise VpubError("two record identifiers share a 64-bit keyed hash; build a new store")
    same = found.copy()
    for c in columns:
        same &= current[c].to_numpy()[at] == snap[c].to_numpy()
    kept = np.zeros(len(current), dtype=bool)
    kept[at[same]] = True
    return current[ROW].to_numpy()[~kept], np.flatnonzero(~same)


def _republish(meta, base, current, fresh: pd.DataFrame, gone, n: int):
    """The kernel on the current version: (the added rows, the counterfeit cells)."""
    s, qi = meta["sensitive"], list(meta["qi"])
    old = current.with_counterfeits(s)
    kept = ~old["counterfeit"].to_numpy() & ~np.isin(old[ROW].to_numpy(), gone)
    next_row, next_bucket = _next_ids(meta, base)
    extents = {a: len(meta["domains"][a]) - 1 for a in qi}
    r = republish(
        old[BUCKET].to_numpy(),
        old[s].to_numpy(),
        kept,
        fresh[s].to_numpy(),
        fresh[qi].reset_index(drop=True),
        int(meta["m"]),
        extents,
        partition_seed(int(meta["seed"]), n, 0),
        next_bucket,
        len(meta["domains"][s]),
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


def _commit(state: Path, meta: dict, gone, added, fake, snap, next_ids, sign_key) -> None:
    """The version directory (staged, renamed into place), then store.json."""
    n = latest(meta) + 1
    target = version_dir(state, n)
    if target.exists():  # what an interrupted update left: never listed, never read
        shutil.rmtree(target)
    with staged_directory(target, private=True) as stage:
        write_version(stage, gone, added, fake)
    digest = hashlib.sha256(np.sort(content_hash(snap, 0)).tobytes()).hexdigest()
    rows = int(versions_of(meta)[-1].get("rows", meta["source"]["rows"]))
    entry = version_entry(
        n,
        rows - len(gone) + len(added),
        len(added),
        len(gone),
        int(fake[COUNT].sum()),
        keyed(int(meta["seed"]), digest.encode()),
    )
    entry |= {"next_row": next_ids[0], "next_bucket": next_ids[1]}
    meta["versions"] = [*versions_of(meta), entry]
    meta["files"] = dict(meta["files"]) | file_digests(state, VERSIONS, str(n))
    write_store(state, meta, sign_key)
    restrict(state)
