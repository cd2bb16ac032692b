"""Two engines behind one seam (DESIGN.md §5): `spark` and `inprocess`; `auto` picks
one of them for an input (`auto.py`). Importing this package imports no data library:
the command line decides on an engine, and may start Spark, before it loads them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Engine, LoadedTable
    from .spark.session import SparkSettings


def __getattr__(name: str) -> Any:
    """`Engine` and `LoadedTable` from `base`, imported on first use (PEP 562)."""
    if name in ("Engine", "LoadedTable"):
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def choose(name: str, spark_conf: SparkSettings | None, input_path: str) -> tuple[str, SparkSettings, str]:  # fmt: skip
    """The engine's name for a run on `input_path`, its Spark settings, and why it was
    chosen (`auto` decides by the input's size and the Spark master; a named engine is
    taken as named). A Spark run on a small input gets the small-input JVM settings
    (`auto.small_input`)."""
    from dataclasses import replace

    from .auto import choose_engine, small_input
    from .spark.session import SparkSettings

    settings = spark_conf or SparkSettings()
    choice = choose_engine(input_path, settings.master) if name == "auto" else None
    chosen, why = (choice.engine, choice.reason) if choice else (name, "as configured")
    if chosen == "spark" and small_input(input_path, choice.peak if choice else None):
        settings = replace(settings, small_input=True)
    return chosen, settings, why


def engine_for(name: str, spark_conf: SparkSettings | None, input_path: str) -> tuple[Engine, str]:  # fmt: skip
    """The engine `choose` picks, made, and why."""
    chosen, settings, why = choose(name, spark_conf, input_path)
    return make_engine(chosen, settings), why


__all__ = ["Engine", "LoadedTable", "choose", "engine_for", "make_engine"]
