"""`vpub marginals add` (002): one more marginal from a private bucket store, decomposed
from the stored buckets (the same signatures as every earlier marginal of the store)
and published as a release of its own; the store's index then records it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ..encoding import Dictionary
from ..kernels.arrays import dense_ids
from ..kernels.marginal_groups import decompose
from ..lake.commit import Steps, audit_and_commit, exclusive, staged_directory, staged_release
from ..lake.objectstore import mirrored
from ..release.layout import release_target
from ..release.manifest import header, seal
from ..release.stores.integrity import verified_for_update
from ..release.stores.store import (
    BUCKET,
    GROUPS,
    ROW,
    STORE_FILE,
    bucket_files,
    check_store_location,
    file_digests,
    group_dir,
    read_store,
    release_location,
    restrict,
    write_store,
)
from ..release.stores.versions import (
    version_number,
    version_rows,
    version_rows_count,
    versions_of,
)
from ..storage import is_remote
from .marginals import (
    GNF_NOTE,
    Marginal,
    marginal_entry,
    marginal_rules,
    marginals_of,
    write_marginal,
)
from .method import PublishResult


def _decompose_store(
    state: Path, mg: Marginal, sensitive: str, qi, dictionaries, stage: Path, links: str | Path
) -> int:
    """Every stored bucket file decomposed for `mg` and written; the number of groups."""
    extents = {a: dictionaries[a].size - 1 for a in qi}
    groups = 0
    for p, f in enumerate(bucket_files(state)):
        b = pq.read_table(f).to_pandas()
        codes, s = b[list(mg.attributes)], b[sensitive].to_numpy(dtype=np.int64)
        first = int(b[ROW].iloc[0]) if len(b) else 0
        bucket = b[BUCKET].to_numpy(dtype=np.int64) - int(b[BUCKET].min())
        g = decompose(codes, s, bucket, extents)
        groups += write_marginal(
            stage,
            links,
            mg.name,
            codes,
            sensitive,
            b[sensitive].to_numpy(),
            g,
            first,
            b[ROW].to_numpy(),
            dictionaries,
            p,
        )
    return groups


def _decompose_version(
    rows: pd.DataFrame, fake: np.ndarray, mg: Marginal, sensitive, qi, dictionaries, stage, links
) -> int:
    """A store version's tuples (`version_rows`) decomposed for `mg` and written as one
    part, counterfeits in their groups' sensitive counts and `counterfeits`, not in
    their boxes or sizes; the number of groups."""
    extents = {a: dictionaries[a].size - 1 for a in qi}
    codes, s = rows[list(mg.attributes)], rows[sensitive].to_numpy(dtype=np.int64)
    bucket = dense_ids(rows[BUCKET].to_numpy(dtype=np.int64) - int(rows[BUCKET].min()))[1]
    g = decompose(codes, s, bucket, extents)
    values = rows[sensitive].to_numpy()
    return write_marginal(
        stage,
        links,
        mg.name,
        codes,
        sensitive,
        values,
        g,
        0,
        rows[ROW].to_numpy(),
        dictionaries,
        0,
        fake,
    )


def add_marginal(
    state: str | Path,
    attributes,
    output: str | Path,
    release_id: str | None = None,
    overwrite: bool = False,
    step: Steps | None = None,
    wait_s: float | None = None,
    sign_key: str | None = None,
    version: int | str | None = None,
) -> PublishResult:
    """`vpub marginals add`: decompose the stored buckets (of `version`, default the
    latest; release/stores/versions.py) for `attributes` and publish them as a new release
    (the same signatures as every earlier marginal of the store). A store on an object
    store is changed in a private local copy (`mirrored`)."""
    check_store_location(state, output, new=False)
    args = (attributes, output, release_id, overwrite, step or Steps(), wait_s, sign_key, version)
    if is_remote(state):
        with mirrored(str(state), STORE_FILE, False, wait_s) as local:
            return _add(local, *args)
    with exclusive(state, wait_s):  # one writer of store.json at a time
        return _add(Path(state), *args)


def _add(
    state: Path, attributes, output, release_id, overwrite, step: Steps, wait_s, sign_key, version
) -> PublishResult:
    # nothing is published from, or sealed into, a damaged store
    meta, base = verified_for_update(state, sign_key)
    n = version_number(meta, version)
    sensitive, qi = meta["sensitive"], tuple(meta["qi"])
    (mg,) = marginals_of([tuple(attributes)], qi, sensitive)
    dictionaries = {a: Dictionary(a, tuple(v)) for a, v in meta["domains"].items()}
    release_id = release_id or f"{mg.name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
    target = release_target(str(output), release_id)
    links_dir = group_dir(state, release_id, mg.name)
    with (
        staged_release(target, overwrite, wait_s) as stage,
        staged_directory(links_dir, overwrite, private=True) as links,
    ):
        with step("decompose and write"):
            if n == 1:
                groups = _decompose_store(state, mg, sensitive, qi, dictionaries, stage, links)
                rows, parts = int(meta["source"]["rows"]), len(bucket_files(state))
            else:
                tuples, fake = version_rows(state, meta, base, n)
                args = (mg, sensitive, qi, dictionaries, stage, links)
                groups, rows, parts = _decompose_version(tuples, fake, *args), int((~fake).sum()), 1
        manifest = _manifest(meta, mg, release_id, parts, n)
        entry = marginal_entry(stage, mg, sensitive, 0, rows, groups, dictionaries, n > 1)
        manifest["tables"] = [entry]
        seal(manifest, int(meta["seed"]))
        report = audit_and_commit(stage, manifest, step, sign_key)
    _record(state, release_id, target, mg, n, sign_key)
    return PublishResult(target, manifest, report, dict(step.timings), None)


def _manifest(meta: dict, mg: Marginal, release_id: str, parts: int, n: int) -> dict:
    """The release's manifest but its tables; `store` names the store and, for a store
    with versions, the version by number and opaque id."""
    cfg = {
        "state_id": meta["store_id"],
        "attributes": list(mg.attributes),
        "release_id": release_id,
    }
    manifest = header(
        release_id=release_id,
        engine="inprocess",
        source=meta["source"] | ({"rows": version_rows_count(meta, n)} if n > 1 else {}),
        privacy={"model": "m-invariance", "m": meta["m"]},
        rules=[r.as_dict() for r in marginal_rules([mg], meta["sensitive"])],
        method="marginals",
        method_cost={"added_from_store": True},
        partitions=parts,
        gnf=GNF_NOTE,
        config=cfg,
        store_id=meta["store_id"],
    )
    if "versions" in meta:
        entry = versions_of(meta)[n - 1]
        manifest["store"] |= {"version": n, "version_id": entry["id"]}
    return manifest


def _record(state: Path, release_id: str, target, mg: Marginal, n: int, sign_key) -> None:
    """store.json lists the new marginal (and the version it came from) and seals its
    links."""
    meta = read_store(state)
    published = {
        "release_id": release_id,
        "release": release_location(target),
        "table": mg.name,
        "attributes": list(mg.attributes),
    }
    meta["published"].append(published | ({"version": n} if "versions" in meta else {}))
    new = f"{GROUPS}/{release_id}/{mg.name}/"  # only the new links are sealed: an earlier edit stays detected
    kept = {f: d for f, d in meta["files"].items() if not f.startswith(new)}
    meta["files"] = kept | file_digests(state, GROUPS, release_id, mg.name)
    write_store(state, meta, sign_key)
    restrict(state)
