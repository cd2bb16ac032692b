"""The private bucket store of the marginal publisher (002 §3; 004 Lemma 4; DESIGN.md §9).

A store is a directory with owner-only permissions, never inside a release and never
inside the publication's output root:
- `store.json`: an opaque `store_id`, m, the seed, the QI attributes, the sensitive
  attribute, every attribute's domain (labels in code order), the source's row count
  and fingerprint, and `published`: every marginal made from the store (release id,
  release path, table, attributes);
- `buckets/part-<p>.parquet`: one row per tuple: `row` (a stable id), the QI and
  sensitive codes, `sub` (its 002 sub-table) and `bucket`;
- `groups/<release_id>/<table>/part-<p>.parquet`: `row`, `group_id`: which published
  group of that marginal holds the tuple (what the private audit re-checks).
Releases name the store only by its `store_id`.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from ..errors import SpecError, VpubError

STORE_FILE, BUCKETS, GROUPS = "store.json", "buckets", "groups"
ROW, SUB, BUCKET = "row", "sub", "bucket"
STORE_FORMAT = 1


def check_store_location(state: str | Path, output: str | Path, new: bool = True, what: str = "private store") -> None:  # fmt: skip
    """A store (or the owner's private directory) must not lie inside the (public)
    output root; a `new` one must not exist yet. Either may be an `s3://` URI (compared
    as prefixes)."""
    from ..storage import base_name, exists, is_remote, join

    if is_remote(state) or is_remote(output):
        a, b = str(state).rstrip("/"), str(output).rstrip("/")
        inside = a == b or a.startswith(b + "/")
    else:
        s, o = Path(state).resolve(), Path(output).resolve()
        inside = s == o or o in s.parents
    if inside:
        raise SpecError(
            f"the {what} must not be inside the output directory ({base_name(output)}); put it elsewhere"
        )
    if new and (exists(join(str(state), STORE_FILE)) if is_remote(state) else (Path(state) / STORE_FILE).exists()):  # fmt: skip
        raise VpubError(
            f"{base_name(state)} is already a bucket store; add marginals to it with `vpub marginals add --state ...`"
        )


def release_location(target: str | Path) -> str:
    """How a store names a release it published: the URI, or the absolute local path."""
    from ..storage import is_remote

    return str(target) if is_remote(str(target)) else str(Path(target).resolve())


def new_store_id() -> str:
    return uuid.uuid4().hex


def read_store(state: str | Path) -> dict:
    p = Path(state) / STORE_FILE
    if not p.is_file():
        raise VpubError(
            f"{Path(state).name}: no {STORE_FILE}; not a bucket store (made by `vpub publish` with method marginals)"
        )
    meta = json.loads(p.read_text())
    if meta.get("format") != STORE_FORMAT:
        raise VpubError(
            f"{p.name}: store format {meta.get('format')}, this version reads {STORE_FORMAT}"
        )
    return meta


def write_store(state: str | Path, meta: dict) -> None:
    """Write store.json atomically, owner-only."""
    p = Path(state) / STORE_FILE
    tmp = p.with_name(f".{STORE_FILE}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, p)


def bucket_files(state: str | Path) -> list[Path]:
    return sorted((Path(state) / BUCKETS).glob("part-*.parquet"))


def store_location(state: str | Path, *parts: str) -> str | Path:
    """A place in the store; a URI when tasks write straight to a store on an object store."""
    from ..storage import is_remote, join

    return join(str(state), *parts) if is_remote(state) else Path(state).joinpath(*parts)


def group_dir(state: str | Path, release_id: str, table: str) -> str | Path:
    return store_location(state, GROUPS, release_id, table)


def restrict(state: str | Path) -> None:
    """Owner-only permissions on every file and directory of the store."""
    for root, _dirs, files in os.walk(state):
        os.chmod(root, 0o700)
        for f in files:
            os.chmod(os.path.join(root, f), 0o600)
