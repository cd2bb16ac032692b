"""The manifest (docs/reference/release-format.md): one header builder and one
table-entry builder for every publisher, so every release carries the same fields in
the same order."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..version import __version__
from .layout import FORMAT_VERSION, table_dir
from .secret import SECRET, randomness_entry


def header(
    *,
    release_id: str,
    engine: str,
    source: dict,
    privacy: dict,
    rules: list[dict],
    method: str,
    method_cost: dict | None,
    partitions: int,
    gnf: dict,
    config: dict,
    rules_dropped: Sequence[dict] = (),
    store_id: str | None = None,
    family: str | None = None,
    supersedes: str | None = None,
) -> dict:
    """Everything but the tables; `randomness` is sealed (`seal`) once the tables are in,
    `audit` filled in when the audit has passed. No seed: release/secret.py."""
    out: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "release_id": release_id,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "software_version": __version__,
        "randomness": {"seed": SECRET},
        "engine": engine,
        "source": source,
        "privacy": privacy,
        "rules": rules,
        "rules_dropped": list(rules_dropped),
        "method": method,
        "method_cost": method_cost,
        "partitions": partitions,
    }
    if family is not None:  # lineage (lake/catalog.py)
        out |= {"family": family, "supersedes": supersedes}
    # a private store, named only by its opaque id (docs/explanation/architecture.md,
    # "Private state")
    if store_id is not None:
        out["store"] = {"store_id": store_id}
    return out | {"tables": [], "gnf": gnf, "config": config, "audit": None}


def seal(manifest: dict, seed: int) -> dict:
    """The manifest with its `randomness` proof: an HMAC of the release's files under the
    secret seed (release/secret.py), computed once every table entry is in."""
    manifest["randomness"] = randomness_entry(seed, manifest)
    return manifest


def part_entries(stage: Path, table: str, parts: Sequence[str]) -> dict[str, dict]:
    """Per part: its path in the release, its number of files and of rows, and every
    file's SHA-256 (the audit recomputes them: an edit after commit is refused). Files
    the tasks wrote to an object store come from `lake.objectstore.record_parts`."""
    from .remote import remote_files

    remote = remote_files(stage)
    out = {}
    for part in parts:
        d = table_dir(stage, table, part)
        where = str(d.relative_to(stage))
        found = {
            f.name: (_sha256(f), pq.ParquetFile(f).metadata.num_rows) for f in d.glob("*.parquet")
        }
        for path, meta in remote.items():
            folder, _, name = path.rpartition("/")
            if folder == where:
                found.setdefault(name, (meta["sha256"], int(meta["rows"])))
        names = sorted(found)
        out[part] = {
            "path": where,
            "files": len(names),
            "rows": sum(found[n][1] for n in names),
            "sha256": {n: found[n][0] for n in names},
        }
    return out


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def table_entry(
    stage: Path,
    *,
    name: str,
    kind: str,
    parts: Sequence[str],
    attributes: Sequence[str],
    sensitive: str | Sequence[str] | None,
    enforces: Sequence[int],
    rows: int,
    **extra: Any,
) -> dict:
    """One table of the manifest; `extra` adds the kind's own fields (groups, domains, ...)."""
    return {
        "name": name,
        "kind": kind,
        "attributes": list(attributes),
        "sensitive": sensitive
        if sensitive is None or isinstance(sensitive, str)
        else list(sensitive),
        "enforces": list(enforces),
        "rows": rows,
        "parts": part_entries(stage, name, parts),
    } | extra
