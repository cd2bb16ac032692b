"""`engine: auto`: in process when the input fits this machine's memory and
no cluster is configured, Spark otherwise; the choice is returned with its reason.

Decision, from measurements (docs/how-to/choose-engine.md): the in-process engine's
peak memory is about `BASE_BYTES` plus `BYTES_PER_CELL` bytes per cell (row x column)
read from Parquet, or plus `CSV_FACTOR` times the file size for CSV. It is chosen when
that estimate stays under `SHARE` of the memory available now (MemAvailable, or the
container's limit if lower). Below that size in process is also the faster engine here
(Spark's start-up alone is 5-6 s), so there is no separate speed rule. A configured
cluster master (`spark.master` not `local[...]`) or a run under spark-submit always
means Spark.
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
# A Spark run on an input whose in-process estimate, less the interpreter, is at most this
# is "small" (C1-only JIT in the driver, `spark/session.py`): measured faster with C1 at
# Adult (an estimated 80 MB) and at 100k `sal` rows (24 MB), slower at 1M rows (240 MB).
SMALL_BYTES = 100 * 2**20


@dataclass(frozen=True)
class Choice:
    engine: str  # "inprocess" | "spark"
    reason: str
    peak: int | None = None  # the in-process estimate, when the choice needed it


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


def estimated_peak(path: str | Path) -> tuple[int, str]:
    """The in-process engine's estimated peak memory for this input, and how it was read."""
    import pyarrow.parquet as pq

    kind = detect_format(path)
    files = data_files(path, kind)
    if kind == "parquet":
        cells = 0
        for f in files:
            meta = pq.read_metadata(f)
            cells += meta.num_rows * meta.num_columns
        return BASE_BYTES + int(cells * BYTES_PER_CELL), f"{cells:,} Parquet cells"
    size = sum(Path(f).stat().st_size for f in files)
    return BASE_BYTES + int(size * CSV_FACTOR), f"{size / 1e6:,.0f} MB of CSV"


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


def choose_engine(input_path: str, master: str) -> Choice:
    """The engine for this input (see the module docstring)."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return Choice("spark", "auto: running under spark-submit")
    if _cluster(master):
        return Choice("spark", f"auto: a cluster master is configured ({master})")
    peak, what = estimated_peak(input_path)
    avail = available_memory()
    fits = peak <= SHARE * avail
    verdict = "fits" if fits else "does not fit"
    reason = f"auto: {what}, an estimated {peak / 2**30:,.1f} GiB in process, {verdict} in {SHARE:.0%} of the {avail / 2**30:,.1f} GiB available"
    return Choice("inprocess" if fits else "spark", reason, peak)
