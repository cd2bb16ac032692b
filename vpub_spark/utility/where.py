"""Parsing `--where` clauses for `vpub query`: conditions joined by `and`, each one of
  attr in (v1, v2, ...)    attr = v    attr between lo and hi   (numeric labels, inclusive)
Values may be quoted ('F' or "F"). Labels are those the release shows."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import SpecError

_VALUE = r"""(?:'[^']*'|"[^"]*"|[^\s,()']+)"""
_COND = re.compile(
    rf"""\s*(?P<attr>[A-Za-z][\w.\-]*)\s+(?:
        in\s*\((?P<set>[^)]*)\) |
        =\s*(?P<eq>{_VALUE}) |
        between\s+(?P<lo>{_VALUE})\s+and\s+(?P<hi>{_VALUE})
    )\s*(?:and\b|$)""",
    re.IGNORECASE | re.VERBOSE,
)


def _unquote(v: str) -> str:
    v = v.strip()
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v


def parse_where(text: str, domains: Mapping[str, Sequence[str]]) -> dict[str, frozenset[int]]:
    """The query as attribute -> set of codes of the release's domains."""
    pos, out = 0, {}  # type: tuple[int, dict[str, frozenset[int]]]
    text = text.strip()
    if not text:
        raise SpecError("empty --where clause")
    while pos < len(text):
        m = _COND.match(text, pos)
        if not m:
            raise SpecError(
                f"cannot parse the condition at: {text[pos:]!r} (use: a in (x, y) and b = z and c between 1 and 5)"
            )
        pos = m.end()
        attr = m["attr"]
        if attr not in domains:
            raise SpecError(f"unknown attribute {attr!r}; the release has: {', '.join(domains)}")
        labels = list(domains[attr])
        if m["lo"] is not None:
            try:
                lo, hi = float(_unquote(m["lo"])), float(_unquote(m["hi"]))
                codes = {i for i, v in enumerate(labels) if lo <= float(v) <= hi}
            except ValueError:
                raise SpecError(
                    f"{attr}: between needs numeric bounds and numeric values"
                ) from None
        else:
            values = (
                [_unquote(v) for v in re.findall(_VALUE, m["set"])]
                if m["set"] is not None
                else [_unquote(m["eq"])]
            )
            unknown = [v for v in values if v not in labels]
            if unknown:
                shown = ", ".join(labels[:20]) + (" ..." if len(labels) > 20 else "")
                raise SpecError(f"{attr} has no value {unknown[0]!r}; its values are: {shown}")
            codes = {labels.index(v) for v in values}
        out[attr] = frozenset(codes) & out.get(attr, frozenset(codes))
    return out
