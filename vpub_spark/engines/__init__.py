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
    input's size and the Spark master; a named engine is taken as named). A Spark run on
    a small input gets the small-input JVM settings (`auto.small_input`)."""
    from dataclasses import replace

    from .auto import choose_engine, small_input
    from .spark.session import SparkSettings

    settings = spark_conf or SparkSettings()
    choice = choose_engine(input_path, settings.master) if name == "auto" else None
    chosen, why = (choice.engine, choice.reason) if choice else (name, "as configured")
    if chosen == "spark" and small_input(input_path, choice.peak if choice else None):
        settings = replace(settings, small_input=True)
    return make_engine(chosen, settings), why


__all__ = ["Engine", "LoadedTable", "engine_for", "make_engine"]
