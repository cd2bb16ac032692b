"""What the command's features share: the engine options and typed configs from args."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

from ..engines import Engine, make_engine
from ..engines.settings import SparkSettings

T = TypeVar("T")


def engine_options(p: argparse.ArgumentParser, default: str = "spark") -> None:
    """--engine and --spark-conf; `auto` is offered when it is the default (`engines.choose`)."""
    auto = (
        " (auto: in process when the input fits this machine's memory and no cluster is configured)"
    )
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


def whole_number(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number >= `minimum` (and <= `maximum`; anything else:
    argparse's usage line and one line naming the option, exit 2).

    Args:
        minimum: the smallest value accepted.
        maximum: the largest value accepted, or None for no bound.

    Returns:
        The parser of one argument.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, not {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, not {value}")
        return value

    parse.__name__ = f"whole number >= {minimum}"
    return parse


SEED = whole_number(0)  # seeds of NumPy's generators and of the keyed hashes


def seed_options(p: argparse.ArgumentParser) -> None:
    """--seed, --seed-file and --private-dir: the release seed is a secret
    (release/secret.py); without them every run draws one from the operating system."""
    p.add_argument(
        "--seed",
        type=SEED,
        default=None,
        help="an explicit seed (reproducible; keep it private); default: a secret one drawn per run",
    )
    p.add_argument(
        "--seed-file", default=None, metavar="FILE", help="read the seed from this owner-only file"
    )
    p.add_argument(
        "--private-dir",
        default=None,
        metavar="DIR",
        help="where the run record keeps the seed (default: $VPUB_PRIVATE_DIR or ~/.local/state/vpub)",
    )


def warn_explicit_seed(seed: int | None) -> None:
    """Said once per run, with the run's output (stderr keeps one line per error), when
    the owner gave the seed itself."""
    from ..release.secret import WARNING
    from ..report import console

    if seed is not None:
        console.print(f"[yellow]note:[/yellow] {WARNING}", soft_wrap=True)


def seed_origin(cfg: Any) -> str:
    """How the run gets its seed, never its value."""
    if cfg.seed is not None:
        return "seed: given (private)"
    return (
        "seed: from the seed file (private)"
        if cfg.seed_file
        else "seed: secret, drawn for this run"
    )


def job_engine(cfg: Any) -> tuple[Any, Engine, str]:
    """A job config's engine (`engine: auto` decided by its input and Spark settings):
    the config naming the engine chosen, the engine, and why it was chosen."""
    from dataclasses import replace

    from ..engines import engine_for
    from ..storage import local_path

    engine, why = engine_for(
        cfg.engine, SparkSettings.load(cfg.spark), local_path(cfg.input_path), cfg.workers
    )
    return replace(cfg, engine=engine.name), engine, why
