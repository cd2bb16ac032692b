"""Estimates by DuckDB SQL over a release's own Parquet files (`vpub query --reader
duckdb`), the way an analyst reads a release without vpub
(docs/how-to/use-a-release.md, "Read a release with DuckDB or pandas").

Decision: SQL answers a query that one table holds, every attribute of it in that
table: an anatomy table (000 §4; each QIT row stands for each value v of its group with
weight c_g(v) / |g|, so the count is the sum of the weights of the matching rows) or a
projection (the sum of its matching counts). Where the release's tables share no
attribute (UAD, single-attribute), a query over several of them is the product of their
counts over n^(k-1) (000 §6.1: the tables are independent given nothing), one SQL count
per table. Both are the release's own estimate (tested equal to `estimate_count`). A
query over tables that overlap (GD) needs the junction tree of `utility/queries.py` and
is refused with the tables to choose from; so are a query on an attribute no table
shows and releases of other kinds (generalized boxes, multi-SA).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import SpecError
from ..estimate.codes import sort_labels
from ..estimate.columns import COUNT, GROUP
from ..release.reader import Release


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _files(rel: Release, table: str, part: str) -> list[str]:
    return [str(rel.local_file(table, part, f)) for f in rel.part_files(table, part)]


def _conditions(alias_of: Mapping[str, str], labels: Mapping[str, list[str]]) -> tuple[str, dict]:
    """`list_contains($p<i>, <alias>."<attr>")` per attribute, and the parameters."""
    where, params = [], {}
    for i, (attr, values) in enumerate(sorted(labels.items())):
        where.append(f"list_contains($p{i}, {alias_of[attr]}.{_quoted(attr)})")
        params[f"p{i}"] = values
    return " AND ".join(where) or "TRUE", params


def _anatomy_sql(rel: Release, entry: dict, labels: Mapping[str, list[str]]) -> tuple[str, dict]:
    s = entry["sensitive"]
    alias = {a: ("st" if a == s else "qit") for a in labels}
    where, params = _conditions(alias, labels)
    params |= {"qit": _files(rel, entry["name"], "qit"), "st": _files(rel, entry["name"], "st")}
    g, c = _quoted(GROUP), _quoted(COUNT)
    return (
        f"WITH qit AS (SELECT * FROM read_parquet($qit)), st AS (SELECT * FROM read_parquet($st)), "
        f"size AS (SELECT {g}, SUM({c}) AS n FROM st GROUP BY {g}) "
        f"SELECT SUM(st.{c} / size.n) FROM qit JOIN st USING ({g}) JOIN size USING ({g}) "
        f"WHERE {where}"
    ), params


def _projection_sql(rel: Release, entry: dict, labels: Mapping[str, list[str]]) -> tuple[str, dict]:
    where, params = _conditions({a: "t" for a in labels}, labels)
    params["t"] = _files(rel, entry["name"], "counts")
    return f"SELECT SUM(t.{_quoted(COUNT)}) FROM read_parquet($t) t WHERE {where}", params


def holding_table(rel: Release, attributes: set[str]) -> dict:
    """The first anatomy or projection table holding every one of `attributes`."""
    for entry in rel.tables:
        if entry["kind"] in SQL_OF and attributes <= set(entry.get("attributes", ())):
            return entry
    held = "; ".join(
        f"{t['name']}: {', '.join(t.get('attributes', ()))}"
        for t in rel.tables
        if t["kind"] in SQL_OF
    )
    raise SpecError(
        f"DuckDB answers a query one anatomy or projection table holds; no table holds {', '.join(sorted(attributes))} ({held or 'the release has none'}): ask without --reader duckdb"
    )


def tables_for(rel: Release, attributes: set[str]) -> list[tuple[dict, set[str]]]:
    """The tables whose SQL counts answer a query on `attributes`, each with the
    attributes it answers: the first table holding them all, else, when the release's
    tables share no attribute, every table holding some (see the module docstring)."""
    sql_tables = [t for t in rel.tables if t["kind"] in SQL_OF]
    if any(attributes <= set(t.get("attributes", ())) for t in sql_tables):
        return [(holding_table(rel, attributes), attributes)]
    names = [a for t in rel.tables for a in t.get("attributes", ())]
    apart = len(names) == len(set(names)) and len(sql_tables) == len(rel.tables)
    held = {a for t in sql_tables for a in t["attributes"]}
    if not apart or not attributes <= held:
        holding_table(rel, attributes)  # raises, naming the tables to choose from
    return [
        (t, attributes & set(t["attributes"]))
        for t in sql_tables
        if attributes & set(t["attributes"])
    ]


def table_domains(rel: Release, entry: dict, attributes: set[str]) -> dict[str, list[str]]:
    """The labels `entry` shows for each of `attributes` (DuckDB, one DISTINCT each),
    in the release's label order (`codes.sort_labels`)."""
    import duckdb

    part = {"anatomy": "qit", "projection": "counts"}[entry["kind"]]
    out = {}
    with duckdb.connect() as con:
        for a in sorted(attributes):
            where = "st" if a == entry.get("sensitive") and entry["kind"] == "anatomy" else part
            rows = con.execute(
                f"SELECT DISTINCT {_quoted(a)} FROM read_parquet($f)",
                {"f": _files(rel, entry["name"], where)},
            ).fetchall()
            out[a] = sort_labels(str(r[0]) for r in rows if r[0] is not None)
    return out


def duckdb_count(
    rel: Release,
    query: Mapping[str, frozenset[int]],
    domains: Mapping[str, Sequence[str]],
    entry: dict | None = None,
) -> tuple[float, str]:
    """The estimate of COUNT(*) WHERE `query` (attribute -> codes of `domains`) by DuckDB
    SQL on `entry` (default: the first table holding every attribute of it), and that
    table's name."""
    import duckdb

    labels = {a: [str(domains[a][c]) for c in sorted(codes)] for a, codes in query.items()}
    entry = entry or holding_table(rel, set(labels))
    sql, params = SQL_OF[entry["kind"]](rel, entry, labels)
    with duckdb.connect() as con:
        row = con.execute(sql, params).fetchone()
    return float(row[0] or 0.0) if row else 0.0, entry["name"]


SQL_OF = {"anatomy": _anatomy_sql, "projection": _projection_sql}
