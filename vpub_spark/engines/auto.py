"""`engine: auto`: in process when the input fits this machine's memory, no cluster is
configured and the time model does not predict Spark faster on this machine's cores;
Spark otherwise. The choice is returned with its reason.

The memory estimate, the time model, their constants and the measurements they were
fitted on: docs/how-to/choose-engine.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .files import data_files, detect_format

BASE_BYTES = 300 * 2**20  # the interpreter with its libraries
BYTES_PER_CELL = (
    30.0  # measured peak RSS per Parquet cell, in process (docs/how-to/choose-engine.md)
)
CSV_FACTOR = 15.0  # measured peak RSS per CSV byte, in process (docs/how-to/choose-engine.md)
SHARE = 0.5  # of the available memory
WORKER_BYTES = 120 * 2**20  # measured private memory of one worker (131k-row partitions)
INPROCESS_SERIAL_S = 0.12e-6  # seconds per row that do not shrink with more workers
INPROCESS_CORE_S = 0.67e-6  # core-seconds per row on the workers
SPARK_FIXED_S = 7.5  # a local session's start-up and a publish's fixed cost
SPARK_CORE_S = 2.49e-6  # core-seconds per row in Spark's tasks
# A Spark run on an input whose in-process estimate, less the interpreter, is at most this
# is "small" (C1-only JIT in the driver, `spark/session.py`): measured faster with C1 at
# Adult (an estimated 80 MB) and at 100k `sal` rows (24 MB), slower at 1M rows (240 MB).
SMALL_BYTES = 100 * 2**20


@dataclass(frozen=True)
class Choice:
    engine: str  # "inprocess" | "spark"
    reason: str
    peak: int | None = None  # the in-process estimate without workers, when it was needed


def available_memory() -> int:
    """Bytes of memory this process may still use: MemAvailable, capped by a cgroup limit."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    if avail is None:
        avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            avail = min(avail, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(avail, 0)


def input_size(path: str | Path) -> tuple[int, int, str]:
    """(rows, bytes of in-process peak memory before workers, how it was read): Parquet
    from its footers; CSV from its size, its rows estimated from its first MiB's lines."""
    import pyarrow.parquet as pq

    kind = detect_format(path)
    files = data_files(path, kind)
    if kind == "parquet":
        cells = rows = 0
        for f in files:
            meta = pq.read_metadata(f)
            cells += meta.num_rows * meta.num_columns
            rows += meta.num_rows
        return rows, BASE_BYTES + int(cells * BYTES_PER_CELL), f"{cells:,} Parquet cells"
    size = sum(Path(f).stat().st_size for f in files)
    return (
        _csv_rows(files, size),
        BASE_BYTES + int(size * CSV_FACTOR),
        f"{size / 1e6:,.0f} MB of CSV",
    )


def _csv_rows(files: list[str], size: int) -> int:
    head = b""
    for f in files:
        with open(f, "rb") as stream:
            head += stream.read(2**20 - len(head))
        if len(head) >= 2**20:
            break
    lines = head.count(b"\n")
    return int(size * lines / len(head)) if head and lines else 0


def estimated_peak(path: str | Path, workers: int = 0) -> tuple[int, str]:
    """The in-process engine's estimated peak memory for this input on `workers`
    workers, and how the input was read."""
    _, peak, what = input_size(path)
    return peak + workers * WORKER_BYTES, what


def predicted_seconds(rows: int, cores: int) -> tuple[float, float]:
    """(in process on `cores` workers, Spark on local[`cores`]) for `rows` rows, by the
    time model of docs/how-to/choose-engine.md."""
    inprocess = INPROCESS_SERIAL_S * rows + INPROCESS_CORE_S * rows / cores
    return inprocess, SPARK_FIXED_S + SPARK_CORE_S * rows / cores


def small_input(path: str | Path, peak: int | None = None) -> bool:
    """Whether a Spark run on this input counts as small (`SMALL_BYTES`), from its
    estimate (`peak`, else read here); False when the input cannot be sized here (the read
    reports what is wrong with it)."""
    from ..errors import VpubError

    try:
        peak = estimated_peak(path)[0] if peak is None else peak
    except (VpubError, OSError, ValueError):
        return False
    return peak - BASE_BYTES <= SMALL_BYTES


def _cluster(master: str) -> bool:
    return bool(master) and not master.startswith("local")


def choose_engine(input_path: str, master: str, workers: int | None = None) -> Choice:
    """The engine for this input (docs/how-to/choose-engine.md); `workers`: the in-process
    engine's (default: `VPUB_WORKERS`, else every core)."""
    from .pool import available_cores, default_workers

    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return Choice("spark", "auto: running under spark-submit")
    if _cluster(master):
        return Choice("spark", f"auto: a cluster master is configured ({master})")
    workers, cores = default_workers(workers), available_cores()
    rows, alone, what = input_size(input_path)
    peak = alone + workers * WORKER_BYTES
    avail = available_memory()
    fits = peak <= SHARE * avail
    here, spark = predicted_seconds(rows, cores)
    faster = here <= spark
    memory = f"an estimated {peak / 2**30:,.1f} GiB in process on {workers} worker(s), {'fits' if fits else 'does not fit'} in {SHARE:.0%} of the {avail / 2**30:,.1f} GiB available"
    speed = f"predicted {here:,.1f} s in process against {spark:,.1f} s on Spark with {cores} cores"
    engine = "inprocess" if fits and faster else "spark"
    return Choice(engine, f"auto: {what}, {memory}; {speed}", alone)
