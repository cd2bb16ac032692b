"""The Spark driver's class-data archive: `vpub spark-archive` builds it once,
atomically, and a driver JVM started afterwards maps Spark's classes from it. The
build's failure modes (an unwritable cache) have a test of their own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vpub_spark.engines.spark.session import SparkSettings, class_archive, driver_java_options
from vpub_spark.publishing.spark_archive import build_archive

pytestmark = pytest.mark.spark

# a child: Spark started with -Xshare:on (the JVM refuses to start unless it maps the
# archive), logging where every class came from
CHILD = """
import sys
from vpub_spark.engines.spark.session import SparkSettings, driver_java_options, get_session
options = driver_java_options(SparkSettings()) + " -Xshare:on -Xlog:class+load=info:file=" + sys.argv[1]
spark = get_session(SparkSettings(master="local[1]", conf=(("spark.driver.extraJavaOptions", options),)))
print(spark.range(5).count())
"""


def test_the_archive_is_built_once_and_the_driver_maps_sparks_classes_from_it(
    tmp_path, monkeypatch
):
    """The suite's archive (`make test` builds it with `vpub spark-archive` before the
    suite, in the suite's cache; built here when the suite runs without it)."""
    with monkeypatch.context() as empty:
        empty.setenv("VPUB_CACHE", str(tmp_path / "cache"))
        assert "SharedArchiveFile" not in driver_java_options(SparkSettings())  # none there
    path, _ = build_archive()
    assert path == class_archive() and path.stat().st_size > 20 * 2**20
    assert not list(path.parent.glob(".*.tmp"))  # no temporary left
    assert build_archive() == (path, 0.0)  # built once
    assert f"-XX:SharedArchiveFile={path}" in driver_java_options(SparkSettings())
    log = tmp_path / "classes.log"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(log)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("5"), done.stderr[-2000:]
    # Spark's classes are mapped, but for lambdas (generated as the JVM runs) and the few
    # that only this child's job uses (spark.range): measured 4,541 of 4,560
    lines = [
        x for x in log.read_text().splitlines() if " org.apache.spark." in x and "$$Lambda" not in x
    ]
    mapped = [x for x in lines if "source: shared objects file (top)" in x]
    assert len(lines) > 1000 and len(mapped) >= 0.95 * len(lines)


def test_an_unwritable_cache_is_one_clear_error(tmp_path, monkeypatch):
    from vpub_spark.errors import StorageError

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("VPUB_CACHE", str(tmp_path / "file" / "cache"))  # under a file
    with pytest.raises(StorageError, match="set VPUB_CACHE to a writable directory"):
        build_archive()
