"""Two engines behind one seam (DESIGN.md §5): `spark` and `inprocess`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Engine, LoadedTable

if TYPE_CHECKING:
    from .spark.session import SparkSettings


def make_engine(name: str, spark_conf: SparkSettings | None = None) -> Engine:
    """The engine named in the config: `spark` (default) or `inprocess`."""
    from ..errors import SpecError

    if name == "inprocess":
        from .inprocess import InProcessEngine

        return InProcessEngine()
    if name == "spark":
        from .spark.engine import SparkEngine

        return SparkEngine(spark_conf)
    raise SpecError(f"engine must be spark or inprocess, not {name!r}")


__all__ = ["Engine", "LoadedTable", "make_engine"]
