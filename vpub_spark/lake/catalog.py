"""The release catalog of an output root, local or `s3://`: list, show with lineage, the
latest release of a family, diff, prune.

Families, the latest pointer, lineage and the prune rules: docs/how-to/data-lake.md,
"The release catalog".
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError
from ..release.layout import MANIFEST, SUCCESS
from ..storage import (
    children,
    delete,
    delete_all,
    is_remote,
    join,
    read_bytes,
    write_bytes,
)
from ..storage import exists as object_exists

LATEST = "_latest"


@dataclass(frozen=True)
class Root:
    """An output root on the local file system or an object store."""

    where: str

    @property
    def remote(self) -> bool:
        return is_remote(self.where)

    def uri(self, *parts: str) -> str:
        return join(self.where, *parts) if self.remote else str(Path(self.where, *parts))

    def names(self) -> list[str]:
        if self.remote:
            return children(self.where)
        p = Path(self.where)
        return sorted(c.name for c in p.iterdir()) if p.is_dir() else []

    def exists(self, *parts: str) -> bool:
        return object_exists(self.uri(*parts)) if self.remote else Path(self.uri(*parts)).exists()

    def read(self, *parts: str) -> str:
        if self.remote:
            return read_bytes(self.uri(*parts)).decode()
        return Path(self.uri(*parts)).read_text()

    def write_atomically(self, text: str, *parts: str) -> None:
        if self.remote:
            write_bytes(self.uri(*parts), text.encode())
            return
        target = Path(self.uri(*parts))
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(target)

    def remove_release(self, release_id: str) -> None:
        if self.remote:
            delete(self.uri(release_id, SUCCESS))
            delete_all(self.uri(release_id))
            return
        (Path(self.where) / release_id / SUCCESS).unlink()
        shutil.rmtree(Path(self.where) / release_id)


def manifests(root: Root) -> dict[str, dict]:
    """Every committed release's manifest, by release id."""
    out = {}
    for name in root.names():
        if name.startswith(("_", ".")) or not root.exists(name, SUCCESS):
            continue
        try:
            manifest = json.loads(root.read(name, MANIFEST))
        except (ValueError, DataError, OSError):
            continue  # not a release this catalog can read: the auditor says why
        if isinstance(manifest, dict) and isinstance(manifest.get("release_id"), str):
            out[name] = manifest
    return out


def family_of(manifest: dict) -> str:
    table = manifest.get("source", {}).get("table_spec", {}).get("name", "?")
    return str(manifest.get("family") or f"{table}-{manifest.get('method', '?')}")


def latest(root: Root, family: str) -> str | None:
    """The family's latest release id, or None."""
    if not root.exists(LATEST, f"{family}.json"):
        return None
    return str(json.loads(root.read(LATEST, f"{family}.json"))["release_id"])


def set_latest(root: Root, family: str, release_id: str) -> None:
    root.write_atomically(
        json.dumps({"family": family, "release_id": release_id}) + "\n", LATEST, f"{family}.json"
    )


def lineage(found: dict[str, dict], release_id: str) -> list[str]:
    """`release_id`, the release it supersedes, that one's, ... (as far as they exist)."""
    chain = [release_id]
    while (prev := found.get(chain[-1], {}).get("supersedes")) and prev not in chain:
        chain.append(prev)
    return chain


def _rows(m: dict) -> dict[str, object]:
    return {
        f"{t['name']}/{p}": e.get("rows")
        for t in m.get("tables", [])
        for p, e in t.get("parts", {}).items()
    }


def _files(m: dict) -> dict[str, str]:
    return {
        f"{e['path']}/{f}": d
        for t in m.get("tables", [])
        for e in t.get("parts", {}).values()
        for f, d in e.get("sha256", {}).items()
    }


DIFFED = ("family", "method", "privacy", "rules", "partitions", "software_version")


def _source_of(m: dict) -> tuple:
    """What two releases' sources can be compared by: their fingerprints are keyed by each
    release's secret seed (release/secret.py), so rows, columns, table spec and a table
    input's version."""
    s = m.get("source", {})
    return (s.get("rows"), s.get("columns"), s.get("table_spec"), s.get("version"))


def diff(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """What differs between two manifests: (what, in a, in b)."""
    out = [(k, a.get(k), b.get(k)) for k in DIFFED if a.get(k) != b.get(k)]
    if _source_of(a) != _source_of(b):
        out.append(
            ("source data", a.get("source", {}).get("rows"), b.get("source", {}).get("rows"))
        )
    ta = {t["name"]: (t.get("kind"), t.get("attributes")) for t in a.get("tables", [])}
    tb = {t["name"]: (t.get("kind"), t.get("attributes")) for t in b.get("tables", [])}
    out += [
        (f"table {n}", ta.get(n), tb.get(n))
        for n in sorted(ta.keys() | tb.keys())
        if ta.get(n) != tb.get(n)
    ]
    ra, rb = _rows(a), _rows(b)
    out += [
        (f"rows of {p}", ra.get(p), rb.get(p))
        for p in sorted(ra.keys() | rb.keys())
        if ra.get(p) != rb.get(p)
    ]
    fa, fb = _files(a), _files(b)
    changed = sorted(f for f in fa.keys() | fb.keys() if fa.get(f) != fb.get(f))
    if changed:
        out.append(("files with other bytes", len(changed), f"of {len(fa.keys() | fb.keys())}"))
    return out


def _referenced(m: dict, stores: dict[str, set[str]]) -> bool:
    """Whether a private store still references release `m` (docs/how-to/data-lake.md)."""
    store_id = m.get("store", {}).get("store_id")
    if store_id is None:
        return False
    return store_id not in stores or m["release_id"] in stores[store_id]


def store_references(store_dirs: list[str]) -> dict[str, set[str]]:
    """store id -> the release ids its store.json lists as published."""
    out = {}
    for d in store_dirs:
        path = Path(d) / "store.json"
        try:
            meta = json.loads(path.read_text())
            published = {str(p["release_id"]) for p in meta.get("published", [])}
            out[str(meta["store_id"])] = published
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise DataError(
                f"{path}: not a readable store.json ({type(e).__name__}: {e})"
            ) from None
    return out


def prunable(
    found: dict[str, dict], keep: int, latest_ids: set[str], stores: dict[str, set[str]]
) -> list[str]:
    """The release ids `prune` removes (docs/how-to/data-lake.md)."""
    by_family: dict[str, list[str]] = {}
    for rid, m in found.items():
        by_family.setdefault(family_of(m), []).append(rid)
    out = []
    for ids in by_family.values():
        ids.sort(key=lambda r: (found[r].get("created_at", ""), r), reverse=True)
        out += [r for r in ids[keep:] if r not in latest_ids and not _referenced(found[r], stores)]
    return sorted(out)
