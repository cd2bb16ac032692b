"""Apache Iceberg tables over committed releases (`vpub releases register --iceberg`): one
per part of every published table, in a SQL or REST catalog the owner names.

Decisions (no second copy, a family is one table line, only audited releases,
registering twice is a no-op): docs/how-to/data-lake.md, "Iceberg tables".
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from ..errors import DataError, SpecError
from ..release.layout import part_location
from ..release.reader import ReleaseReader
from ..storage import is_remote, join
from .catalog import family_of
from .sql import sql_name

WAREHOUSE = "_iceberg"  # under a releases root: the default catalog and warehouse
RELEASE_ID = "vpub.release_id"


@dataclass(frozen=True)
class Registered:
    """What `register_iceberg` did: each table's identifier and whether it gained a
    snapshot (False: it already held the release)."""

    tables: tuple[str, ...]
    changed: tuple[bool, ...]


def default_catalog(root: str) -> str:
    """The SQL catalog beside a local releases root: `<root>/_iceberg/catalog.db`."""
    if is_remote(root):
        raise SpecError(
            f"{root} is on an object store: name a local catalog with --iceberg sqlite:///PATH (SQLite cannot live on S3)"
        )
    return f"sqlite:///{os.path.abspath(join(root, WAREHOUSE, 'catalog.db'))}"


def _file_io() -> dict[str, str]:
    """pyiceberg's FileIO settings for an S3-compatible store, from the environment."""
    env = {
        "s3.endpoint": "AWS_ENDPOINT_URL",
        "s3.access-key-id": "AWS_ACCESS_KEY_ID",
        "s3.secret-access-key": "AWS_SECRET_ACCESS_KEY",
        "s3.region": "AWS_REGION",
    }
    return {k: os.environ[v] for k, v in env.items() if os.environ.get(v)}


def open_catalog(uri: str, warehouse: str | None) -> Any:
    """A SQL catalog (an SQLAlchemy URI) or a REST catalog (`http(s)://`); without a
    warehouse, one to read from (a SQLite file that does not exist is an error)."""
    from pyiceberg.catalog import load_catalog

    kind = "rest" if uri.startswith(("http://", "https://")) else "sql"
    if warehouse is None:
        if uri.startswith("sqlite:///") and not os.path.exists(uri.removeprefix("sqlite:///")):
            raise SpecError(f"no Iceberg catalog at {uri}")
        return load_catalog("vpub", type=kind, uri=uri, **_file_io())
    if uri.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(uri.removeprefix("sqlite:///")) or ".", exist_ok=True)
    location = warehouse if is_remote(warehouse) else f"file://{os.path.abspath(warehouse)}"
    if not is_remote(warehouse):
        os.makedirs(warehouse, exist_ok=True)
    return load_catalog("vpub", type=kind, uri=uri, warehouse=location, **_file_io())


def check_registrable(rel: ReleaseReader) -> None:
    """Refuse a release that is not committed or records no passed audit (Iceberg and
    Delta registration alike)."""
    if not rel.committed:
        raise DataError(f"{rel.path}: only a committed release can be registered")
    audit = rel.manifest.get("audit") or {}
    if not audit.get("passed"):
        raise DataError(
            f"{rel.path}: its manifest records no passed audit; run `vpub audit` on it, nothing was registered"
        )


def _files(rel: ReleaseReader, table: str, part: str) -> list[str]:
    """The part's Parquet files where Iceberg reads them (a path or an `s3://` URI)."""
    names = [f for f in rel.part_files(table, part) if f.endswith(".parquet")]
    if rel.remote is not None:
        return [join(str(part_location(rel.remote, table, part)), f) for f in names]
    return [str((rel.part_dir(table, part) / f).resolve()) for f in names]


def release_properties(rel: ReleaseReader) -> dict[str, str]:
    """The properties a registered table (or its snapshot, its Delta commit) carries."""
    m = rel.manifest
    audit = m.get("audit") or {}
    return {
        RELEASE_ID: str(m["release_id"]),
        "vpub.family": family_of(m),
        "vpub.privacy": json.dumps(m.get("privacy"), sort_keys=True),
        "vpub.audit": f"passed ({audit.get('checks', '?')} checks)",
        "vpub.created_at": str(m.get("created_at", "")),
    }


def register_iceberg(
    rel: ReleaseReader, catalog_uri: str, warehouse: str, namespace: str = "vpub"
) -> Registered:
    """One Iceberg table per part of the release's tables, each gaining one overwrite
    snapshot of the release's files (docs/how-to/data-lake.md)."""
    check_registrable(rel)
    logging.getLogger("pyiceberg.io.pyarrow").setLevel(logging.ERROR)  # "statistics missing"
    catalog = open_catalog(catalog_uri, warehouse)
    catalog.create_namespace_if_not_exists(namespace)
    family, props = family_of(rel.manifest), release_properties(rel)
    names, changed = [], []
    for entry in rel.tables:
        for part in entry["parts"]:
            ident = f"{namespace}.{sql_name(family, entry['name'], part)}"
            files = _files(rel, entry["name"], part)
            if not files:
                raise DataError(f"{rel.path}: table {entry['name']} part {part} has no files")
            changed.append(_replace_files(catalog, ident, files, props))
            names.append(ident)
    return Registered(tuple(names), tuple(changed))


def _replace_files(catalog: Any, ident: str, files: list[str], props: dict[str, str]) -> bool:
    """The table's files replaced by `files` in one overwrite snapshot (the table made,
    or its schema widened by name, first); False if it already holds this release."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.table.name_mapping import create_mapping_from_schema

    schema = _read_schema(pq, files[0])
    table = catalog.create_table_if_not_exists(ident, schema=schema)
    if (
        table.current_snapshot() is not None
        and table.properties.get(RELEASE_ID) == props[RELEASE_ID]
    ):
        return False
    with table.transaction() as tx:
        with tx.update_schema() as update:
            update.union_by_name(schema)
        mapping = create_mapping_from_schema(tx.table_metadata.schema())  # files carry no ids
        tx.set_properties({"schema.name-mapping.default": mapping.model_dump_json()})
        old = [task.file for task in table.scan().plan_files()]
        with tx.update_snapshot(snapshot_properties=props).overwrite() as snapshot:
            for data_file in old:
                snapshot.delete_data_file(data_file)
            for f in files:
                snapshot.append_data_file(parquet_file_to_data_file(table.io, tx.table_metadata, f))
        tx.set_properties(props)
    return True


def _read_schema(pq: Any, path: str) -> Any:
    """A Parquet file's Arrow schema, local or on an object store."""
    if not is_remote(path):
        return pq.read_schema(path)
    from ..storage import filesystem, fs_path

    with filesystem().open_input_file(fs_path(path)) as f:
        return pq.read_schema(f)
