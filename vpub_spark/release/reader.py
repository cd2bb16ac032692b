"""Reading a release (DESIGN.md §4): its manifest and its tables, from the files alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataError
from .layout import MANIFEST, SUCCESS, table_dir


def read_manifest(path: str | Path) -> dict:
    p = Path(path) / MANIFEST
    if not p.is_file():
        raise DataError(f"{path}: no {MANIFEST}; not a release")
    try:
        m = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise DataError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(m, dict):
        raise DataError(f"{p}: expected a JSON object")
    return m


@dataclass(frozen=True)
class Release:
    path: Path
    manifest: dict

    @property
    def committed(self) -> bool:
        return (self.path / SUCCESS).is_file()

    @property
    def tables(self) -> list[dict]:
        return list(self.manifest.get("tables", []))

    def table(self, name: str) -> dict:
        for t in self.tables:
            if t.get("name") == name:
                return t
        raise DataError(
            f"release has no table {name!r}; it has: {', '.join(t.get('name', '?') for t in self.tables)}"
        )

    def part_dir(self, table: str, part: str) -> Path:
        return table_dir(self.path, table, part)

    def read(self, table: str, part: str, columns: list[str] | None = None) -> pa.Table:
        """One part of one table; string columns come back dictionary-encoded (compact)."""
        d = self.part_dir(table, part)
        if not d.is_dir():
            raise DataError(f"{d.relative_to(self.path)}: missing")
        files = sorted(str(f) for f in d.glob("*.parquet"))
        if not files:
            raise DataError(f"{d.relative_to(self.path)}: no Parquet files")
        schema = pq.read_schema(files[0])
        strings = [
            f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        ]
        tables = [pq.read_table(f, columns=columns, read_dictionary=strings) for f in files]
        try:
            return pa.concat_tables(tables).unify_dictionaries()
        except pa.ArrowInvalid as e:
            raise DataError(
                f"{d.relative_to(self.path)}: files disagree on their columns ({e})"
            ) from None


def open_release(path: str | Path) -> Release:
    """The release at a local path, or a committed one on an object store (`s3://`,
    read from a local copy: `objectstore.fetched`)."""
    from .objectstore import fetched, is_remote

    p = fetched(str(path)) if is_remote(path) else Path(path)
    if not p.is_dir():
        raise DataError(f"{p}: no such release directory")
    return Release(p, read_manifest(p))
