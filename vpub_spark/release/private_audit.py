"""The private audit of a bucket store (`vpub audit --state STORE`; 002 §3, 004 Lemma 4).

Run by the data owner, who holds the store. From the store's files and every release
it lists, with pyarrow and pandas only (no publisher code):
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
import pyarrow.parquet as pq

from ..errors import VpubError
from .checks import AuditReport, Checker
from .layout import COUNT, GROUP
from .reader import Release, open_release
from .store import BUCKET, ROW, bucket_files, group_dir, read_store

SEP = "\x1f"


def _signature(frame: pd.DataFrame, key: str, value: str) -> pd.Series:
    """key -> its sorted distinct values joined (a comparable signature)."""
    pairs = frame[[key, value]].astype({value: str}).drop_duplicates().sort_values([key, value])
    return pairs.groupby(key)[value].agg(SEP.join)


def audit_store(state: str | Path) -> AuditReport:
    """The private audit; a store on an object store is read from a private local copy."""
    from ..storage import is_remote
    from .objectstore import base_name, local_input

    name = base_name(state)
    state = local_input(str(state)) if is_remote(state) else Path(state)
    report = AuditReport(f"store {name}")

    check = report.check
    try:
        meta = read_store(state)
    except (VpubError, ValueError) as e:
        check("store", False, str(e))
        return report
    files = bucket_files(state)
    if not check("store: bucket files", files, f"{len(files)} files"):
        return report
    tuples = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    bucket_checks(meta, tuples, check)
    s, domains = meta["sensitive"], meta["domains"]
    labels = tuples.assign(
        **{a: np.asarray(domains[a], dtype=object)[tuples[a].to_numpy()] for a in [*meta["qi"], s]}
    )
    bucket_sig = _signature(labels, BUCKET, s)
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
        linked = links[ROW].is_unique and set(links[ROW]) == set(tuples[ROW])
        if check(f"{name}: every tuple in exactly one group", linked, f"{len(links)} links for {len(tuples)} tuples"):  # fmt: skip
            _published_checks(rel, pub, meta, tuples, labels.merge(links, on=ROW, how="left"), bucket_sig, check)  # fmt: skip
    return report


def bucket_checks(meta: dict, tuples: pd.DataFrame, check: Checker) -> None:
    """Every tuple once; every bucket holds each value of its signature equally often."""
    s, m = meta["sensitive"], int(meta["m"])
    check(
        "store: rows",
        len(tuples) == int(meta["source"]["rows"]) and tuples[ROW].is_unique,
        f"{len(tuples)} tuples, the source had {meta['source']['rows']}",
    )
    per = tuples.groupby([BUCKET, s]).size().groupby(level=0).agg(["min", "max", "size"])
    ok = (per["min"] == per["max"]) & (per["size"] >= m)
    check(
        f"store: buckets {m}-invariant",
        ok.all(),
        f"{len(per)} buckets; each value of a signature equally often, >= {m} values"
        if ok.all()
        else f"{int((~ok).sum())} buckets are not",
    )


def _links(directory: Path) -> pd.DataFrame:
    """A published marginal's tuple -> group links (none if the directory is missing)."""
    if not directory.is_dir():
        return pd.DataFrame(columns=[ROW, GROUP])
    files = sorted(directory.glob("*.parquet"))
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


def _published_checks(rel: Release, pub: dict, meta: dict, tuples: pd.DataFrame, t: pd.DataFrame, bucket_sig: pd.Series, check: Checker) -> None:  # fmt: skip
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
    inside = np.ones(len(t), dtype=bool)
    for a in pub["attributes"]:
        pos = {v: i for i, v in enumerate(meta["domains"][a])}
        code = tuples[a].to_numpy()  # a left merge on unique links keeps the tuples' order
        lo, hi = g[f"{a}_min"].astype(str).map(pos).to_numpy(), g[f"{a}_max"].astype(str).map(pos).to_numpy()  # fmt: skip
        inside &= (lo <= code) & (code <= hi)
    check(
        f"{name}: every tuple inside its box",
        inside.all(),
        f"{int((~inside).sum())} tuples outside" if not inside.all() else f"{len(groups)} boxes",
    )
    sizes = t.groupby(GROUP).size()
    published = groups.set_index(GROUP)["size"].sort_index().astype(sizes.dtype)
    check(f"{name}: group sizes", sizes.sort_index().equals(published), f"{len(groups)} groups")
