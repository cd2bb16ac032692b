"""Two engines behind one seam (DESIGN.md §5): `spark` and `inprocess`; `auto` picks
one of them for an input (`auto.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Engine, LoadedTable

if TYPE_CHECKING:
    from .spark.session import SparkSettings


def make_engine(name: str, spark_conf: SparkSettings | None = None) -> Engine:
    """The engine named in the config: `spark` or `inprocess` (`auto` is resolved first,
    by `engine_for`)."""
    from ..errors import SpecError

    if name == "inprocess":
        from .inprocess import InProcessEngine

        return InProcessEngine()
    if name == "spark":
        from .spark.engine import SparkEngine

        return SparkEngine(spark_conf)
    raise SpecError(f"engine must be auto, spark or inprocess, not {name!r}")


def engine_for(name: str, spark_conf: SparkSettings | None, input_path: str) -> tuple[Engine, str]:
    """The engine for a run on `input_path`, and why it was chosen (`auto` decides by the
    input's size and the Spark master; a named engine is taken as named)."""
    if name != "auto":
        return make_engine(name, spark_conf), "as configured"
    from .auto import choose_engine
    from .spark.session import SparkSettings

    choice = choose_engine(input_path, (spark_conf or SparkSettings()).master)
    return make_engine(choice.engine, spark_conf), choice.reason


__all__ = ["Engine", "LoadedTable", "engine_for", "make_engine"]
