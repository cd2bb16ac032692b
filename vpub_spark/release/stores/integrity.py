"""The integrity of a private bucket store (`vpub statdb verify STORE`; `StatDB.open`): the
SHA-256 of every file and of store.json's own content, an optional Ed25519 signature,
and every bucket's codes and counts, checked from the files alone.

Every check, what only the signature detects, and why a format-1 store is refused:
docs/explanation/statdb.md ("Integrity").
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import VpubError
from ..audit.checks import AuditReport, Checker
from .store import (
    BUCKET,
    BUCKETS,
    ROW,
    SIGNATURE,
    STORE_FILE,
    SUB,
    content_digest,
    covered_files,
    read_store,
    sha256_file,
)
from .versions import COUNT, each_version, versions_of
from .versions import listed as versions_listed

KEYS = ("store_id", "m", "seed", "qi", "sensitive", "domains", "source", "published", "files")


def verify_store(state: str | Path, verify_key: str | None = None) -> AuditReport:
    """Every integrity check of the store (docs/explanation/statdb.md); a store on an
    object store is read from a private local copy."""
    from ...storage import base_name, is_remote, local_input

    report = AuditReport(f"store {base_name(state)}")
    store_checks(local_input(str(state)) if is_remote(state) else Path(state), report, verify_key)
    return report


def verified(
    state: Path, verify_key: str | None = None, semantic: bool = True
) -> tuple[dict, pd.DataFrame]:
    """store.json and every tuple of the store once every check passed; else a one-line
    VpubError naming each failed check and file."""
    report = AuditReport(f"store {state.name}")
    meta, tuples = store_checks(state, report, verify_key, semantic)
    if not report.passed or meta is None or tuples is None:
        failures = "; ".join(report.as_dict()["failures"])
        raise VpubError(f"{state.name}: the store was changed or damaged, refused: {failures}")
    return meta, tuples


def store_checks(
    state: Path, report: AuditReport, verify_key: str | None = None, semantic: bool = True
) -> tuple[dict | None, pd.DataFrame | None]:
    """Record the checks in `report`; store.json and the tuples, where they could be read.
    `semantic=False` (an update, which rewrites nothing it reads): the seal only
    (store.json, signature, every file's SHA-256, codes in their domains), not the
    buckets', keys' and versions' m-invariance, which opening and `verify` check."""
    check = report.check
    meta = _index(state, check)
    if meta is None:
        return None, None
    if verify_key is not None:
        check("store: signature", *verify_signature(state, verify_key))
    elif meta.get("signed_by"):
        report.warnings.append(
            f"the store is signed ({meta['signed_by']}) but no verify key was given: its signature was not checked"
        )
    data = _files(state, meta, check)
    tuples = _buckets(meta, data, check)
    if tuples is not None and semantic:
        bucket_checks(meta, tuples, check)
        if meta.get("key"):
            key_checks(state, tuples, check)
        version_checks(state, meta, tuples, check)
    return meta, tuples


def _index(state: Path, check: Checker) -> dict | None:
    """store.json, if readable, unedited and complete."""
    try:
        meta = read_store(state)
    except VpubError as e:
        check(f"store: {STORE_FILE}", False, str(e))
        return None
    same = meta.get("digest") == content_digest(meta)
    if not check(
        f"store: {STORE_FILE} unchanged",
        same,
        "its content matches its digest"
        if same
        else f"{STORE_FILE} was edited after it was written: its content does not match its digest",
    ):
        return None
    missing = [k for k in KEYS if k not in meta]
    served = [*meta.get("qi", []), meta.get("sensitive")]
    no_domain = [str(a) for a in served if a not in meta.get("domains", {})]
    detail = (
        f"{STORE_FILE} lacks {', '.join(missing)}"
        if missing
        else f"{STORE_FILE} has no domain for {', '.join(no_domain)}"
    )
    ok = not missing and not no_domain
    return (
        meta
        if check(f"store: {STORE_FILE} complete", ok, "every field" if ok else detail)
        else None
    )


def verify_signature(state: Path, verify_key: str) -> tuple[bool, str]:
    """(ok, why): store.json is, byte for byte, what the key's private half signed."""
    from ..signing import _load

    return _signed_by(state, _load(verify_key, False))


def _signed_by(state: Path, key) -> tuple[bool, str]:
    from ..signing import signed_by

    return signed_by(key, state / STORE_FILE, state / SIGNATURE, STORE_FILE, "store")


def verified_for_update(
    state: Path, sign_key: str | None, semantic: bool = True
) -> tuple[dict, pd.DataFrame]:
    """store.json and version 1's tuples of a store about to change, once every check passed. A signed store
    stays signed and is never re-signed unchecked: the update needs its signing key,
    whose public half must verify the current signature."""
    from ..signing import _load

    meta, tuples = verified(state, semantic=semantic)
    signed_by = meta.get("signed_by")
    if signed_by and sign_key is None:
        raise VpubError(
            f"{state.name}: the store is signed (key {signed_by}); give its signing key (--sign-key) to change it"
        )
    if signed_by and sign_key is not None:
        ok, why = _signed_by(state, _load(sign_key, True).public_key())
        if not ok:
            raise VpubError(
                f"{state.name}: the store's signature does not verify with this signing key, refused: {why}"
            )
    return meta, tuples


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _files(state: Path, meta: dict, check: Checker) -> dict[str, bytes]:
    """Check the files against store.json's list; the bytes of the listed bucket files."""
    listed = dict(meta["files"])
    present = {f for f in covered_files(state) if versions_listed(f, meta)}
    missing, extra = sorted(set(listed) - present), sorted(present - set(listed))
    why = [f"missing {_some(missing)}"] * bool(missing) + [
        f"not listed in {STORE_FILE}: {_some(extra)}"
    ] * bool(extra)
    check("store: every file listed", not why, "; ".join(why) or f"{len(listed)} files")
    data, changed = {}, []
    for rel in sorted(set(listed) & present):
        if rel.startswith(f"{BUCKETS}/"):
            data[rel] = (state / rel).read_bytes()
            digest = hashlib.sha256(data[rel]).hexdigest()
        else:
            digest = sha256_file(state / rel)
        if digest != listed[rel]:
            changed.append(rel)
    ok = not changed
    check(
        "store: SHA-256 of every file",
        ok,
        f"{len(listed) - len(missing)} files match {STORE_FILE}"
        if ok
        else f"{_some(changed)}: SHA-256 differs from {STORE_FILE}'s (changed or damaged)",
    )
    return data


def _buckets(meta: dict, data: dict[str, bytes], check: Checker) -> pd.DataFrame | None:
    """The listed bucket files as one frame, if every one is readable and in its domains."""
    if not check(
        "store: bucket files",
        data,
        f"{len(data)} files" if data else "the store holds no bucket file",
    ):
        return None
    tables, unreadable = {}, []
    for rel, raw in data.items():
        try:
            tables[rel] = pq.read_table(pa.BufferReader(raw))
        except (pa.ArrowException, OSError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            unreadable.append(f"{rel}: not a readable Parquet file ({first})")
    check(
        "store: bucket files readable",
        not unreadable,
        "; ".join(unreadable) or f"{len(tables)} Parquet files",
    )
    wrong = [w for rel, t in tables.items() for w in _codes(rel, t, meta)]
    check(
        "store: codes in their domains",
        not wrong,
        "; ".join(wrong) or "every QI and sensitive code",
    )
    if unreadable or wrong:
        return None
    return pa.concat_tables(list(tables.values()), promote_options="default").to_pandas()


def _codes(rel: str, t: pa.Table, meta: dict) -> list[str]:
    """What is wrong with one bucket file's columns and codes (nothing: [])."""
    served = [*meta["qi"], meta["sensitive"]]
    names = set(t.column_names)
    bad = [
        c
        for c in [ROW, SUB, BUCKET, *served]
        if c not in names or not pa.types.is_integer(t.schema.field(c).type) or t[c].null_count
    ]
    if bad:
        return [f"{rel}: no integer column without nulls named {', '.join(bad)}"]
    out = []
    for a in served:
        size = len(meta["domains"][a])
        low, high = (v.as_py() for v in pc.min_max(t[a]).values())
        if t.num_rows and (low < 0 or high >= size):
            out.append(
                f"{rel}: {a} code {low if low < 0 else high} outside its domain 0..{size - 1}"
            )
    return out


def bucket_checks(meta: dict, tuples: pd.DataFrame, check: Checker) -> None:
    """Every tuple once; every bucket holds each value of its signature equally often."""
    from ...kernels.dynamic import unbalanced

    s, m = meta["sensitive"], int(meta["m"])
    rows = tuples[ROW].to_numpy()
    once = len(rows) == 0 or (rows.min() >= 0 and len(np.unique(rows)) == len(rows))
    check(
        "store: rows",
        len(tuples) == int(meta["source"]["rows"]) and bool(once),
        f"{len(tuples)} tuples, the source had {meta['source']['rows']}",
    )
    buckets = len(np.unique(tuples[BUCKET].to_numpy()))
    bad = unbalanced(tuples[BUCKET].to_numpy(), tuples[s].to_numpy(), m)
    check(
        f"store: buckets {m}-invariant",
        not bad,
        f"{buckets} buckets; each value of a signature equally often, >= {m} values"
        if not bad
        else f"{bad} buckets are not",
    )


def key_checks(state: Path, base: pd.DataFrame, check: Checker) -> None:
    """An updatable store's `keys/`: readable, one identifier hash per tuple of version 1,
    none repeated."""
    try:
        keys = pq.read_table(state / "keys" / "part-0.parquet").to_pandas()
    except (pa.ArrowException, OSError, ValueError) as e:
        check("store: record keys", False, f"keys/part-0.parquet unreadable ({type(e).__name__})")
        return
    rows = _same_ids(keys[ROW].to_numpy(), base[ROW].to_numpy())
    k0 = np.sort(keys["key0"].to_numpy())
    single = not (k0[1:] == k0[:-1]).any()  # 64 of the 128 bits: written unique, kept so
    check(
        "store: record keys",
        rows and single,
        f"{len(keys)} identifier hashes, one per tuple"
        if rows and single
        else "the identifier hashes are not one per tuple",
    )


def _same_ids(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of non-negative ids hold the same ids, each once (by marking:
    ids are dense)."""
    if len(a) != len(b) or not len(a):
        return len(a) == len(b)
    if min(a.min(), b.min()) < 0:
        return False
    top = int(max(a.max(), b.max())) + 1
    return bool((np.bincount(a, minlength=top) == np.bincount(b, minlength=top)).all()) and bool(
        (np.bincount(a, minlength=top) <= 1).all()
    )


def version_checks(state: Path, meta: dict, base: pd.DataFrame, check: Checker) -> None:
    """Version by version (release/stores/versions.py): its files readable, its codes in their
    domains, its counts those store.json lists, every surviving tuple's signature
    unchanged, every signature balanced with at least m values (counterfeits counted)."""
    from ...kernels.dynamic import invariance_failures, signature_keys

    entries = versions_of(meta)
    if len(entries) < 2:
        return
    s, m, bad = meta["sensitive"], int(meta["m"]), []
    served, prev = [*meta["qi"], s], None
    try:
        for v, e in zip(
            each_version(state, meta, base[[ROW, BUCKET, *served]]), entries, strict=True
        ):
            row, bucket, value = v.arrays(s)
            key = signature_keys(bucket, value, len(meta["domains"][s]))
            if prev is not None:
                why = invariance_failures(*prev, row, key, bucket, value, m)
                why += _version_counts(v, e, meta)
                bad += [f"version {v.number}: {w}" for w in why]
            prev = (row, key)
    except (pa.ArrowException, OSError, KeyError, ValueError) as ex:
        bad.append(
            f"a version's files are unreadable ({str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__})"
        )
    check(
        f"store: versions {m}-invariant",
        not bad,
        "; ".join(bad)
        or f"{len(entries)} versions: every survivor keeps its signature, every bucket balanced with >= {m} values, counterfeits as listed",
    )


def _version_counts(v, entry: dict, meta: dict) -> list[str]:
    """A version's rows, counterfeits and codes against store.json's record of it."""
    out = []
    real, fake = v.real, int(v.counterfeits[COUNT].sum())
    if len(real) != int(entry["rows"]) or not real[ROW].is_unique:
        out.append(
            f"{len(real)} tuples ({'unique' if real[ROW].is_unique else 'repeated'}), store.json lists {entry['rows']}"
        )
    if fake != int(entry["counterfeits"]):
        out.append(f"{fake} counterfeits, store.json lists {entry['counterfeits']}")
    for a in [*meta["qi"], meta["sensitive"]]:
        c = real[a].to_numpy()
        if len(c) and (c.min() < 0 or c.max() >= len(meta["domains"][a])):
            out.append(f"{a} codes outside its domain")
    return out
