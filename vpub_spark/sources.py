"""Inputs that are tables rather than files: a table of the Spark session's catalog
(`catalog:db.patients`), a Delta table (`delta:PATH`, read with deltalake, no JVM) and an
Iceberg table (`iceberg:ns.table`, read with pyiceberg), each as a frame (`frames.py`)
with the version read (docs/how-to/data-lake.md, "Tables as input")."""

from __future__ import annotations

from dataclasses import dataclass

from .engines.base import Engine, sql_engine
from .errors import DataError, SpecError
from .frames import FrameInput, frame_input
from .model import TableSpec
from .release.layout import public_path


@dataclass(frozen=True)
class TableInput:
    """A table input read: its rows as a frame, and the version read (a Delta version,
    an Iceberg snapshot id; None for a catalog table without versions)."""

    frame: FrameInput
    version: int | None


def read_table_input(
    input_path: str,
    catalog: str | None,
    version: int | None,
    spec: TableSpec | None,
    engine: Engine,
) -> TableInput:
    """The table `input_path` names, with its spec inferred (`frames.infer_spec`).

    Args:
        input_path: `catalog:db.table`, `delta:PATH` or `iceberg:ns.table`.
        catalog: the Iceberg catalog's URI (`input.catalog`).
        version: the Delta version or Iceberg snapshot to read; None: the latest.
        spec: the table spec to read it by; None: inferred from its schema.
        engine: the engine publishing it (a catalog table is its SQL catalog's).

    Returns:
        The rows as a frame and the version read.

    Raises:
        SpecError: a table that does not exist, a version it does not have, or a
            catalog table for an engine without a SQL catalog.
    """
    kind, name = input_path.split(":", 1)
    if kind == "catalog":
        return TableInput(_catalog_frame(engine, name, spec, input_path), None)
    if kind == "delta":
        arrow, read = _delta(name, version)
    else:
        arrow, read = _iceberg(str(catalog), name, version)
    return TableInput(
        frame_input(arrow, spec, name=_table_name(name), what=str(public_path(input_path))),
        read,
    )


def _table_name(name: str) -> str:
    """The table spec's name (release ids): the table's last name component."""
    return name.rstrip("/").replace("/", ".").rsplit(".", 1)[-1] or "table"


def _catalog_frame(engine: Engine, name: str, spec: TableSpec | None, what: str) -> FrameInput:
    """A catalog table as a frame of the engine's session (no row read yet)."""
    df = sql_engine(engine).catalog_table(name)
    return frame_input(df, spec, name=_table_name(name), what=what)


def _delta(path: str, version: int | None):
    """A Delta table's rows at `version` (None: the latest) as Arrow, and the version."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        table = DeltaTable(path, version=version)
    except TableNotFoundError:
        raise SpecError(f"delta:{public_path(path)}: no Delta table there") from None
    except DeltaError as e:
        raise SpecError(
            f"delta:{public_path(path)}: cannot read version {version}: {str(e).splitlines()[0]}"
        ) from None
    try:
        return table.to_pyarrow_table(), table.version()
    except (DeltaError, OSError) as e:
        raise DataError(f"delta:{public_path(path)}: cannot read: {e}") from None


def _iceberg(uri: str, name: str, snapshot: int | None):
    """An Iceberg table's rows at `snapshot` (None: the current) as Arrow, and the
    snapshot read."""
    from pyiceberg.exceptions import NoSuchTableError

    from .lake.iceberg import open_catalog

    try:
        table = open_catalog(uri, None).load_table(name)
    except (NoSuchTableError, ValueError) as e:
        raise SpecError(f"iceberg:{name}: no such table in the catalog ({e})") from None
    if snapshot is not None and table.snapshot_by_id(snapshot) is None:
        raise SpecError(
            f"iceberg:{name}: no snapshot {snapshot} (the table has moved on or never had it)"
        )
    current = table.current_snapshot()
    read = snapshot if snapshot is not None else current.snapshot_id if current else None
    return table.scan(snapshot_id=read).to_arrow(), read
