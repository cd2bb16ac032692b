"""The multi-SA baseline's schema (000 Appendix B, Algorithm 3 line 1): one table of
every attribute; the sensitive attributes S are those on some rule's RHS, the QI the
others. Its groups come from the program of kernels/bip.py."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import PublishedTable, Rule, Schema

TABLE = "multi_sa"


def multi_sa_schema(names: Sequence[str], rules: Sequence[Rule]) -> Schema:
    sensitive = tuple(a for a in names if any(r.rhs == a for r in rules))
    return Schema(
        (
            PublishedTable(
                TABLE, tuple(names), None, tuple(range(len(rules))), sensitive_set=sensitive
            ),
        )
    )


def split(table: PublishedTable) -> tuple[list[str], list[str]]:
    """(QI, SA) of a multi-SA table, in attribute order."""
    return [a for a in table.attributes if a not in table.sensitive_set], list(table.sensitive_set)
