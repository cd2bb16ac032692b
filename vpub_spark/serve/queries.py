"""A count request's JSON as `--where` text on a store (`statdb.db.parse_query` reads it)."""

from __future__ import annotations

from ..statdb.db import StatDB, label_text, range_text


class Bad(Exception):
    """A request part that cannot be a query; `field` names it."""

    def __init__(self, message: str, field: str | None):
        super().__init__(message)
        self.field = field


def where_of(body: dict, db: StatDB) -> str:
    """`where` as given, or `ranges` ({QI attribute: [low label, high label]}) and
    `sensitive` (a list of labels) as `where` text."""
    if "where" in body:
        if not isinstance(body["where"], str) or not body["where"].strip():
            raise Bad("where must be a non-empty string", "where")
        return body["where"]
    ranges = body.get("ranges", {})
    if not isinstance(ranges, dict):
        raise Bad("ranges must map QI attributes to [low, high]", "ranges")
    parts = []
    for a, bounds in ranges.items():
        if not (isinstance(bounds, list) and len(bounds) == 2):
            raise Bad(f"ranges.{a} must be [low, high]", f"ranges.{a}")
        lo, hi = _span(db, a, bounds)  # checks the attribute before its domain is read
        parts.append(range_text(a, db.domains[a], lo, hi))
    chosen = body.get("sensitive")
    if chosen is not None:
        if not isinstance(chosen, list) or not chosen:
            raise Bad("sensitive must be a non-empty list of labels", "sensitive")
        parts.append(f"{db.sensitive} in ({', '.join(label_text(str(v)) for v in chosen)})")
    if not parts:
        raise Bad("give where, or ranges and/or sensitive", "where")
    return " and ".join(parts)


def _span(db: StatDB, a: str, bounds: list) -> tuple[int, int]:
    if a not in db.qi:
        raise Bad(f"{a} is not a QI attribute of this store ({', '.join(db.qi)})", f"ranges.{a}")
    labels = db.domains[a]
    try:
        lo, hi = labels.index(str(bounds[0])), labels.index(str(bounds[1]))
    except ValueError:
        raise Bad(f"ranges.{a}: {bounds} are not both labels of {a}", f"ranges.{a}") from None
    if lo > hi:
        raise Bad(f"ranges.{a}: {bounds} is an empty range", f"ranges.{a}")
    return lo, hi
