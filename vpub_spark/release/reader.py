"""Reading a release (docs/reference/release-format.md): its manifest and its tables,
from the files alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataError, VpubError
from .layout import MANIFEST, SUCCESS, part_location, table_dir, tables_location


def read_manifest(path: str | Path) -> dict:
    p = Path(path) / MANIFEST
    if not p.is_file():
        raise DataError(f"{path}: no {MANIFEST}; not a release")
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(m, dict):
        raise DataError(f"{p}: expected a JSON object")
    return m


UNREADABLE = (VpubError, pa.ArrowException, KeyError, UnicodeDecodeError)
"""What reading a damaged release's files raises: the audit makes each a failed
"readable" check, never a traceback."""
CACHE = ".remote-cache"  # where a release with `remote` parts keeps the files it read


@dataclass(frozen=True)
class ReleaseReader:
    """A release's manifest and files. `remote`: an object-store root holding its parts
    (a stage whose tasks wrote there, or a committed release audited in place); they
    are listed there and downloaded one file at a time, when read."""

    path: Path
    manifest: dict
    remote: str | None = None
    held: dict[tuple[str, str], pa.Table] | None = field(default=None, compare=False, repr=False)
    """Whole parts read so far, when holding (`holding_parts`)."""

    def holding_parts(self) -> ReleaseReader:
        """This reader, keeping every part it reads whole: a later read of the part, or
        of some of its columns, is served from memory (the auditor reads a part whole,
        then columns of it against the source); a holding reader is returned as it is."""
        return self if self.held is not None else replace(self, held={})

    def kept(self, table: str, part: str) -> pa.Table | None:
        """The part whole when this reader holds it already (read whole before), else None."""
        return self.held.get((table, part)) if self.held is not None else None

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

    def table_names(self) -> set[str]:
        """The tables present (directories under `tables/`, here or on the store)."""
        root = Path(tables_location(self.path))
        names = {d.name for d in root.iterdir() if d.is_dir()} if root.is_dir() else set()
        if self.remote is not None:
            from ..storage import children

            names |= set(children(str(tables_location(self.remote))))
        return names

    def part_files(self, table: str, part: str) -> list[str]:
        """The names of one part's Parquet files."""
        names = {f.name for f in self.part_dir(table, part).glob("*.parquet")}
        if self.remote is not None:
            from ..storage import listing

            found = listing(str(part_location(self.remote, table, part)))
            names |= {f for f in found if f.endswith(".parquet") and "/" not in f}
        return sorted(names)

    def local_file(self, table: str, part: str, name: str) -> Path:
        """A local path of one file of a part (downloaded from `remote` on first use;
        a path that does not exist when the file is nowhere)."""
        local = self.part_dir(table, part) / name
        if self.remote is None or local.is_file():
            return local
        from ..storage import download, join

        cached = table_dir(self.path / CACHE, table, part) / name
        if not cached.is_file():
            download(join(str(part_location(self.remote, table, part)), name), cached)
        return cached if cached.is_file() else local

    def read(self, table: str, part: str, columns: list[str] | None = None) -> pa.Table:
        """One part of one table; string columns come back dictionary-encoded (compact)."""
        where = f"tables/{table}/{part}"
        whole = self.kept(table, part)
        try:
            if whole is not None:
                return whole if columns is None else whole.select(columns)
            read = pa.concat_tables(list(self.read_files(table, part, columns)))
            read = read.unify_dictionaries()
        except (pa.ArrowInvalid, KeyError) as e:  # a column one file lacks, or of another type
            raise DataError(f"{where}: files disagree on their columns ({e})") from None
        if self.held is not None and columns is None:
            self.held[table, part] = read
        return read

    def read_every_part(self) -> ReleaseReader:
        """Every part of every table the manifest lists read whole into this reader
        (holding); a part that cannot be read is skipped, for whoever reads it next to
        report.

        Returns:
            This reader.

        Raises:
            ValueError: this reader does not hold what it reads (`holding_parts`).
        """
        if self.held is None:
            raise ValueError("read_every_part: not a holding reader (holding_parts)")
        for t in self.tables:
            parts = t.get("parts") if isinstance(t, dict) else None
            for part in parts if isinstance(parts, dict) else {}:
                try:
                    self.read(str(t.get("name")), str(part))
                except (*UNREADABLE, OSError):
                    continue
        return self

    def local_files(self, table: str, part: str) -> list[str]:
        """Local paths of one part's Parquet files (downloaded first when remote)."""
        names = self.part_files(table, part)
        if not names:
            raise DataError(f"tables/{table}/{part}: missing or no Parquet files")
        return [str(self.local_file(table, part, n)) for n in names]

    def read_files(
        self, table: str, part: str, columns: list[str] | None = None
    ) -> Iterator[pa.Table]:
        """One part of one table, file by file (one partition's rows in memory at a time);
        string columns dictionary-encoded."""
        files = self.local_files(table, part)
        schema = pq.read_schema(files[0])
        strings = [
            f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        ]
        for f in files:
            yield pq.read_table(f, columns=columns, read_dictionary=strings)

    def column_names(self, table: str, part: str) -> list[str]:
        """The columns of one part (its first file's schema)."""
        names = self.part_files(table, part)
        if not names:
            raise DataError(f"tables/{table}/{part}: missing or no Parquet files")
        return pq.read_schema(str(self.local_file(table, part, names[0]))).names


class ReadAhead:
    """A release opened holding its parts, every part read on a thread from the moment
    this is made (`ReleaseReader.read_every_part`), while the caller goes on: `vpub
    report` makes one before it imports its measures, so the 10M `sal` release's parts
    (read in about 3 s) are read while the command imports (1 s) and reads the source."""

    def __init__(self, path: str | Path) -> None:
        """Open the release and start reading its parts.

        Args:
            path: the release's directory or URI (`open_release`).

        Raises:
            DataError: `open_release`'s.
        """
        self.reader = open_release(path).holding_parts()
        self._thread = ThreadPoolExecutor(1)
        self._reading = self._thread.submit(self.reader.read_every_part)

    def result(self) -> ReleaseReader:
        """Wait for the reading (no thread is left running: a caller may fork then).

        Returns:
            The reader, holding every part that was read. A reading that failed on
            something unforeseen is not raised here: what it did not read is read when
            asked for, and the error, if it is one, raised then.
        """
        try:
            self._reading.exception()
        finally:
            self._thread.shutdown()
        return self.reader


def open_release(path: str | Path, in_place: bool = False) -> ReleaseReader:
    """Open a release's files for reading.

    A local path (a stage whose parts are on an object store reads them there), or a
    committed release on an object store: read from a local copy (`remote.fetched`), or
    with `in_place` from a local copy of everything but its parts, which are read from
    the store when needed (the distributed audit).

    Args:
        path: the release's directory or URI.
        in_place: read an object store's parts where they are.

    Returns:
        The reader, its manifest read.

    Raises:
        DataError: no such directory, no manifest, or one that cannot be read.
    """
    from ..storage import is_remote
    from .remote import fetched, fetched_header, remote_root

    if is_remote(path):
        if in_place:
            header = fetched_header(str(path))
            return ReleaseReader(header, read_manifest(header), str(path))
        path = fetched(str(path))
    p = Path(path)
    if not p.is_dir():
        raise DataError(f"{p}: no such release directory")
    return ReleaseReader(p, read_manifest(p), remote_root(p))
