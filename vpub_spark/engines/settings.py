"""The Spark engine's settings (`conf/spark.yaml`): read without starting or importing
Spark, so the command line and the configs can name them first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..options import option, parse_options

DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # a cached frame (the numbered rows of uad/gd) keeps AQE's coalesced partitions, not
    # 200 tiny ones, each a Python task (docs/explanation/performance.md)
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    # workers forked warm, importing pyspark's compiled modules (daemon.py)
    "spark.python.daemon.module": "vpub_spark.engines.spark.daemon",
    # a release has one _SUCCESS, its own (docs/reference/release-format.md); none inside its tables
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
}


@dataclass(frozen=True)
class SparkSettings:
    """A Spark settings file (`spark:` of a job config; docs/reference/config.md)."""

    master: str = option(
        "local[*]", doc="the Spark master: `local[*]`, `spark://host:7077`, `k8s://...`"
    )
    remote: str | None = option(
        None,
        doc="a Spark Connect server, `sc://host:15002`, instead of a driver in this process "
        "(default: `$SPARK_REMOTE`); `master` and the JVM settings are then the server's",
        shown="`$SPARK_REMOTE`",
    )
    app_name: str = option("vpub", doc="the application's name")
    driver_memory: str = option("4g", doc="the driver's heap (a JVM size)")
    shuffle_partitions: int | None = option(
        None,
        doc="`spark.sql.shuffle.partitions`: a number, or `auto` (chosen from the data size)",
        shown="auto",
        minimum=1,
    )
    conf: tuple[tuple[str, str], ...] = option(
        (),
        doc="any Spark properties, e.g. `{spark.executor.memory: 8g}`; `spark-submit`'s win",
        shown="`{}`",
    )
    small_input: bool = False  # set for a run on a small input: C1-only JIT (module docstring)

    def __post_init__(self) -> None:
        object.__setattr__(self, "conf", tuple(sorted(self.conf)))  # one order, any YAML

    @property
    def remote_url(self) -> str | None:
        """The Spark Connect server to use (`remote`, else `$SPARK_REMOTE`), or None."""
        import os

        return self.remote or os.environ.get("SPARK_REMOTE") or None

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SparkSettings:
        """A Spark settings mapping (`parse_options`; the errors name `spark.KEY`)."""
        return parse_options(cls, d, "spark")

    @classmethod
    def load(cls, path: str | Path | None) -> SparkSettings:
        if path is None:
            return cls()
        from ..tablespec import load_yaml

        return cls.from_dict(load_yaml(path))
