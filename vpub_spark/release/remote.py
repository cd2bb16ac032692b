"""Releases on an S3-compatible object store, read: a committed release's files
(`fetched`: downloaded once per process and audited there; `fetched_header`: opened in
place), and the stage marker (`layout.REMOTE`) that says where a stage's parts went.
Writing there is `lake/objectstore.py`; the I/O, and where to connect, `storage.py`.

Decisions: docs/how-to/data-lake.md, "Object stores".
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import DataError
from ..storage import download_files, exists, join, listing, read_bytes, scratch_until_exit
from .layout import MANIFEST, REMOTE, SUCCESS, TABLES

LOCK = "_LOCK"  # a publishing run's lock, never part of a release
STAGING = "_staging"  # an overwrite's new parts, until the commit copies them into place


# --- reading ---------------------------------------------------------------------------

_FETCHED: dict[str, Path] = {}


def _committed(uri: str) -> None:
    if not exists(join(uri, SUCCESS)):
        raise DataError(f"{uri}: no {SUCCESS}: not a committed release (readers ignore it)")


def _release_files(uri: str) -> list[str]:
    return [f for f in listing(uri) if f != LOCK and not f.startswith(STAGING + "/")]


def fetched_header(uri: str) -> Path:
    """A fresh local copy of everything of the committed release at `uri` but its parts
    (`tables/`), which readers then fetch one file at a time (`Release.remote`)."""
    _committed(uri)
    local = scratch_until_exit() / "release"
    download_files(uri, [f for f in _release_files(uri) if not f.startswith(f"{TABLES}/")], local)
    return local


def fetched(uri: str) -> Path:
    """A local copy of the committed release at `uri` (downloaded once per process and
    manifest, removed at exit); an uncommitted one is refused, as readers must ignore it."""
    _committed(uri)
    key = f"{uri}#{hashlib.sha256(read_bytes(join(uri, MANIFEST))).hexdigest()}"
    if key not in _FETCHED:  # a release overwritten meanwhile has another manifest
        local = scratch_until_exit() / "release"
        download_files(uri, _release_files(uri), local)
        _FETCHED[key] = local  # only once complete
    return _FETCHED[key]


# --- the stage marker --------------------------------------------------------------------


def read_marker(local: str | Path) -> dict | None:
    """The marker of a local stage (or store copy), if its tasks write to the store."""
    f = Path(local) / REMOTE
    return json.loads(f.read_text()) if f.is_file() else None


def remote_root(local: str | Path) -> str | None:
    """The object-store root a local stage's tasks write to, if any."""
    marker = read_marker(local)
    return None if marker is None else str(marker["root"])


def remote_files(stage: Path) -> dict[str, dict]:
    """The part files `lake.objectstore.record_parts` found: relative path -> SHA-256
    and rows."""
    marker = read_marker(stage)
    return {} if marker is None else dict(marker.get("files", {}))
