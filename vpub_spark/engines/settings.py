"""The Spark engine's settings (`conf/spark.yaml`): read without starting or importing
Spark, so the command line and the configs can name them first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..model import option, refuse_unknown, yaml_keys

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
    app_name: str = option("vpub", doc="the application's name")
    driver_memory: str = option("4g", doc="the driver's heap (a JVM size)")
    shuffle_partitions: int | None = option(
        None,
        doc="`spark.sql.shuffle.partitions`: a number, or `auto` (chosen from the data size)",
        shown="auto",
    )
    conf: tuple[tuple[str, str], ...] = option(
        (),
        doc="any Spark properties, e.g. `{spark.executor.memory: 8g}`; `spark-submit`'s win",
        shown="`{}`",
    )
    small_input: bool = False  # set for a run on a small input: C1-only JIT (module docstring)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SparkSettings:
        d = dict(d or {})
        refuse_unknown(d, yaml_keys(cls), "spark settings")
        conf = tuple(sorted((str(k), str(v)) for k, v in (d.pop("conf", None) or {}).items()))
        sp = d.get("shuffle_partitions")
        if sp not in (None, "auto") and (not isinstance(sp, int) or sp < 1):
            raise SpecError(
                f"spark settings: shuffle_partitions must be a positive integer or auto, not {sp!r}"
            )
        return cls(
            master=str(d.get("master", cls.master)),
            app_name=str(d.get("app_name", cls.app_name)),
            driver_memory=str(d.get("driver_memory", cls.driver_memory)),
            shuffle_partitions=None if sp in (None, "auto") else int(sp),
            conf=conf,
        )

    @classmethod
    def load(cls, path: str | Path | None) -> SparkSettings:
        if path is None:
            return cls()
        from ..tablespec import load_yaml

        return cls.from_dict(load_yaml(path))
