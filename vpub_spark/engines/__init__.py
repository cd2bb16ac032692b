"""Two engines behind one seam (docs/explanation/architecture.md): `spark` and
`inprocess`; `auto` picks one of them for an input (`auto.py`). Importing this package
imports no data library: the command line decides on an engine, and may start Spark,
before it loads them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Engine, LoadedTable
    from .settings import SparkSettings


def __getattr__(name: str) -> Any:
    """`Engine` and `LoadedTable` from `base`, imported on first use (PEP 562)."""
    if name in ("Engine", "LoadedTable"):
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_engine(
    name: str, spark_conf: SparkSettings | None = None, workers: int | None = None
) -> Engine:
    """The engine named in the config (`auto` is resolved first, by `engine_for`).

    Args:
        name: `spark` or `inprocess`.
        spark_conf: the Spark settings (`spark` only; default: `conf/spark.yaml`'s).
        workers: the in-process engine's worker processes (`pool.py`; default: every
            core).

    Returns:
        The engine, not started (Spark starts on first use, or with `start()`).

    Raises:
        SpecError: an unknown name.
    """
    from ..errors import SpecError

    if name == "inprocess":
        from .inprocess import InProcessEngine

        return InProcessEngine(workers)
    if name == "spark":
        from .spark.engine import SparkEngine

        return SparkEngine(spark_conf)
    raise SpecError(f"engine must be auto, spark or inprocess, not {name!r}")


def session_engine(session: Any) -> Engine:
    """The Spark engine on a given session (a Spark DataFrame's, classic or Spark
    Connect), not one it builds."""
    from .spark.engine import SparkEngine

    return SparkEngine(session=session)


def choose(
    name: str, spark_conf: SparkSettings | None, input_path: str, workers: int | None = None
) -> tuple[str, SparkSettings, str]:
    """The engine's name for a run on `input_path`, its Spark settings, and why it was
    chosen (`auto` decides by the input's size, this machine's memory and cores, and
    the Spark master; a catalog table or a Spark Connect server means Spark, a Delta or
    Iceberg table in process; a named engine is taken as named). A Spark run on a small input
    gets the small-input JVM settings (`auto.small_input`)."""
    from dataclasses import replace

    from ..storage import table_kind
    from .auto import choose_engine, small_input
    from .settings import SparkSettings

    settings = spark_conf or SparkSettings()
    table = table_kind(input_path)
    if name == "auto" and table is not None:
        chosen = "spark" if table == "catalog" else "inprocess"
        return (
            chosen,
            settings,
            f"a {table} table is read {'on Spark' if chosen == 'spark' else 'in process'}",
        )
    if name == "auto" and settings.remote_url is not None:
        return "spark", settings, f"a Spark Connect server is configured ({settings.remote_url})"
    choice = choose_engine(input_path, settings.master, workers) if name == "auto" else None
    chosen, why = (choice.engine, choice.reason) if choice else (name, "as configured")
    if chosen == "spark" and small_input(input_path, choice.peak if choice else None):
        settings = replace(settings, small_input=True)
    return chosen, settings, why


def engine_for(
    name: str, spark_conf: SparkSettings | None, input_path: str, workers: int | None = None
) -> tuple[Engine, str]:
    """The engine a config's `engine` names, made; `auto` resolved for the input.

    Args:
        name: `auto`, `spark` or `inprocess`.
        spark_conf: the Spark settings.
        input_path: the input `auto` measures (size, format).
        workers: the in-process engine's worker processes.

    Returns:
        The engine and why it was chosen, in words (`vpub publish` prints it).

    Raises:
        SpecError: an unknown name.
    """
    chosen, settings, why = choose(name, spark_conf, input_path, workers)
    return make_engine(chosen, settings, workers), why


def start_early(settings: SparkSettings) -> None:
    """Start Spark's session for `settings` in the background, now (`session.start_early`)."""
    from .spark.session import start_early as start

    start(settings)


def spark_error_line(error: BaseException) -> str | None:
    """One line for an error Spark raised (a failed job, a bad SQL query); None for any
    other error. Spark is not imported for it."""
    import sys

    if "pyspark" not in sys.modules:
        return None
    from .spark.errors import is_spark_error, one_line

    return str(one_line("Spark", str(error))) if is_spark_error(error) else None


def class_archive_path() -> Path:
    """Where the Spark driver's class-data archive for this Java and Spark lives."""
    from .spark.session import class_archive

    return class_archive()


def run_archiving(out: Path, work: Callable[[], object]) -> int:
    """Start Spark with a JVM that writes its class-data archive to `out` when it exits,
    run `work`, then let the JVM exit; its exit status (`session.run_archiving`)."""
    from .spark.session import run_archiving as run

    return run(out, work)


__all__ = [
    "Engine",
    "LoadedTable",
    "choose",
    "class_archive_path",
    "engine_for",
    "make_engine",
    "run_archiving",
    "spark_error_line",
    "session_engine",
    "start_early",
]
