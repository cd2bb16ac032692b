"""`vpub bench cold`: the wall time of whole `vpub publish` commands, each in a new
process, so every Spark run pays its JVM start (the target: Adult on Spark in 8 s
with start-up). Variants run in turn within each round (paired): Spark with the
class-data archive (`vpub spark-archive`, built first and not timed), Spark without one
(an empty `VPUB_CACHE`), Spark with the archive but its JVM started only after the
data libraries are imported (`VPUB_SPARK_EARLY=0`, `cli/early.py`), and in process for
reference.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from vpub_spark.errors import VpubError
from vpub_spark.publishing.spark_archive import build_archive
from vpub_spark.report import console

from .common import BenchTable, write_results


@dataclass(frozen=True)
class BenchCold:
    config: str = "conf/adult_uad.yaml"
    repeat: int = 5
    out: str = "out/bench-cold"


def _publish_seconds(config: str, engine: str, out: Path, env: dict[str, str]) -> float:
    """One `vpub publish` in a new process: its wall time from start to the process's exit
    (what a shell sees). Spark's JVM, which shares its standard error, may take a moment
    longer to exit; the next run starts only once it has, so no two runs overlap."""
    cmd = [
        sys.executable,
        "-m",
        "vpub_spark.cli",
        "publish",
        "--config",
        config,
        "--engine",
        engine,
        "--out",
        str(out),
        "--overwrite",
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    errors: list[str] = []
    drain = threading.Thread(target=lambda: errors.extend(proc.stderr or []))
    drain.start()
    code = proc.wait()
    took = time.perf_counter() - t0
    drain.join()  # standard error closes when the JVM has exited too
    if code != 0:
        raise VpubError(
            f"vpub publish failed: {(''.join(errors).strip().splitlines() or ['?'])[-1]}"
        )
    return took


def bench_cold(bench: BenchCold) -> dict:
    archive, _ = build_archive()
    out = Path(bench.out)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="vpub-no-archive-") as empty:
        variants = {
            "spark, class-data archive": ("spark", dict(os.environ)),
            "spark, class-data archive, JVM started after the imports": (
                "spark",
                dict(os.environ) | {"VPUB_SPARK_EARLY": "0"},
            ),
            "spark, no archive": ("spark", dict(os.environ) | {"VPUB_CACHE": empty}),
            "inprocess": ("inprocess", dict(os.environ)),
        }
        for i in range(bench.repeat):
            for name, (engine, env) in variants.items():
                with console.status(f"round {i + 1} of {bench.repeat}: {name} ..."):
                    runs.setdefault(name, []).append(
                        _publish_seconds(bench.config, engine, out / "releases", env)
                    )
    table = _cold_table(bench, runs)
    results = {
        "config": bench.config,
        "archive_mib": round(archive.stat().st_size / 2**20),
        "runs_s": runs,
        "median_s": {k: statistics.median(v) for k, v in runs.items()},
    }
    return write_results(results, out / "cold.json", [table])


def _cold_table(bench: BenchCold, runs: dict[str, list[float]]) -> BenchTable:
    """`bench cold`'s table: each variant's median and runs, in seconds."""
    t = BenchTable(
        f"vpub publish --config {bench.config}, wall time per new process (median of {bench.repeat}, paired rounds)",
        ("variant", "median (s)", "runs (s)"),
        left=("variant", "runs (s)"),
    )
    for name, r in runs.items():
        t.add_row(name, f"{statistics.median(r):.2f}", " / ".join(f"{x:.2f}" for x in r))
    return t
