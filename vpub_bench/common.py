"""What the experiments share: one parser for comparison sweeps, one seeded sampler of
the input, one way to start an engine and time a run on it, and one way to report a
benchmark: its tables printed and kept in its JSON with the run's record (command, date,
machine), from which the docs' benchmark pages are generated (docs/benchmarks/)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rich.table import Table

from vpub_spark.datasets.presets import resolve_table
from vpub_spark.engines import make_engine
from vpub_spark.engines.base import Engine, LoadedTable
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.engines.settings import SparkSettings
from vpub_spark.errors import SpecError
from vpub_spark.options import refuse_unknown
from vpub_spark.report import console
from vpub_spark.version import __version__

T = TypeVar("T")


@dataclass(frozen=True)
class Sweeps:
    """A comparison's `compare:` section: the methods, each parameter's default, the
    sweeps (one parameter varied over values, the others at their defaults), repeats
    and workload size."""

    methods: tuple[str, ...]
    defaults: dict[str, Any]
    sweeps: tuple[tuple, ...]  # (vary, values) or (vary, values, fixed parameters)
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
    fixable: bool = False,
) -> Sweeps:
    """The `compare:` section of a comparison (000 §6, 002 §4), checked. With `fixable`,
    a sweep may also hold other parameters at values of its own (`{vary: marginal,
    values: [M1, M2], m: 2}`); such a sweep is a 3-tuple (vary, values, fixed)."""
    c = dict(section or {})
    chosen = tuple(c.pop("methods", default_methods))
    bad = [m for m in chosen if m not in methods]
    if bad:
        raise SpecError(f"{where}: unknown methods {bad}; choose from {', '.join(methods)}")
    defaults = dict(defaults) | {k: c.pop(k) for k in list(c) if k in parameters}
    sweeps: list[tuple] = []
    for s in c.pop("sweeps", [default_sweep]):
        if not isinstance(s, dict) or s.get("vary") not in parameters or not s.get("values"):
            raise SpecError(
                f"{where}: each sweep needs vary (one of {', '.join(parameters)}) and values"
            )
        fixed = {k: v for k, v in s.items() if k not in ("vary", "values")}
        if set(fixed) - set(parameters) or (fixed and not fixable):
            allowed = f"parameters ({', '.join(parameters)})" if fixable else "nothing"
            raise SpecError(
                f"{where}: a sweep takes vary, values and {allowed}, not {', '.join(sorted(fixed))}"
            )
        sweeps.append(
            (s["vary"], tuple(s["values"]), fixed) if fixed else (s["vary"], tuple(s["values"]))
        )
    repeats, queries = int(c.pop("repeats", default_repeats)), int(c.pop("queries", 1000))
    if c:
        raise SpecError(f"{where}: compare has unknown keys {', '.join(sorted(c))}")
    return Sweeps(chosen, defaults, tuple(sweeps), repeats, queries)


def check_keys(d: object, known: set[str], where: str) -> dict:
    """A comparison's config `d`, its keys checked (`model.refuse_unknown`), with an input."""
    if not isinstance(d, dict):
        raise SpecError(f"{where}: expected a mapping")
    refuse_unknown(d, sorted(known), f"{where}: the config")
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


def started_engine(
    name: str, spark_conf: str | None, workers: int | None = None
) -> tuple[Engine, float]:
    """An engine (in process: with `workers`), and its start-up time (a Spark session),
    timed apart from the runs."""
    engine = make_engine(name, SparkSettings.load(spark_conf), workers)
    return engine, engine.start()


def timed(run: Callable[[], T]) -> tuple[T, float]:
    """`run()`'s result and its wall time in seconds."""
    t0 = time.perf_counter()
    out = run()
    return out, time.perf_counter() - t0


@dataclass
class BenchTable:
    """A benchmark's table of figures: printed (rich) and kept, as text cells, in its JSON
    (`write_results`), so the docs show what the console showed."""

    title: str
    columns: Sequence[str]
    left: Container[str] = ()
    rows: list[list[str]] = field(default_factory=list)

    def add_row(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def print(self) -> None:
        t = Table(title=self.title)
        for c in self.columns:
            t.add_column(c, justify="left" if c in self.left else "right")
        for row in self.rows:
            t.add_row(*row)
        console.print(t)

    def as_dict(self) -> dict:
        return {"title": self.title, "columns": list(self.columns), "rows": self.rows}


def _memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def reference_seconds() -> dict[str, float]:
    """The machine's speed when the run ended: medians of 3 timings of two reference
    kernels, a NumPy sort of 4M seeded random int64 and a pure-Python loop of 1M
    additions, so that runs on a shared machine of varying speed can be told apart
    (decision: compare a figure with another run's only together with these)."""
    import numpy as np

    values = np.random.default_rng(0).integers(0, 2**62, 4_000_000)

    def python_loop() -> None:
        total = 0
        for i in range(1_000_000):
            total += i

    kernels = {"numpy_sort_4m_s": lambda: np.sort(values), "python_loop_1m_s": python_loop}
    return {
        name: round(statistics.median(timed(k)[1] for _ in range(3)), 3)
        for name, k in kernels.items()
    }


def run_record() -> dict:
    """The benchmark run's record: its command line as typed after `vpub`, the date
    (UTC), and the machine (cores, memory, CPU, OS, Python, this software's version,
    `reference_seconds`). No host name and no path of this machine beyond what the
    command line holds."""
    return {
        "command": "vpub " + shlex.join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "cores": os.cpu_count(),
            "memory_gib": round(_memory_gib(), 1),
            "cpu": _cpu_model(),
            "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(),
            "vpub": __version__,
            "reference": reference_seconds(),
        },
    }


def write_results(
    results: dict,
    path: Path,
    tables: Sequence[BenchTable] = (),
    default: Callable[[Any], Any] | None = None,
) -> dict:
    """Print a benchmark's tables and write its results as JSON to `path` (its directory
    made if missing), with the run's record and the tables; say where; the results as
    written."""
    for t in tables:
        t.print()
    results = {"run": run_record(), **results, "tables": [t.as_dict() for t in tables]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=default) + "\n")
    console.print(f"results in {path}")
    return results


def optional(module: str) -> Any:
    """A module of the `bench` extra (matplotlib, aiohttp), imported when a run needs it.

    Args:
        module: its dotted name.

    Returns:
        The module.

    Raises:
        SpecError: it is not installed (one line naming the extra).
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise SpecError(
            f"this run needs {module.split('.')[0]}: pip install 'vpub_spark[bench]'"
        ) from None
