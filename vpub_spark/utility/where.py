"""The condition language of `vpub query`, `vpub statdb`, `vpub serve` and workload files:
one grammar (lark, LALR), read by `parse_where` and written by `where_text`, whose text
`parse_where` reads back to the same codes.

The language (values bare or quoted, attributes, keywords, errors):
docs/reference/conditions.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import cast

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

from ..errors import SpecError

GRAMMAR = r"""
    start: condition (AND condition)*
    condition: attr IN "(" value ("," value)* ")"  -> one_of
             | attr "=" value                      -> equals
             | attr BETWEEN value AND value        -> between
    attr: NAME | BACKQUOTED
    value: SQUOTED | DQUOTED | BARE
    AND.2: /and\b/i
    IN.2: /in\b/i
    BETWEEN.2: /between\b/i
    NAME: /[^\W\d]\w*(?:[.\-]\w+)*/
    BACKQUOTED: /`(?:[^`]|``)*`/
    SQUOTED: /'(?:[^']|'')*'/
    DQUOTED: /"(?:[^"]|"")*"/
    BARE: /[^\s,()'"`=]+/
    %import common.WS
    %ignore WS
"""
KEYWORDS = ("and", "in", "between")
EXAMPLE = "a in (x, 'y z') and b = w and c between 1 and 5"
_BARE = re.compile(r"[^\s,()'\"`=]+")


@dataclass(frozen=True)
class Condition:
    """One condition as written: `kind` is `in` (values), `=` (one value) or
    `between` (values = (lo, hi)); `column` is where its attribute starts (1-based)."""

    attr: str
    kind: str
    values: tuple[str, ...]
    column: int


def _unquote(token: Token) -> str:
    text = str(token)
    if token.type in ("SQUOTED", "DQUOTED", "BACKQUOTED"):
        return text[1:-1].replace(text[0] * 2, text[0])
    return text


class _Conditions(Transformer):
    def start(self, items: list) -> list[Condition]:
        return [c for c in items if isinstance(c, Condition)]

    def attr(self, items: list) -> tuple[str, int]:
        return _unquote(items[0]), items[0].column

    def value(self, items: list) -> str:
        return _unquote(items[0])

    def one_of(self, items: list) -> Condition:
        (attr, col), _in, *values = items
        return Condition(attr, "in", tuple(values), col)

    def equals(self, items: list) -> Condition:
        (attr, col), value = items
        return Condition(attr, "=", (value,), col)

    def between(self, items: list) -> Condition:
        (attr, col), _b, lo, _and, hi = items
        return Condition(attr, "between", (lo, hi), col)


@cache
def _parser() -> Lark:
    return Lark(GRAMMAR, parser="lalr", lexer="contextual", transformer=_Conditions())


def _syntax_error(text: str, e: UnexpectedInput) -> SpecError:
    expected = getattr(e, "expected", None) or getattr(e, "allowed", None) or []
    names = sorted({_TERMS.get(t, t) for t in expected})
    hint = f"; expected {' or '.join(names)}" if names else ""
    token = getattr(e, "token", None)
    if isinstance(e, UnexpectedEOF) or (token is not None and token.type == "$END"):
        return SpecError(f"the condition ends too early{hint} (use: {EXAMPLE})")
    lines = text.split("\n")  # as lark counts lines
    near = lines[e.line - 1][e.column - 1 : e.column + 19]
    where = f"line {e.line}, column {e.column}" if len(lines) > 1 else f"column {e.column}"
    what = "unexpected character" if isinstance(e, UnexpectedCharacters) else "unexpected"
    return SpecError(
        f"cannot parse the condition at {where}: {what} {near!r}{hint} (use: {EXAMPLE})"
    )


_TERMS = {
    "AND": "'and'",
    "IN": "'in'",
    "BETWEEN": "'between'",
    "EQUAL": "'='",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "NAME": "an attribute",
    "BACKQUOTED": "an attribute",
    "BARE": "a value",
    "SQUOTED": "a value",
    "DQUOTED": "a value",
    "$END": "the end",
}


def parse_conditions(text: str) -> list[Condition]:
    """The conditions of `text`, as written (syntax only; no domain is read)."""
    if not text or not text.strip():
        raise SpecError("empty condition (use: " + EXAMPLE + ")")
    try:
        return cast(list[Condition], _parser().parse(text))
    except UnexpectedInput as e:
        raise _syntax_error(text, e) from None


def _codes(c: Condition, labels: Sequence[str]) -> set[int]:
    if c.kind == "between":
        try:
            lo, hi = float(c.values[0]), float(c.values[1])
            return {i for i, v in enumerate(labels) if lo <= float(v) <= hi}
        except ValueError:
            raise SpecError(
                f"column {c.column}: {c.attr}: between needs numeric bounds and numeric values; use in (...)"
            ) from None
    index = {v: i for i, v in enumerate(labels)}
    unknown = [v for v in c.values if v not in index]
    if unknown:
        shown = ", ".join(label_text(v) for v in labels[:20]) + (" ..." if len(labels) > 20 else "")
        raise SpecError(
            f"column {c.column}: {c.attr} has no value {unknown[0]!r}; its values are: {shown}"
        )
    return {index[v] for v in c.values}


def parse_where(text: str, domains: Mapping[str, Sequence[str]]) -> dict[str, frozenset[int]]:
    """A `--where` condition as the codes each attribute may hold.

    Args:
        text: the condition (`age between 30 and 50 and sex = Female`; the grammar:
            docs/reference/cli.md).
        domains: each attribute's labels in code order.

    Returns:
        Attribute -> the set of its codes the condition allows; two conditions on one
        attribute intersect."""
    out: dict[str, frozenset[int]] = {}
    for c in parse_conditions(text):
        if c.attr not in domains:
            raise SpecError(
                f"column {c.column}: unknown attribute {c.attr!r}; there are: {', '.join(domains)}"
            )
        codes = frozenset(_codes(c, list(domains[c.attr])))
        out[c.attr] = codes & out.get(c.attr, codes)
    return out


def label_text(value: str) -> str:
    """A label as the grammar reads it back: bare when it can be, else single-quoted."""
    if _BARE.fullmatch(value) and value.lower() not in KEYWORDS:
        return value
    return "'" + value.replace("'", "''") + "'"


def attr_text(attr: str) -> str:
    """An attribute name as the grammar reads it back: bare, else backquoted."""
    if re.fullmatch(r"[^\W\d]\w*(?:[.\-]\w+)*", attr) and attr.lower() not in KEYWORDS:
        return attr
    return "`" + attr.replace("`", "``") + "`"


def increasing_numbers(labels: Sequence[str]) -> bool:
    """Whether every label is a finite number, in increasing order (what `between`
    compares; `NaN` and `inf` parse as floats but order nothing)."""
    try:
        numbers = [float(v) for v in labels]
    except ValueError:
        return False
    if not all(math.isfinite(x) for x in numbers):
        return False
    return all(x < y for x, y in zip(numbers, numbers[1:], strict=False))


def range_text(attr: str, labels: Sequence[str], lo: int, hi: int) -> str:
    """Codes lo..hi of `attr`: `between` where the labels are numbers in increasing
    order (what `between` compares), else the range's labels as `in (...)`."""
    if increasing_numbers(labels) and all(_BARE.fullmatch(labels[i]) for i in (lo, hi)):
        return f"{attr_text(attr)} between {labels[lo]} and {labels[hi]}"
    return codes_text(attr, labels, range(lo, hi + 1))


def codes_text(attr: str, labels: Sequence[str], codes: Sequence[int] | frozenset[int]) -> str:
    """`attr in (...)` of the codes' labels, in code order."""
    return f"{attr_text(attr)} in ({', '.join(label_text(labels[c]) for c in sorted(codes))})"
