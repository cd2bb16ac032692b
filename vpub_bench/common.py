"""What the experiments share: the options every comparison's config declares (read by
`vpub_spark.options.parse_file`) and its sweeps, one seeded sampler of the input, one way to start an engine and time a run on it, and one way to report a
benchmark: its tables printed and kept in its JSON with the run's record (command, date,
machine), from which the docs' benchmark pages are generated (docs/benchmarks/)."""

from __future__ import annotations

import datetime
import functools
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
from typing import Any, ClassVar, TypeVar

from rich.table import Table

from vpub_spark.datasets.presets import resolve_table
from vpub_spark.engines import make_engine
from vpub_spark.engines.base import Engine, LoadedTable
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.engines.settings import SparkSettings
from vpub_spark.errors import SpecError
from vpub_spark.options import option
from vpub_spark.report import console
from vpub_spark.version import __version__

T = TypeVar("T")


def read_sweeps(
    v: Any, key: str, *, parameters: Sequence[str], fixable: bool = False
) -> tuple[tuple, ...]:
    """A comparison's `compare.sweeps` (000 §6, 002 §4): each `{vary, values}` varies
    one parameter over values, the others at their defaults. With `fixable`, a sweep may
    also hold other parameters at values of its own (`{vary: marginal, values: [M1, M2],
    m: 2}`); such a sweep is a 3-tuple (vary, values, fixed).

    Args:
        v: the YAML list.
        key: its dotted key, for the errors.
        parameters: the parameters a sweep may vary.
        fixable: whether a sweep may fix other parameters.

    Returns:
        The sweeps, as (vary, values) or (vary, values, fixed) tuples.

    Raises:
        SpecError: not a non-empty list of such sweeps.
    """
    if not isinstance(v, list | tuple) or not v:
        raise SpecError(f"{key} must be a non-empty list of {{vary, values}} mappings")
    sweeps: list[tuple] = []
    for s in v:
        if not isinstance(s, dict) or s.get("vary") not in parameters or not s.get("values"):
            raise SpecError(
                f"{key}: each sweep needs vary (one of {', '.join(parameters)}) and values"
            )
        fixed = {k: x for k, x in s.items() if k not in ("vary", "values")}
        if set(fixed) - set(parameters) or (fixed and not fixable):
            allowed = f"parameters ({', '.join(parameters)})" if fixable else "nothing"
            raise SpecError(
                f"{key}: a sweep takes vary, values and {allowed}, not {', '.join(sorted(fixed))}"
            )
        values = tuple(s["values"])
        sweeps.append((s["vary"], values, fixed) if fixed else (s["vary"], values))
    return tuple(sweeps)


def sweeps_option(default: tuple[tuple, ...], parameters: Sequence[str], fixable: bool = False):
    """The `compare.sweeps` option of a comparison over `parameters` (`read_sweeps`)."""
    shown = ", ".join(f"{{vary: {s[0]}, values: {list(s[1])}}}" for s in default)
    return option(
        default,
        key="compare.sweeps",
        shown=f"[{shown}]",
        doc="the sweeps: each varies one parameter over its values",
        parse=functools.partial(read_sweeps, parameters=parameters, fixable=fixable),
    )


def sample_rows_option():
    """The `input.sample_rows` option of a comparison that may sample its input."""
    return option(None, key="input.sample_rows", minimum=1, doc="a seeded sample of the input")


def model_option(model: str):
    """The `privacy.model` option of a comparison of one privacy model."""
    return option(None, key="privacy.model", choices=(model,), doc=f"the privacy model ({model})")


@dataclass(frozen=True, kw_only=True)
class ComparisonConfig:
    """What every comparison's config file holds (`vpub compare`): its input, output,
    seed, methods, sweeps, repeats and workload. A comparison subclasses it with its
    methods, its parameters (`PARAMETERS`, fields of the same names) and its section;
    `parse_file` reads the YAML by these options."""

    PARAMETERS: ClassVar[tuple[str, ...]] = ()
    engine: str = option(
        "inprocess", choices=("inprocess",), doc="comparisons run the in-process kernels"
    )
    input_path: str = option(key="input.path", required=True, doc="the input table's path")
    table: str | None = option(None, key="input.table", doc="its table spec or preset")
    input_format: str | None = option(None, key="input.format", doc="its format")
    out: str = option("out/compare", key="output.path", doc="where the results go")
    seed: int = option(1, doc="the seed of every draw")
    model: str | None = option(None, key="privacy.model", doc="the privacy model's name")
    methods: tuple[str, ...] = ()
    sweeps: tuple[tuple, ...] = ()
    repeats: int = option(1, key="compare.repeats", minimum=1, doc="repeats of each point")
    queries: int = option(1000, key="compare.queries", minimum=1, doc="the workload's size")

    @property
    def defaults(self) -> dict[str, Any]:
        """Each parameter's value where a sweep does not vary it."""
        return {p: getattr(self, p) for p in self.PARAMETERS}


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


def spark_archive_built() -> bool | None:
    """Whether the Spark driver's class-data archive for this Java and this Spark is
    built (`vpub spark-archive`; a Spark session's first jobs are slower without it),
    or None where Spark is not installed."""
    try:
        from vpub_spark.engines import class_archive_path

        return class_archive_path().is_file()
    except ImportError:
        return None


def run_record() -> dict:
    """The benchmark run's record: its command line as typed after `vpub`, the date
    (UTC), and the machine (cores, memory, CPU, OS, Python, this software's version,
    `reference_seconds`, `spark_archive_built`). No host name and no path of this machine beyond what the
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
            "spark_class_archive": spark_archive_built(),
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
