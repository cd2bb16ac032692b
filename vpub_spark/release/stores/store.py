"""The private bucket store of the marginal publisher (002 §3; 004 Lemma 4): a directory
with owner-only permissions, never inside a release nor the publication's output root,
which releases name only by its `store_id`.

Its layout: docs/explanation/marginals.md, "Store layout"; its checks:
release/stores/integrity.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from pathlib import Path

from ...errors import SpecError, VpubError

STORE_FILE, BUCKETS, GROUPS, VERSIONS = "store.json", "buckets", "groups", "versions"
KEYS = "keys"  # an updatable store's record identifiers, hashed (release/stores/record_keys.py)
SIGNATURE = f"{STORE_FILE}.sig"
ROW, SUB, BUCKET = "row", "sub", "bucket"
STORE_FORMAT = 2  # 2: store.json lists its files' SHA-256 and its own digest
REBUILD = "rebuild it with `vpub statdb build` (or `vpub publish` with method marginals) into a new marginals.state"


def check_store_location(
    state: str | Path, output: str | Path, new: bool = True, what: str = "private store"
) -> None:
    """A store (or the owner's private directory) must not lie inside the (public)
    output root; a `new` one must not exist yet. Either may be an `s3://` URI (compared
    as prefixes)."""
    from ...storage import base_name, exists, is_remote, join

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
    if new and (
        exists(join(str(state), STORE_FILE))
        if is_remote(state)
        else (Path(state) / STORE_FILE).exists()
    ):
        raise VpubError(
            f"{base_name(state)} is already a bucket store; add marginals to it with `vpub marginals add --state ...`"
        )


def release_location(target: str | Path) -> str:
    """How a store names a release it published: the URI, or the absolute local path."""
    from ...storage import is_remote

    return str(target) if is_remote(str(target)) else str(Path(target).resolve())


def new_store_id() -> str:
    return uuid.uuid4().hex


def read_store(state: str | Path) -> dict:
    """store.json, parsed; a missing, unparsable or other-format index is refused."""
    p = Path(state) / STORE_FILE
    if not p.is_file():
        raise VpubError(
            f"{Path(state).name}: no {STORE_FILE}; not a bucket store (made by `vpub publish` with method marginals)"
        )
    try:
        meta = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise VpubError(
            f"{p.name}: not valid JSON ({e}); the store is damaged, {REBUILD}"
        ) from None
    if not isinstance(meta, dict):
        raise VpubError(f"{p.name}: not a JSON object; the store is damaged, {REBUILD}")
    if meta.get("format") == 1:
        raise VpubError(
            f"{p.name}: store format 1 lists no digests of its files, this version reads {STORE_FORMAT}: {REBUILD}"
        )
    if meta.get("format") != STORE_FORMAT:
        raise VpubError(
            f"{p.name}: store format {meta.get('format')}, this version reads {STORE_FORMAT}"
        )
    return meta


def content_digest(meta: dict) -> str:
    """The SHA-256 of store.json's content but its `digest`, as canonical JSON."""
    body = {k: v for k, v in meta.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _write_private(p: Path, data: bytes) -> None:
    """Write `p` atomically, owner-only."""
    tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, p)


def write_store(state: str | Path, meta: dict, sign_key: str | None = None) -> None:
    """Write store.json atomically, owner-only, sealed with its `digest`; with `sign_key`
    (an Ed25519 private key, PEM) also its signature `store.json.sig`, else no signature
    (an older one would no longer match). `meta["files"]` comes from `file_digests`."""
    from ..signing import _load, key_id

    key = None if sign_key is None else _load(sign_key, True)
    meta = {k: v for k, v in meta.items() if k not in ("digest", "signed_by")}
    if key is not None:
        meta["signed_by"] = key_id(key.public_key())
    meta["digest"] = content_digest(meta)
    data = (json.dumps(meta, indent=2) + "\n").encode()
    _write_private(Path(state) / STORE_FILE, data)
    sig = Path(state) / SIGNATURE
    if key is None:
        sig.unlink(missing_ok=True)
    else:
        _write_private(sig, base64.b64encode(key.sign(data)) + b"\n")


def hidden(path: str) -> bool:
    """A path with a hidden component: a running writer's lock or stage, never data."""
    return any(c.startswith(".") for c in path.split("/"))


def covered_files(state: str | Path, *under: str) -> list[str]:
    """The files the digests cover (relative paths): everything under `buckets/` and
    `groups/` (or under `under`) but hidden files. A new store whose tasks write to an
    object store (`lake.objectstore.mirrored`) is listed there."""
    from ...storage import join, listing
    from ..remote import remote_root

    tops = ["/".join(under)] if under else [BUCKETS, GROUPS, VERSIONS, KEYS]
    root = remote_root(state)
    if root is not None:
        names = [f"{top}/{f}" for top in tops for f in listing(join(root, top))]
    else:
        base = Path(state)
        names = [
            f.relative_to(base).as_posix()
            for top in tops
            for f in (base / top).rglob("*")
            if f.is_file()
        ]
    return sorted(f for f in names if not hidden(f))


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_digests(state: str | Path, *under: str) -> dict[str, str]:
    """Relative path -> SHA-256 of every covered file (`covered_files`), read where it is."""
    from ...storage import join, read_bytes
    from ..remote import remote_root

    root = remote_root(state)
    if root is not None:
        return {
            f: hashlib.sha256(read_bytes(join(root, f))).hexdigest()
            for f in covered_files(state, *under)
        }
    return {f: sha256_file(Path(state) / f) for f in covered_files(state, *under)}


def bucket_files(state: str | Path) -> list[Path]:
    return sorted((Path(state) / BUCKETS).glob("part-*.parquet"))


def store_location(state: str | Path, *parts: str) -> str | Path:
    """A place in the store; a URI when tasks write straight to a store on an object store."""
    from ...storage import is_remote, join

    return join(str(state), *parts) if is_remote(state) else Path(state).joinpath(*parts)


def group_dir(state: str | Path, release_id: str, table: str) -> str | Path:
    return store_location(state, GROUPS, release_id, table)


def restrict(state: str | Path) -> None:
    """Owner-only permissions on every file and directory of the store."""
    for root, _dirs, files in os.walk(state):
        os.chmod(root, 0o700)
        for f in files:
            os.chmod(os.path.join(root, f), 0o600)
