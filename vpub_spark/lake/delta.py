"""Delta Lake tables of committed releases (`vpub releases register --delta`): one per
part of every published table, written with deltalake (delta-rs: no JVM), one table
version per release of a family (docs/how-to/data-lake.md, "Delta tables")."""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from ..release.reader import ReleaseReader
from ..storage import is_remote, join
from .catalog import family_of
from .iceberg import RELEASE_ID, Registered, check_registrable, release_properties
from .sql import sql_name

DELTA_DIR = "_delta"  # under a releases root: the default location of the tables


def register_delta(rel: ReleaseReader, location: str) -> Registered:
    """One Delta table per part of the release's tables, at
    `<location>/<family>_<table>_<part>`, each gaining one overwrite version holding
    the release's rows, its commit carrying the release's properties; a table whose
    latest version already holds this release is left as it is.

    Args:
        rel: a committed, audited release.
        location: the local directory the tables live under.

    Returns:
        Each table's location and whether it gained a version.

    Raises:
        DataError: an uncommitted release, or one whose manifest records no passed audit.
        SpecError: a location on an object store.
    """
    check_registrable(rel)
    if is_remote(location):
        raise SpecError(
            f"{location}: Delta tables are written on a local or shared file system only"
        )
    family, props = family_of(rel.manifest), release_properties(rel)
    names, changed = [], []
    for entry in rel.tables:
        for part in entry["parts"]:
            path = join(location, sql_name(family, entry["name"], part))
            changed.append(_overwrite(path, rel.read(entry["name"], part), props))
            names.append(path)
    return Registered(tuple(names), tuple(changed))


def _overwrite(path: str, data: Any, props: dict[str, str]) -> bool:
    """`data` as the table's next version (the table made first); False if its latest
    version already holds this release."""
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    if DeltaTable.is_deltatable(path):
        latest = DeltaTable(path).history(1)[0]
        if latest.get(RELEASE_ID) == props[RELEASE_ID]:
            return False
    write_deltalake(
        path,
        data,
        mode="overwrite",
        schema_mode="overwrite",
        commit_properties=CommitProperties(custom_metadata=props),
    )
    return True


def default_location(root: str) -> str:
    """The tables' directory beside a releases root: `<root>/_delta`."""
    return join(root, DELTA_DIR)
