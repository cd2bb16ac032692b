"""The private audit of a bucket store (`vpub audit --state STORE`; 002 §3, 004 Lemma 4).

Run by the data owner, who holds the store. From the store's files and every release
it lists, with pyarrow and pandas only (no publisher code):
- the store's integrity (release/stores/integrity.py: store.json unedited, every file
  listed and of its SHA-256, every code in its domain), with `verify_key` its signature;
- every bucket holds each value of its signature equally often, at least m values;
- for every published marginal: the release is committed and names this store, every
  tuple is linked to exactly one published group, the group's sizes and sensitive
  counts are those of its linked tuples, the tuple's QI values lie inside the group's
  box, and the group's published signature is the tuple's bucket signature: every
  tuple has the same signature in every release made from the store.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import VpubError
from ..audit.checks import AuditReport, Checker
from ..layout import COUNT, COUNTERFEITS, GROUP
from ..reader import ReleaseReader, open_release
from .integrity import store_checks
from .store import BUCKET, ROW, group_dir
from .versions import read_version

SEP = "\x1f"


def _signature(frame: pd.DataFrame, key: str, value: str) -> pd.Series:
    """key -> its sorted distinct values joined (a comparable signature)."""
    pairs = frame[[key, value]].astype({value: str}).drop_duplicates().sort_values([key, value])
    return pairs.groupby(key)[value].agg(SEP.join)


def audit_store(state: str | Path, verify_key: str | None = None) -> AuditReport:
    """The private audit; a store on an object store is read from a private local copy."""
    from ...storage import base_name, is_remote, local_input

    name = base_name(state)
    state = local_input(str(state)) if is_remote(state) else Path(state)
    report = AuditReport(f"store {name}")
    check = report.check
    meta, tuples = store_checks(state, report, verify_key)
    if meta is None or tuples is None:
        return report
    for pub in meta["published"]:
        name = f"{pub['release_id']}/{pub['table']}"
        try:
            rel = open_release(pub["release"])
        except VpubError as e:
            check(f"{name}: release", False, str(e))
            continue
        check(
            f"{name}: committed and from this store",
            rel.committed and rel.manifest.get("store", {}).get("store_id") == meta["store_id"],
            "store ids match" if rel.committed else "not committed",
        )
        links = _links(Path(group_dir(state, pub["release_id"], pub["table"])))
        if links is None:
            check(f"{name}: links readable", False, "a links file is not a readable Parquet file")
            continue
        rows, labels, bucket_sig = _version(state, meta, tuples, int(pub.get("version", 1)))
        linked = links[ROW].is_unique and set(links[ROW]) == set(rows[ROW])
        if check(
            f"{name}: every tuple in exactly one group",
            linked,
            f"{len(links)} links for {len(rows)} tuples",
        ):
            t = labels.merge(links, on=ROW, how="left")
            _published_checks(rel, pub, meta, rows, t, bucket_sig, check)
    return report


def _version(state: Path, meta: dict, base: pd.DataFrame, n: int):
    """A store version's tuples (counterfeits as rows < 0, release/stores/versions.py), the
    same with labels, and each bucket's signature."""
    rows = (
        base if n == 1 else read_version(state, meta, base, n).with_counterfeits(meta["sensitive"])
    )
    s, domains = meta["sensitive"], meta["domains"]
    labels = rows.assign(
        **{a: np.asarray(domains[a], dtype=object)[rows[a].to_numpy()] for a in [*meta["qi"], s]}
    )
    return rows, labels, _signature(labels, BUCKET, s)


def _links(directory: Path) -> pd.DataFrame | None:
    """A published marginal's tuple -> group links (none if the directory is missing;
    None if a file is not readable)."""
    files = (
        sorted(f for f in directory.glob("*.parquet") if not f.name.startswith("."))
        if directory.is_dir()
        else []
    )
    if not files:
        return pd.DataFrame(columns=[ROW, GROUP])
    try:
        return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    except (pa.ArrowException, OSError, ValueError):
        return None


def _published_checks(
    rel: ReleaseReader,
    pub: dict,
    meta: dict,
    tuples: pd.DataFrame,
    t: pd.DataFrame,
    bucket_sig: pd.Series,
    check: Checker,
) -> None:
    """One published marginal against the linked tuples `t` (labels + group_id)."""
    name, s = f"{pub['release_id']}/{pub['table']}", meta["sensitive"]
    groups = rel.read(pub["table"], "groups").to_pandas()
    st = rel.read(pub["table"], "st").to_pandas()
    mine = _signature(st, GROUP, s).reindex(t[GROUP]).to_numpy()
    same = mine == bucket_sig.reindex(t[BUCKET]).to_numpy()
    check(
        f"{name}: every tuple keeps its signature",
        same.all(),
        "each tuple's group shows its bucket's signature"
        if same.all()
        else f"{int((~same).sum())} tuples show another signature",
    )
    counted = t.groupby([GROUP, s]).size().rename(COUNT)
    shown = st.assign(**{s: st[s].astype(str)}).set_index([GROUP, s])[COUNT]
    counted.index = counted.index.set_levels(counted.index.levels[1].astype(str), level=1)
    check(
        f"{name}: published counts are the linked tuples'",
        counted.sort_index().equals(shown.sort_index().astype(counted.dtype)),
        f"{len(shown)} (group, value) cells",
    )
    g = groups.set_index(GROUP).reindex(t[GROUP])
    real = t[ROW].to_numpy() >= 0  # counterfeits (a store version's) have no QI values
    inside = np.ones(len(t), dtype=bool)
    for a in pub["attributes"]:
        pos = {v: i for i, v in enumerate(meta["domains"][a])}
        code = tuples[a].to_numpy()  # a left merge on unique links keeps the tuples' order
        lo, hi = (
            g[f"{a}_min"].astype(str).map(pos).to_numpy(),
            g[f"{a}_max"].astype(str).map(pos).to_numpy(),
        )
        inside &= (lo <= code) & (code <= hi) | ~real
    check(
        f"{name}: every tuple inside its box",
        inside.all(),
        f"{int((~inside).sum())} tuples outside" if not inside.all() else f"{len(groups)} boxes",
    )
    published = groups.set_index(GROUP)
    sizes = t[real].groupby(GROUP).size().reindex(published.index, fill_value=0)
    fakes = t[~real].groupby(GROUP).size().reindex(published.index, fill_value=0)
    shown = published[COUNTERFEITS] if COUNTERFEITS in published else 0 * fakes
    same = (sizes == published["size"]).all() and (fakes == shown).all()
    check(f"{name}: group sizes", bool(same), f"{len(groups)} groups (real tuples, counterfeits)")
