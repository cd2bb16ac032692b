"""The versions of a private store (release/stores/store.py): what `vpub statdb update`
writes, `versions/<n>/`, written once and never changed, listed in store.json only once
it is in place.

The layout: docs/explanation/marginals.md, "Store layout"; how versions are made:
docs/explanation/statdb.md, "Versions".
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import SpecError, VpubError
from .store import BUCKET, ROW, VERSIONS

DELETED, ADDED, COUNTERFEITS = "deleted.parquet", "added.parquet", "counterfeits.parquet"
VALUE, COUNT, COUNTERFEIT = "value", "count", "counterfeit"


def versions_of(meta: dict) -> list[dict]:
    """store.json's versions, oldest first; a store without the list is version 1 only."""
    return list(meta.get("versions") or [{"version": 1, "id": meta["store_id"]}])


def latest(meta: dict) -> int:
    return int(versions_of(meta)[-1]["version"])


def version_number(meta: dict, version: int | str | None) -> int:
    """A version by number or opaque id (None: the latest), or a one-line error."""
    entries = versions_of(meta)
    if version is None:
        return int(entries[-1]["version"])
    text = str(version)
    hits = [  # a number, an id, or an id's first 8 or more characters
        int(e["version"])
        for e in entries
        if text == str(e["version"]) or (len(text) >= 8 and str(e["id"]).startswith(text))
    ]
    if len(set(hits)) > 1:
        raise SpecError(
            f"{text} begins the ids of versions {', '.join(map(str, hits))}; give more of it"
        )
    if hits:
        return hits[0]
    known = ", ".join(str(e["version"]) for e in entries)
    raise SpecError(f"the store has no version {version}; its versions are {known}")


def listed(path: str, meta: dict) -> bool:
    """Whether a store file belongs to a listed version (an unlisted `versions/<n>/` is
    what an interrupted update left: ignored, replaced by the next update)."""
    parts = path.split("/")
    if parts[0] != VERSIONS:
        return True
    return len(parts) > 1 and parts[1] in {str(e["version"]) for e in versions_of(meta)[1:]}


def version_rows_count(meta: dict, n: int) -> int:
    """Version n's real tuples, as store.json lists them."""
    return int(versions_of(meta)[n - 1].get("rows", meta["source"]["rows"]))


def version_dir(state: Path, n: int) -> Path:
    return state / VERSIONS / str(n)


@dataclass(frozen=True)
class Version:
    """One version's tuples: `real` (the store's columns) and its counterfeit cells."""

    number: int
    real: pd.DataFrame
    counterfeits: pd.DataFrame

    def fakes(self, sensitive: str) -> dict[str, np.ndarray]:
        """The counterfeits one per row: `row` -1, -2, ... in the order of their cells,
        `bucket` and the sensitive value."""
        c = self.counterfeits
        count = c[COUNT].to_numpy(np.int64)
        return {
            ROW: -1 - np.arange(int(count.sum()), dtype=np.int64),
            BUCKET: np.repeat(c[BUCKET].to_numpy(np.int64), count),
            sensitive: np.repeat(c[VALUE].to_numpy(np.int64), count),
        }

    def arrays(self, sensitive: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`row`, `bucket` and sensitive value of every tuple, as `with_counterfeits`
        orders them (without building the frame)."""
        fake = self.fakes(sensitive)
        row, bucket, value = (
            np.concatenate([self.real[c].to_numpy(np.int64), fake[c]])
            for c in (ROW, BUCKET, sensitive)
        )
        return row, bucket, value

    def with_counterfeits(self, sensitive: str) -> pd.DataFrame:
        """Every tuple of the version, counterfeits as rows after the real ones
        (`counterfeit` True, `row` -1, -2, ... in the order of the counterfeit cells,
        QI codes 0: they have none)."""
        real, fake = self.real, self.fakes(sensitive)
        n = len(fake[ROW])
        out = {
            col: np.concatenate(
                [real[col].to_numpy(), fake.get(col, np.zeros(n)).astype(real[col].dtype)]
            )
            for col in real.columns
        }
        out[COUNTERFEIT] = np.arange(len(real) + n) >= len(real)
        return pd.DataFrame(out)


def read_version(state: Path, meta: dict, base: pd.DataFrame, n: int) -> Version:
    """Version n's tuples from version 1's (`base`, as store_checks read them)."""
    for v in each_version(state, meta, base):
        if v.number == n:
            return v
    raise SpecError(f"the store has no version {n}")


def each_version(state: Path, meta: dict, base: pd.DataFrame) -> Iterator[Version]:
    """Every listed version's tuples, oldest first, each from the one before, with
    `base`'s columns (the identifier hashes only when `base` has them)."""
    real = base
    none = pd.DataFrame({BUCKET: [], VALUE: [], COUNT: []}, dtype=np.int64)
    yield Version(1, real, none)
    for e in versions_of(meta)[1:]:
        d = version_dir(state, int(e["version"]))
        gone = pq.read_table(d / DELETED)[ROW].to_numpy()
        real = real[~np.isin(real[ROW].to_numpy(), gone)]
        added = pq.read_table(d / ADDED).to_pandas()[list(base.columns)]
        real = pd.concat([real, added], ignore_index=True)
        fake = pq.read_table(d / COUNTERFEITS).to_pandas()
        yield Version(int(e["version"]), real, fake)


def version_rows(state: Path, meta: dict, base: pd.DataFrame, n: int):
    """Version n's tuples as a marginal decomposes them, by (bucket, row), and which are
    counterfeits. Decision: a counterfeit takes the QI codes of its bucket's first real
    tuple, so the halving sorts it among them; no box or size counts it."""
    v = read_version(state, meta, base, n)
    rows = v.with_counterfeits(meta["sensitive"])
    fake = rows[COUNTERFEIT].to_numpy(bool)
    qi = list(meta["qi"])
    firsts = rows[~fake].sort_values(ROW).groupby(BUCKET)[qi].first()
    rows.loc[fake, qi] = firsts.loc[rows.loc[fake, BUCKET]].to_numpy()
    order = np.lexsort((rows[ROW].to_numpy(), rows[BUCKET].to_numpy()))
    return rows.iloc[order].reset_index(drop=True), fake[order]


def write_version(
    stage: Path, deleted: np.ndarray, added: pd.DataFrame, counterfeits: pd.DataFrame
) -> None:
    """A version's three files into its staging directory."""
    pq.write_table(pa.table({ROW: pa.array(deleted, pa.int64())}), stage / DELETED)
    pq.write_table(pa.Table.from_pandas(added, preserve_index=False), stage / ADDED)
    pq.write_table(pa.Table.from_pandas(counterfeits, preserve_index=False), stage / COUNTERFEITS)


def first_version(store_id: str, rows: int, fingerprint: str) -> dict:
    """store.json's record of version 1: the built store (`fingerprint`: its source's,
    as updates record theirs)."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return {
        "version": 1,
        "id": store_id,
        "parent": None,
        "created": created,
        "rows": rows,
        "counterfeits": 0,
        "fingerprint": fingerprint,
    }


def version_entry(
    n: int, rows: int, inserted: int, deleted: int, counterfeits: int, fingerprint: str
) -> dict:
    """store.json's record of version n (`id`: opaque, what releases name)."""
    return {
        "version": n,
        "id": uuid.uuid4().hex,
        "parent": n - 1,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": rows,
        "inserted": inserted,
        "deleted": deleted,
        "counterfeits": counterfeits,
        "fingerprint": fingerprint,
    }


def require_key(meta: dict, name: str) -> str:
    """The store's record identifier, or why it cannot be updated."""
    key = meta.get("key")
    if not key:
        raise VpubError(
            f"{name}: built without a record identifier, so it cannot be updated; rebuild it with marginals.key naming one (`vpub statdb build`)"
        )
    return str(key)
