"""`vpub spark-archive`: the Spark driver's class-data archive (JEP 350).

A JVM that starts Spark loads and verifies about 20,000 classes from its jars; that is
most of a cold run's fixed cost on a small input. Java 17 can write the classes it loaded
to an archive when it exits (`-XX:ArchiveClassesAtExit`), and a later JVM maps them
instead (`-XX:SharedArchiveFile`, used by `session.driver_java_options` when the archive
exists). Java 17 cannot build the archive by itself as it runs, so it is built once, here:
a child process publishes a small generated table (CSV and Parquet, UAD, the distributed
audit) on Spark and lets its JVM exit. The archive is written next to its final name and
renamed into place, so a half-written archive is never used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.csv as pv
import pyarrow.parquet as pq

from ..engines import class_archive_path, make_engine, run_archiving
from ..errors import StorageError, VpubError

ROWS = 20_000  # enough rows for every job of a publish, few enough to take seconds


def build_archive(force: bool = False) -> tuple[Path, float]:
    """The archive for this Java and this Spark, built unless it exists (or `force`); its
    path and the seconds the build took (0.0: it existed)."""
    target = class_archive_path()
    if target.is_file() and not force:
        return target, 0.0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(
            f"cannot write the class-data archive under {target.parent} ({e.strerror or e}); set VPUB_CACHE to a writable directory"
        ) from None
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(tmp)], capture_output=True, text=True, timeout=1800
        )
        if done.returncode != 0 or not tmp.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise VpubError(
                f"the class-data archive was not written (exit {done.returncode}): {last}"
            )
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target, time.perf_counter() - t0


def _inputs(tmp: Path) -> list[Path]:
    """A small generated `sal` table as Parquet and the same rows as CSV."""
    from ..datasets.presets import write_generated

    parquet = tmp / "parquet"
    write_generated(make_engine("inprocess"), "sal", ROWS, 1, str(parquet))
    csv = tmp / "csv"
    (csv / "data").mkdir(parents=True)
    shutil.copy(parquet / "table.yaml", csv / "table.yaml")
    pv.write_csv(pq.read_table(parquet / "data"), csv / "data" / "part-00000.csv")
    return [csv, parquet]


def _workload(tmp: Path) -> None:
    """Publish both inputs on Spark, then audit the last release in the engine's tasks."""
    from ..config import PublishConfig, RandomRules
    from ..model import PrivacySpec
    from ..release.audit.release import audit_release
    from .pipeline import publish

    engine = make_engine("spark")
    result = None
    for data in _inputs(tmp):
        cfg = PublishConfig(
            input_path=str(data),
            privacy=PrivacySpec("l-diversity", 4),
            rules=RandomRules(3, 2, 1),
            method="uad",
            engine="spark",
            output_path=str(tmp / "releases"),
            release_id=data.name,
            seed=1,
        )
        result = publish(cfg, engine)
    assert result is not None
    if not audit_release(result.path, engine=engine, distributed=True).passed:
        raise VpubError("the archive's workload published a release that failed its audit")


def main(out: str) -> int:
    """In the child: Spark with the archive to write at exit, the workload, the exit."""
    with tempfile.TemporaryDirectory(prefix="vpub-archive-") as tmp:
        return run_archiving(Path(out), lambda: _workload(Path(tmp)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
