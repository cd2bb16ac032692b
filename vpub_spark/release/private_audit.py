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
from ..state import BUCKET, ROW, bucket_files, group_dir, read_store
from .audit import AuditReport, Check
from .reader import COUNT, GROUP, open_release

SEP = "\x1f"


def _signature(frame: pd.DataFrame, key: str, value: str) -> pd.Series:
    """key -> its sorted distinct values joined (a comparable signature)."""
    pairs = frame[[key, value]].astype({value: str}).drop_duplicates().sort_values([key, value])
    return pairs.groupby(key)[value].agg(SEP.join)


def audit_store(state: str | Path) -> AuditReport:
    state = Path(state)
    report = AuditReport(f"store {state.name}")

    def check(name: str, ok: object, detail: str = "") -> bool:
        report.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    try:
        meta = read_store(state)
    except (VpubError, ValueError) as e:
        check("store", False, str(e))
        return report
    s, m, qi = meta["sensitive"], int(meta["m"]), list(meta["qi"])
    files = bucket_files(state)
    if not check("store: bucket files", files, f"{len(files)} files"):
        return report
    tuples = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    check(
        "store: rows",
        len(tuples) == int(meta["source"]["rows"]) and tuples[ROW].is_unique,
        f"{len(tuples)} tuples, the source had {meta['source']['rows']}",
    )
    cells = tuples.groupby([BUCKET, s]).size()
    per = cells.groupby(level=0).agg(["min", "max", "size"])
    ok = (per["min"] == per["max"]) & (per["size"] >= m)
    check(
        f"store: buckets {m}-invariant",
        ok.all(),
        f"{len(per)} buckets; each value of a signature equally often, >= {m} values"
        if ok.all()
        else f"{int((~ok).sum())} buckets are not",
    )
    domains = meta["domains"]
    labels = tuples.assign(
        **{a: np.asarray(domains[a], dtype=object)[tuples[a].to_numpy()] for a in [*qi, s]}
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
        links_dir = group_dir(state, pub["release_id"], pub["table"])
        links = (
            pd.concat(
                [pq.read_table(f).to_pandas() for f in sorted(links_dir.glob("*.parquet"))],
                ignore_index=True,
            )
            if links_dir.is_dir()
            else pd.DataFrame(columns=[ROW, GROUP])
        )
        linked = links[ROW].is_unique and set(links[ROW]) == set(tuples[ROW])
        if not check(
            f"{name}: every tuple in exactly one group",
            linked,
            f"{len(links)} links for {len(tuples)} tuples",
        ):
            continue
        groups = rel.read(pub["table"], "groups").to_pandas()
        st = rel.read(pub["table"], "st").to_pandas()
        t = labels.merge(links, on=ROW, how="left")
        published_sig = _signature(st, GROUP, s)
        mine = published_sig.reindex(t[GROUP]).to_numpy()
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
            pos = {v: i for i, v in enumerate(domains[a])}
            code = tuples[a].to_numpy()  # a left merge on unique links keeps the tuples' order
            inside &= (g[f"{a}_min"].astype(str).map(pos).to_numpy() <= code) & (
                code <= g[f"{a}_max"].astype(str).map(pos).to_numpy()
            )
        check(
            f"{name}: every tuple inside its box",
            inside.all(),
            f"{int((~inside).sum())} tuples outside"
            if not inside.all()
            else f"{len(groups)} boxes",
        )
        sizes = t.groupby(GROUP).size()
        check(
            f"{name}: group sizes",
            sizes.sort_index().equals(
                groups.set_index(GROUP)["size"].sort_index().astype(sizes.dtype)
            ),
            f"{len(groups)} groups",
        )
    return report
