"""SQL tables over a release: `vpub releases register` creates one external
Parquet table per part in the Spark session's catalog, or in a Hive metastore when the
session has `spark.sql.catalogImplementation=hive` (tables then outlive the session),
named `<release>_<table>_<part>` (characters other than letters, digits and `_` become
`_`), and per anatomy table a view `<release>_<table>` that joins QIT and ST for analysts:
one row per tuple and sensitive value of its group, with `weight` = c_g(s) / |g| (the
same rows as `vpub export --layout long`).

Re-registering a release replaces its tables. The tables point at the release's files,
so a metastore table needs a path Spark itself can read (local or shared). A release
on an object store (`s3://`, opened in place) is registered as temporary views of the
same names instead, read by Spark's tasks through `pyarrow.fs` (no Hadoop S3
connector): they live as long as the session, so query them in the same run (`--sql`).
"""

from __future__ import annotations

import re

from ..engines.base import Engine, SqlTable, sql_engine
from ..errors import DataError
from ..release.layout import COUNT, GROUP, part_location
from ..release.reader import ReleaseReader
from ..storage import join


def sql_name(*parts: str) -> str:
    name = re.sub(r"\W", "_", "_".join(parts)).lower()
    return f"r_{name}" if name[:1].isdigit() else name


def anatomy_view(release_id: str, entry: dict, temporary: bool = False) -> str:
    """The view joining an anatomy table's QIT and ST."""
    qit, st = sql_name(release_id, entry["name"], "qit"), sql_name(release_id, entry["name"], "st")
    s = entry["sensitive"]
    qi = ", ".join(f"q.`{a}`" for a in entry["attributes"] if a != s)
    return (
        f"CREATE OR REPLACE {'TEMPORARY ' if temporary else ''}VIEW {sql_name(release_id, entry['name'])} AS "
        f"SELECT {qi}, q.`{GROUP}`, s.`{s}`, s.`{COUNT}` / g.size AS weight "
        f"FROM {qit} q JOIN {st} s ON q.`{GROUP}` = s.`{GROUP}` "
        f"JOIN (SELECT `{GROUP}`, SUM(`{COUNT}`) AS size FROM {st} GROUP BY `{GROUP}`) g ON q.`{GROUP}` = g.`{GROUP}`"
    )


def register(engine: Engine, rel: ReleaseReader) -> tuple[list[str], str]:
    """Create (or replace) the release's tables and views in the engine's SQL catalog;
    their names and the catalog's kind."""
    if not rel.committed:
        raise DataError(f"{rel.path}: only a committed release can be registered")
    rid, tables, views, names = str(rel.manifest["release_id"]), [], [], []
    for entry in rel.tables:
        for part in entry["parts"]:
            name = sql_name(rid, entry["name"], part)
            tables.append(_table(rel, entry["name"], part, name))
            names.append(name)
        if entry.get("kind") == "anatomy":
            views.append(anatomy_view(rid, entry, temporary=rel.remote is not None))
            names.append(sql_name(rid, entry["name"]))
    return names, sql_engine(engine).register_tables(tables, views)


def _table(rel: ReleaseReader, table: str, part: str, name: str) -> SqlTable:
    """One part as an external table, or as a temporary view of a release on a store."""
    if rel.remote is None:
        return SqlTable(name, path=str(rel.part_dir(table, part).resolve()))
    files = [
        join(str(part_location(rel.remote, table, part)), f) for f in rel.part_files(table, part)
    ]
    return SqlTable(name, files=tuple(files))
