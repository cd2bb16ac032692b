"""The record identifier of an updatable store (`marginals.key`; statdb/update.py): read
beside the attributes, never encoded, never published, kept only as a keyed hash.
`coded_snapshot` reads a table as the store sees it; `attach_keys` gives a new store's
tuples their identifiers.

Decisions: docs/explanation/statdb.md, "Versions" ("Record identifiers").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...encoding import (
    EncodingPlan,
    build_dictionary,
    encode_batch,
    missing_mask,
    normalized,
    raw_value_counts,
)
from ...engines.inprocess import read_arrow
from ...errors import DataError, SpecError
from ...kernels.hashing import KEY_COLUMNS, content_hash, key_hash
from ...model import Attribute, TableSpec
from ..secret import keyed
from .store import KEYS, ROW, bucket_files


def coded_snapshot(
    path: str,
    spec: TableSpec,
    fmt: str | None,
    key: str,
    domains: Mapping[str, list],
    secret: int,
) -> pd.DataFrame:
    """The table at `path` in the store's codes with its identifiers hashed (see
    docs/explanation/statdb.md); a repeated identifier is refused."""
    attrs = [a for a in spec.attributes if a.name in domains]
    reading = replace(spec, attributes=(*attrs, Attribute(key)))
    table = read_arrow(path, reading, fmt)
    if not table.num_rows:
        raise DataError(f"{Path(path).name}: the table holds no rows")
    table = _complete(table, reading)
    coded = replace(spec, attributes=tuple(attrs))
    raw, _, _ = raw_value_counts(table, coded)
    plan = []
    for a in attrs:  # each raw value straight to the store's code
        d, cc, _ = build_dictionary(a, raw[a.name])
        store = _store_codes(a.name, d.labels, domains[a.name])
        plan.append(replace(cc, codes=tuple(int(store[c]) for c in cc.codes)))
    encoded = encode_batch(table, EncodingPlan(tuple(plan)))
    out = {a.name: encoded.column(a.name).to_numpy() for a in attrs}
    text = normalized(table.column(key)).to_numpy(zero_copy_only=False)
    k0, k1 = key_hash(text, secret)
    _unique(k0, k1, key, Path(path).name)
    return pd.DataFrame(out | dict(zip(KEY_COLUMNS, (k0, k1), strict=True)))


def read_identifiers(path: str, fmt: str | None, key: str, secret: int) -> pd.DataFrame:
    """The identifiers in the table at `path` (its `key` column; a missing one is an
    error), as `key0`, `key1`, each once."""
    spec = TableSpec(attributes=(Attribute(key),))
    table = read_arrow(path, spec, fmt)
    text = normalized(table.column(key))
    if int(pc.sum(missing_mask(text, spec.missing_values)).as_py() or 0):
        raise DataError(f"{Path(path).name}: an identifier to delete is missing")
    k0, k1 = key_hash(text.to_numpy(zero_copy_only=False), secret)
    _unique(k0, k1, key, Path(path).name)
    return pd.DataFrame(dict(zip(KEY_COLUMNS, (k0, k1), strict=True)))


def _complete(table: pa.Table, spec: TableSpec) -> pa.Table:
    """The rows with no missing value (an identifier included), by the spec's policy."""
    missing = None
    for a in spec.attributes:
        col = table.column(a.column)
        miss = missing_mask(
            col if pa.types.is_integer(col.type) else normalized(col), spec.missing_values
        )
        missing = miss if missing is None else pc.or_(missing, miss)
    n = int(pc.sum(missing).as_py() or 0) if missing is not None else 0
    if n and spec.missing == "reject":
        raise DataError(
            f"{n} of {table.num_rows} rows have a missing value and the table spec says missing: reject"
        )
    if n == table.num_rows:
        raise DataError(f"all {n} rows have a missing value; nothing is left")
    return table.filter(pc.invert(missing)) if n else table


def _store_codes(attribute: str, labels, domain: list) -> np.ndarray:
    """The store's code of each label, or an error naming the labels it lacks."""
    index = {str(v): i for i, v in enumerate(domain)}
    new = [str(v) for v in labels if str(v) not in index]
    if new:
        raise DataError(
            f"{attribute}: {', '.join(new[:5])}{' ...' if len(new) > 5 else ''} not in the store's domain; an update keeps version 1's domains (build a new store for new values)"
        )
    return np.array([index[str(v)] for v in labels], dtype=np.int64)


def _unique(k0: np.ndarray, k1: np.ndarray, key: str, name: str) -> None:
    """Refuse a repeated identifier (equal hashes; a hash table of the first, the second
    compared only where the first repeats)."""
    first = pd.Index(k0)
    if first.is_unique:
        return
    twice = first.duplicated(keep=False)
    pairs = pd.DataFrame({"a": k0[twice], "b": k1[twice]}).duplicated().sum()
    if pairs:
        raise DataError(
            f"{name}: {int(pairs)} values of the record identifier {key} appear more than once; it must name one record"
        )


def check_key(key: str | None, qi, sensitive: str) -> None:
    """The record identifier is neither a QI nor the sensitive attribute."""
    if key is not None and key in (*qi, sensitive):
        raise SpecError(
            f"marginals.key {key} is a QI or the sensitive attribute; name a record identifier"
        )


def attach_keys(store: Path, base: pd.DataFrame, snapshot: pd.DataFrame, columns) -> None:
    """Write `keys/part-0.parquet`: each of the store's tuples (`base`) with the
    identifier of the source row it was made from (`snapshot`, `coded_snapshot`), paired
    in the order of a 64-bit hash of their `columns`' codes (docs/explanation/statdb.md)."""
    if len(base) != len(snapshot):
        raise DataError(
            f"the source has {len(snapshot)} complete rows with an identifier, the store {len(base)}"
        )
    h_base, h_snap = content_hash(base[columns], 0), content_hash(snapshot[columns], 0)
    mine, theirs = np.argsort(h_base, kind="stable"), np.argsort(h_snap, kind="stable")
    if not np.array_equal(h_base[mine], h_snap[theirs]):
        raise DataError("the source's rows are not the store's (read twice, they differ)")
    keys = {ROW: base[ROW].to_numpy(np.int64)[mine]}
    keys |= {c: snapshot[c].to_numpy()[theirs] for c in KEY_COLUMNS}
    (store / KEYS).mkdir(exist_ok=True)
    pq.write_table(pa.table(keys), store / KEYS / "part-0.parquet")


def keys_from_source(
    store: Path, path: str, spec: TableSpec, fmt: str | None, key: str, domains, secret: int
) -> str:
    """A new store's `keys/`: its source read once more in this process (`coded_snapshot`)
    and paired with its tuples (`attach_keys`); `domains`: the store's, QI and sensitive.
    Returns the source's fingerprint (version 1's, `changes_fingerprint`)."""
    served = list(domains)
    snap = coded_snapshot(path, spec, fmt, key, domains, secret)
    base = pd.concat(
        [pq.read_table(f, columns=[ROW, *served]).to_pandas() for f in bucket_files(store)],
        ignore_index=True,
    )
    attach_keys(store, base, snap, served)
    return changes_fingerprint(secret, snap)


def read_keys(state: Path) -> pd.DataFrame:
    """`row`, `key0`, `key1` of version 1's tuples."""
    return pq.read_table(state / KEYS / "part-0.parquet").to_pandas()


def with_keys(base: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """`base` (version 1's tuples) with each tuple's `key0`, `key1` from `keys`, looked
    up by row id (ids are dense: no join); a tuple without one is an error."""
    rows, ids = base[ROW].to_numpy(), keys[ROW].to_numpy()
    if len(rows) != len(ids):
        raise DataError(f"{len(ids)} record keys for {len(rows)} tuples")
    top = int(max(rows.max(initial=0), ids.max(initial=0))) + 1
    out = base.copy()
    for c in KEY_COLUMNS:
        by_row = np.zeros(top, dtype=np.uint64)
        by_row[ids] = keys[c].to_numpy()
        out[c] = by_row[rows]
    return out


def changes_fingerprint(seed: int, *frames: pd.DataFrame) -> str:
    """What an update read (identifier hashes and codes, in any row order; a snapshot, or
    upserts then deletes), keyed by the store's seed: the same changes twice are
    recognized, and nothing is learned from them without the seed."""
    sums = []
    for i, frame in enumerate(frames):
        rows = content_hash(frame, i) if len(frame.columns) else np.zeros(0, np.uint64)
        sums.append(f"{len(rows)}:{int(rows.sum(dtype=np.uint64)) if len(rows) else 0}")
    return keyed(seed, hashlib.sha256("/".join(sums).encode()).hexdigest().encode())
