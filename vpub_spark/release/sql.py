"""SQL tables over a release (issue 19): `vpub releases register` creates one external
Parquet table per part in the Spark session's catalog, or in a Hive metastore when the
session has `spark.sql.catalogImplementation=hive` (tables then outlive the session),
named `<release>_<table>_<part>` (characters other than letters, digits and `_` become
`_`), and per anatomy table a view `<release>_<table>` that joins QIT and ST for analysts:
one row per tuple and sensitive value of its group, with `weight` = c_g(s) / |g| (the
same rows as `vpub export --layout long`).

Re-registering a release replaces its tables. The tables point at the release's files,
so the release must be on a path Spark can read (a local or shared path; `s3://`
releases would need Hadoop's S3 connector, which this project does not ship).
"""

from __future__ import annotations

import re

from ..errors import DataError
from .layout import COUNT, GROUP
from .reader import Release


def sql_name(*parts: str) -> str:
    name = re.sub(r"\W", "_", "_".join(parts)).lower()
    return f"r_{name}" if name[:1].isdigit() else name


def anatomy_view(release_id: str, entry: dict) -> str:
    """The view joining an anatomy table's QIT and ST."""
    qit, st = sql_name(release_id, entry["name"], "qit"), sql_name(release_id, entry["name"], "st")
    s = entry["sensitive"]
    qi = ", ".join(f"q.`{a}`" for a in entry["attributes"] if a != s)
    return (
        f"CREATE OR REPLACE VIEW {sql_name(release_id, entry['name'])} AS "
        f"SELECT {qi}, q.`{GROUP}`, s.`{s}`, s.`{COUNT}` / g.size AS weight "
        f"FROM {qit} q JOIN {st} s ON q.`{GROUP}` = s.`{GROUP}` "
        f"JOIN (SELECT `{GROUP}`, SUM(`{COUNT}`) AS size FROM {st} GROUP BY `{GROUP}`) g ON q.`{GROUP}` = g.`{GROUP}`"
    )  # fmt: skip


def register(spark, rel: Release) -> list[str]:
    """Create (or replace) the release's tables and views; their names."""
    from .objectstore import is_remote

    if is_remote(str(rel.path)) or not rel.committed:
        raise DataError(f"{rel.path}: only a committed release on a local or shared path can be registered")  # fmt: skip
    rid, names = str(rel.manifest["release_id"]), []
    for entry in rel.tables:
        for part in entry["parts"]:
            name = sql_name(rid, entry["name"], part)
            spark.sql(f"DROP TABLE IF EXISTS {name}")
            spark.catalog.createTable(name, path=str(rel.part_dir(entry["name"], part).resolve()), source="parquet")  # fmt: skip
            names.append(name)
        if entry.get("kind") == "anatomy":
            spark.sql(anatomy_view(rid, entry))
            names.append(sql_name(rid, entry["name"]))
    return names
