"""Estimates by DuckDB SQL over a release's own Parquet files (`vpub query --reader
duckdb`), the way an analyst reads a release without vpub.

Which releases and queries SQL answers, and how: docs/how-to/use-a-release.md, "Read a
release with DuckDB or pandas".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import SpecError
from ..estimate.codes import sort_labels
from ..estimate.columns import COUNT, GROUP
from ..release.reader import ReleaseReader


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _files(rel: ReleaseReader, table: str, part: str) -> list[str]:
    return [str(rel.local_file(table, part, f)) for f in rel.part_files(table, part)]


def _conditions(
    alias_of: Mapping[str, str], labels: Mapping[str, list[str]], prefix: str = "p"
) -> tuple[str, dict]:
    """`list_contains($<prefix><i>, <alias>."<attr>")` per attribute, and the parameters."""
    where, params = [], {}
    for i, (attr, values) in enumerate(sorted(labels.items())):
        where.append(f"list_contains(${prefix}{i}, {alias_of[attr]}.{_quoted(attr)})")
        params[f"{prefix}{i}"] = values
    return " AND ".join(where) or "TRUE", params


def _anatomy_rows(rel: ReleaseReader, entry: dict, suffix: str, params: dict) -> str:
    """FROM an anatomy table's QIT rows joined with their groups' ST rows and sizes:
    `st."count" / size.n` is a row's weight c_g(s) / |g| (000 §4)."""
    params[f"qit{suffix}"] = _files(rel, entry["name"], "qit")
    params[f"st{suffix}"] = _files(rel, entry["name"], "st")
    g, c = _quoted(GROUP), _quoted(COUNT)
    return (
        f"read_parquet($qit{suffix}) qit JOIN read_parquet($st{suffix}) st USING ({g}) "
        f"JOIN (SELECT {g}, SUM({c}) AS n FROM read_parquet($st{suffix}) GROUP BY {g}) size "
        f"USING ({g})"
    )


def _anatomy_sql(
    rel: ReleaseReader, entry: dict, labels: Mapping[str, list[str]]
) -> tuple[str, dict]:
    s = entry["sensitive"]
    alias = {a: ("st" if a == s else "qit") for a in labels}
    where, params = _conditions(alias, labels)
    rows = _anatomy_rows(rel, entry, "", params)
    return f"SELECT SUM(st.{_quoted(COUNT)} / size.n) FROM {rows} WHERE {where}", params


def _projection_sql(
    rel: ReleaseReader, entry: dict, labels: Mapping[str, list[str]]
) -> tuple[str, dict]:
    where, params = _conditions({a: "t" for a in labels}, labels)
    params["t"] = _files(rel, entry["name"], "counts")
    return f"SELECT SUM(t.{_quoted(COUNT)}) FROM read_parquet($t) t WHERE {where}", params


def holding_table(rel: ReleaseReader, attributes: set[str]) -> dict:
    """The first anatomy or projection table holding every one of `attributes`."""
    for entry in rel.tables:
        if entry["kind"] in SQL_OF and attributes <= set(entry.get("attributes", ())):
            return entry
    raise _refused(rel, attributes)


def _refused(rel: ReleaseReader, attributes: set[str]) -> SpecError:
    held = "; ".join(
        f"{t['name']}: {', '.join(t.get('attributes', ()))}"
        for t in rel.tables
        if t["kind"] in SQL_OF
    )
    return SpecError(
        f"DuckDB answers a query over anatomy and projection tables; no table holds {', '.join(sorted(attributes))} ({held or 'the release has none'}): ask without --reader duckdb"
    )


def overlapping(rel: ReleaseReader) -> bool:
    """Whether some attribute is in two of the release's tables (GD)."""
    names = [a for t in rel.tables for a in t.get("attributes", ())]
    return len(names) != len(set(names))


def tables_for(rel: ReleaseReader, attributes: set[str]) -> list[tuple[dict, set[str]]]:
    """The tables whose SQL answers a query on `attributes`, each with the attributes
    of the query it holds (docs/how-to/use-a-release.md): the first table holding them all
    when the tables share no attribute, else every table holding some; a query SQL
    cannot answer (an attribute no table shows, a table of another kind) is refused,
    naming the tables to choose from."""
    sql_tables = [t for t in rel.tables if t["kind"] in SQL_OF]
    whole = any(attributes <= set(t.get("attributes", ())) for t in sql_tables)
    if whole and not overlapping(rel):
        return [(holding_table(rel, attributes), attributes)]
    held = {a for t in sql_tables for a in t["attributes"]}
    if len(sql_tables) != len(rel.tables) or not attributes <= held:
        raise _refused(rel, attributes)
    return [
        (t, attributes & set(t["attributes"]))
        for t in sql_tables
        if attributes & set(t["attributes"])
    ]


def table_domains(rel: ReleaseReader, entry: dict, attributes: set[str]) -> dict[str, list[str]]:
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
    rel: ReleaseReader,
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


def _joint_sql(rel: ReleaseReader, entry: dict, i: int, params: dict) -> str:
    """Table i's estimate at every combination of its attributes its rows give, as a
    SELECT of the attributes and `__est` (anatomy: sum over groups of n_g(x_q) c_g(s) / |g|,
    000 §4; projection: its counts)."""
    cols = ", ".join(_quoted(a) for a in entry["attributes"])
    c = _quoted(COUNT)
    if entry["kind"] == "projection":
        params[f"t{i}"] = _files(rel, entry["name"], "counts")
        return f"SELECT {cols}, SUM({c}) AS __est FROM read_parquet($t{i}) GROUP BY {cols}"
    s = _quoted(entry["sensitive"])
    picked = ", ".join(
        f"st.{s}" if a == entry["sensitive"] else f"qit.{_quoted(a)}" for a in entry["attributes"]
    )
    rows = _anatomy_rows(rel, entry, str(i), params)
    return f"SELECT {picked}, SUM(st.{c} / size.n) AS __est FROM {rows} GROUP BY {picked}"


def tree_count(
    rel: ReleaseReader,
    tree: Sequence[tuple[int, int | None, tuple[str, ...]]],
    labels: Mapping[str, list[str]],
    n: int,
) -> float:
    """COUNT(*) WHERE `labels` (attribute -> labels) over a release whose tables overlap
    (GD), by DuckDB SQL: sum-product message passing on the junction tree `tree` of its
    tables (`utility/junction.junction_tree`, in the order of `rel.tables`), as the
    release's estimator does it (`utility/queries.Estimator`): each table's estimates
    restricted to the query's region, times its children's messages, summed onto its
    separator and divided by the separator's estimate from the same table; roots
    multiply."""
    import duckdb

    params: dict = {}
    ctes = [f"j{i} AS ({_joint_sql(rel, e, i, params)})" for i, e in enumerate(rel.tables)]
    children: dict[int, list[tuple[tuple[str, ...], str]]] = {}
    roots = []
    for i, parent, sep in reversed(tree):
        held = {a: v for a, v in labels.items() if a in rel.tables[i]["attributes"]}
        where, cond = _conditions({a: "j" for a in held}, held, f"q{i}_")
        params |= cond
        joins, weight = "", "j.__est"
        for child_sep, name in children.pop(i, []):
            using = ", ".join(_quoted(a) for a in child_sep)
            joins += f" LEFT JOIN {name} USING ({using})" if child_sep else f" CROSS JOIN {name}"
            weight += f" * COALESCE({name}.__msg, 0)"
        body = f"FROM j{i} j{joins} WHERE {where}"
        if parent is None:
            ctes.append(f"r{i} AS (SELECT COALESCE(SUM({weight}), 0) / {n} AS __total {body})")
            roots.append(f"r{i}")
        elif not sep:
            ctes.append(f"m{i} AS (SELECT COALESCE(SUM({weight}), 0) / {n} AS __msg {body})")
            children.setdefault(parent, []).append(((), f"m{i}"))
        else:
            cols = ", ".join(f"j.{_quoted(a)}" for a in sep)
            using = ", ".join(_quoted(a) for a in sep)
            ctes.append(
                f"m{i} AS (SELECT {using}, CASE WHEN s.__sep > 0 THEN w.__w / s.__sep "
                f"ELSE 0 END AS __msg "
                f"FROM (SELECT {cols}, SUM({weight}) AS __w {body} GROUP BY {cols}) w "
                f"JOIN (SELECT {using}, SUM(__est) AS __sep FROM j{i} GROUP BY {using}) s "
                f"USING ({using}))"
            )
            children.setdefault(parent, []).append((sep, f"m{i}"))
    product = " * ".join(f"{r}.__total" for r in roots) or "1"
    sql = f"WITH {', '.join(ctes)} SELECT {n} * {product} FROM {', '.join(roots)}"
    with duckdb.connect() as con:
        row = con.execute(sql, params).fetchone()
    return float(row[0] or 0.0) if row else 0.0
