"""The Adult preset of 000 §6.1 (000 Table 5a's domains: `adult.yaml` beside this module)."""

from __future__ import annotations

from pathlib import Path

from ..errors import SpecError
from ..model import Attribute, TableSpec
from ..tablespec import load_table_spec

SPEC_FILE = Path(__file__).resolve().parent / "adult.yaml"
ATTRIBUTES = ("age", "country", "education", "marital_status", "occupation", "income", "sex")


def adult_spec() -> TableSpec:
    return load_table_spec(SPEC_FILE)


def published_spec(spec: TableSpec, dictionaries) -> TableSpec:
    """The spec of the written preset: its labels, in domain order, as categorical values."""
    return TableSpec(
        tuple(Attribute(a, "categorical", order=dictionaries[a].labels) for a in spec.names),
        name=spec.name,
        missing="reject",
    )


def check_source(path: str | Path) -> None:
    p = Path(path)
    if not p.is_dir() or not any(p.glob("*.csv")):
        raise SpecError(f"{p}: expected the Adult directory with adult.data.csv and adult.test.csv")
