"""Helpers of the Spark tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def with_jobs(spark, run: Callable[[], T], group: str) -> tuple[T, int]:
    """`run()`'s value and the number of Spark jobs it ran (its job group's)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, "counted jobs", False)
    try:
        value = run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return value, len(sc.statusTracker().getJobIdsForGroup(group))
