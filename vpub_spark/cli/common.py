"""What the command's features share: the engine options and typed configs from args."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any, TypeVar

from ..engines import Engine, make_engine
from ..engines.spark.session import SparkSettings

T = TypeVar("T")


def engine_options(p: argparse.ArgumentParser, default: str = "spark") -> None:
    """--engine and --spark-conf; `auto` is offered when it is the default (`engines.choose`)."""
    auto = " (auto: in process when the input fits this machine's memory and no cluster is configured)"  # fmt: skip
    p.add_argument(
        "--engine",
        choices=(["auto"] if default == "auto" else []) + ["spark", "inprocess"],
        default=default,
        help=f"execution engine (default: {default})" + (auto if default == "auto" else ""),
    )
    p.add_argument(
        "--spark-conf", default=None, help="Spark settings YAML (default: local[*], 4g driver)"
    )


def engine_of(args: argparse.Namespace) -> Engine:
    return make_engine(args.engine, SparkSettings.load(args.spark_conf))


def config_of(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """A typed (dataclass) config from the namespace's fields of the same names."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return cls(**{n: getattr(args, n) for n in names if hasattr(args, n)} | given)


def engines(text: str) -> tuple[str, ...]:
    return tuple(e.strip() for e in text.split(",") if e.strip())
