"""What the experiments share: one parser for comparison sweeps, one seeded sampler of
the input, one way to start an engine and time a run on it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..datasets.presets import resolve_table
from ..engines import make_engine
from ..engines.base import Engine, LoadedTable
from ..engines.inprocess import InProcessEngine
from ..engines.settings import SparkSettings
from ..errors import SpecError

T = TypeVar("T")


@dataclass(frozen=True)
class Sweeps:
    """A comparison's `compare:` section: the methods, each parameter's default, the
    sweeps (one parameter varied over values, the others at their defaults), repeats
    and workload size."""

    methods: tuple[str, ...]
    defaults: dict[str, Any]
    sweeps: tuple[tuple[str, tuple], ...]
    repeats: int
    queries: int

    def fields(self) -> dict[str, Any]:
        """The fields every comparison's config takes from its sweeps, by name."""
        return {
            f: getattr(self, f) for f in ("methods", "defaults", "sweeps", "repeats", "queries")
        }


def parse_sweeps(
    section: dict | None,
    *,
    parameters: Sequence[str],
    methods: Sequence[str],
    default_methods: Sequence[str],
    defaults: dict[str, Any],
    default_sweep: dict,
    default_repeats: int,
    where: str,
) -> Sweeps:
    """The `compare:` section of either comparison (000 §6, 002 §4), checked."""
    c = dict(section or {})
    chosen = tuple(c.pop("methods", default_methods))
    bad = [m for m in chosen if m not in methods]
    if bad:
        raise SpecError(f"{where}: unknown methods {bad}; choose from {', '.join(methods)}")
    defaults = dict(defaults) | {k: c.pop(k) for k in list(c) if k in parameters}
    sweeps = []
    for s in c.pop("sweeps", [default_sweep]):
        if not isinstance(s, dict) or s.get("vary") not in parameters or not s.get("values"):
            raise SpecError(
                f"{where}: each sweep needs vary (one of {', '.join(parameters)}) and values"
            )
        sweeps.append((s["vary"], tuple(s["values"])))
    repeats, queries = int(c.pop("repeats", default_repeats)), int(c.pop("queries", 1000))
    if c:
        raise SpecError(f"{where}: compare has unknown keys {', '.join(sorted(c))}")
    return Sweeps(chosen, defaults, tuple(sweeps), repeats, queries)


def check_keys(d: object, known: set[str], where: str) -> dict:
    if not isinstance(d, dict) or set(d) - known:
        extra = sorted(set(d) - known) if isinstance(d, dict) else []
        raise SpecError(
            f"{where}: unknown keys {', '.join(extra)}; known: {', '.join(sorted(known))}"
        )
    if "path" not in (d.get("input") or {}):
        raise SpecError(f"{where}: input.path is required")
    return d


def load_input(
    path: str, table: str | None, fmt: str | None, sample_rows: int | None, seed: int
) -> tuple[InProcessEngine, LoadedTable]:
    """The comparison's input in process, and its seeded sample without replacement
    when `sample_rows` is set (`engine.sample`: the sampler the publisher uses too)."""
    data, spec = resolve_table(path, table)
    engine = InProcessEngine()
    loaded = engine.load(data, spec, fmt)
    if sample_rows is not None:
        loaded = engine.sample(loaded, sample_rows, seed)
    return engine, loaded


def started_engine(name: str, spark_conf: str | None) -> tuple[Engine, float]:
    """An engine, and its start-up time (a Spark session), timed apart from the runs."""
    engine = make_engine(name, SparkSettings.load(spark_conf))
    return engine, engine.start()


def timed(run: Callable[[], T]) -> tuple[T, float]:
    """`run()`'s result and its wall time in seconds."""
    t0 = time.perf_counter()
    out = run()
    return out, time.perf_counter() - t0
