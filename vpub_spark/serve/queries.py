"""A count request's JSON as a `Query` on a store's served attributes (the QI attributes
and the sensitive one; no other attribute's name or values is ever read or named).

Two forms: `where` (condition text, `utility/where.py`), or `ranges` ({QI attribute:
[low label, high label]}) and/or `sensitive` (a list of labels). The second form is
turned into codes directly, each label matched exactly as a string against its
domain, so any label works without quoting.
"""

from __future__ import annotations

from ..errors import SpecError
from ..kernels.statdb import Query
from ..statdb.db import StatDB, parse_query, where_text


class Bad(Exception):
    """A request part that cannot be a query; `field` names it."""

    def __init__(self, message: str, field: str | None):
        super().__init__(message)
        self.field = field


def served(db: StatDB) -> dict:
    """The store's meta as the server may show it: the served attributes' domains only."""
    attrs = [*db.qi, db.sensitive]
    return {"qi": db.qi, "sensitive": db.sensitive, "domains": {a: db.domains[a] for a in attrs}}


def query_of(body: dict, db: StatDB) -> tuple[Query, str]:
    """The request's Query and its condition text (as given, or written by `where_text`)."""
    meta = served(db)
    if "where" in body:
        where = body["where"]
        if not isinstance(where, str) or not where.strip():
            raise Bad("where must be a non-empty string", "where")
        try:
            return parse_query(meta, where), where
        except SpecError as e:
            raise Bad(str(e), "where") from None
    if "ranges" not in body and "sensitive" not in body:
        raise Bad("give where, or ranges and/or sensitive", "where")
    ranges = body.get("ranges", {})
    if not isinstance(ranges, dict):
        raise Bad("ranges must map QI attributes to [low label, high label]", "ranges")
    spans = {a: _span(meta, a, bounds) for a, bounds in ranges.items()}
    s = db.sensitive
    chosen = body.get("sensitive")
    if chosen is None:
        codes = frozenset(range(len(meta["domains"][s])))
    else:
        codes = _codes(meta["domains"][s], s, chosen)
    query = Query(spans, codes)
    return query, where_text(meta, query)


def _strings(value: object, message: str, field: str) -> list[str]:
    if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        raise Bad(message, field)
    return value


def _index(labels: list[str], attr: str, chosen: list[str], field: str) -> list[int]:
    """The codes of `chosen`, each label matched exactly."""
    index = {v: i for i, v in enumerate(labels)}
    for v in chosen:
        if v not in index:
            raise Bad(f"{attr} has no value {v!r}", field)
    return [index[v] for v in chosen]


def _codes(labels: list[str], attr: str, chosen: object) -> frozenset[int]:
    message = "sensitive must be a non-empty list of labels (strings)"
    return frozenset(_index(labels, attr, _strings(chosen, message, "sensitive"), "sensitive"))


def _span(meta: dict, a: str, bounds: object) -> tuple[int, int]:
    field = f"ranges.{a}"
    if a not in meta["qi"]:
        raise Bad(f"{a!r} is not a QI attribute of this store ({', '.join(meta['qi'])})", field)
    message = f"{field} must be [low label, high label] (two strings)"
    pair = _strings(bounds, message, field)
    if len(pair) != 2:
        raise Bad(message, field)
    lo, hi = _index(meta["domains"][a], a, pair, field)
    if lo > hi:
        raise Bad(f"{field}: {pair[0]!r} comes after {pair[1]!r}: an empty range", field)
    return lo, hi
