"""Build the SparkSession from `conf/spark.yaml` settings (docs/explanation/architecture.md).

`local[*]` by default; under spark-submit its settings win. The driver memory is always
set explicitly, the JVM's stderr goes to a log file (docs/explanation/fault-injection.md),
and the driver starts from a class-data archive and, on a small input, with C1 only
(decisions and measurements: docs/explanation/performance.md, "A cold Spark publish").
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from ...errors import VpubError
from ..settings import DEFAULT_CONF, SparkSettings


@functools.cache
def java_version_text() -> str | None:
    """What `java -version` prints (None: no Java found)."""
    java = (
        Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if os.environ.get("JAVA_HOME")
        else shutil.which("java")
    )
    if not java or not Path(java).exists():
        return None
    return subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr


def java_major_version() -> int | None:
    out = java_version_text()
    if out is None:
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major


def require_java() -> None:
    v = java_major_version()
    if v is None:
        raise VpubError(
            "Java was not found: install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    if v < 17:
        raise VpubError(f"Java {v} found; Spark 4 needs Java 17 or newer (set JAVA_HOME)")


def class_archive() -> Path:
    """Where the driver JVM's class-data archive for this Java and this Spark installation
    lives (in `storage.cache_root()`). An archive that no longer matches (a
    Java update, moved jars) is ignored by the JVM, silently (`-Xshare:auto`)."""
    import hashlib

    import pyspark

    key = f"{java_version_text()}|{Path(pyspark.__file__).parent}|{pyspark.__version__}"
    from ...storage import cache_root

    return (
        cache_root()
        / f"spark-{pyspark.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsa"
    )


def driver_java_options(settings: SparkSettings, dump_archive: Path | None = None) -> str:
    """Our log4j2 configuration, the class-data archive (or, with `dump_archive`, the
    archive to write at exit), and C1-only compilation for a small input."""
    log4j = Path(__file__).with_name("log4j2.properties")
    options = [f"-Dlog4j2.configurationFile={log4j.as_uri()}", "-Xlog:cds*=off"]
    archive = class_archive()
    if dump_archive is not None:
        options.append(f"-XX:ArchiveClassesAtExit={dump_archive}")
    elif archive.is_file():
        options += ["-Xshare:auto", f"-XX:SharedArchiveFile={archive}"]
    if settings.small_input:
        options.append("-XX:TieredStopAtLevel=1")
    return " ".join(options)


def run_archiving(out: Path, work) -> int:
    """Start the session with the archive to write at exit (`out`), run `work`, then
    close the JVM's input so it exits (and writes the archive); its exit status."""
    from pyspark import SparkContext

    spark = get_session(SparkSettings(), dump_archive=out)
    work()
    proc = SparkContext._gateway.proc  # type: ignore[union-attr]
    spark.stop()
    proc.stdin.close()  # Spark's gateway exits on end of input
    return proc.wait(timeout=900)


_EARLY: list[threading.Thread] = []


def start_early(settings: SparkSettings) -> None:
    """Build the session for `settings` in a background thread, now: the driver JVM
    boots (its own process) while this one imports the data libraries, which it would
    otherwise do first. `get_session` waits for it; if it failed, `get_session` builds
    again and reports the error. Nothing happens under spark-submit or the second time.
    (Starting the Python workers' daemon from that thread too, with a one-task job while
    the caller plans its first query, measured no gain: 7.82 against 7.70 s, medians of 5
    paired Adult runs.)"""
    if _EARLY or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    thread = threading.Thread(
        target=_build_quietly, args=(settings,), name="vpub-spark-start", daemon=True
    )
    _EARLY.append(thread)
    thread.start()


def _build_quietly(settings: SparkSettings) -> None:
    try:
        get_session(settings)
    except Exception:  # the caller's own get_session reports it
        pass


def get_session(settings: SparkSettings | None = None, dump_archive: Path | None = None):
    """The active session, or a new one built from `settings` (`dump_archive`: the JVM
    writes its class-data archive there when it exits; see `class_archive`). A session
    `start_early` is building is waited for, whatever `settings` say."""
    if _EARLY and threading.current_thread() is not _EARLY[0]:
        _EARLY[0].join()
    from pyspark.sql import SparkSession

    settings = settings or SparkSettings()
    if (url := settings.remote_url) is not None:
        return _connect(url, settings)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    require_java()
    # Python workers must run the interpreter that has vpub_spark installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = dict(DEFAULT_CONF)
    conf["spark.master"] = settings.master
    conf["spark.app.name"] = settings.app_name
    conf["spark.driver.memory"] = settings.driver_memory
    if settings.shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(settings.shuffle_partitions)
    conf["spark.driver.extraJavaOptions"] = driver_java_options(settings, dump_archive)
    conf.update(dict(settings.conf))
    submitted = _submitted_conf()
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        _launch_logged(conf)
    _quiet_python_logs()
    builder = SparkSession.builder
    for k, v in conf.items():
        if k not in submitted:  # what spark-submit was told wins over our defaults
            builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")  # a classic session: Spark Connect returned above
    return spark


# what a session sets over Spark Connect: the SQL settings among ours (the others, and
# `master`, are the server's; docs/how-to/spark-connect.md); a session's Hadoop settings
# are its SQL settings without the `spark.hadoop.` prefix
_HADOOP = "spark.hadoop."
_SESSION_CONF = (
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.sql.execution.arrow.maxRecordsPerBatch",
    "spark.sql.session.timeZone",
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs",
)


def _connect(url: str, settings: SparkSettings):
    """A Spark Connect session to `url` with our SQL settings (and the shuffle
    partitions and `spark.sql.*` ones `settings` give); no JVM, no py4j here."""
    from pyspark.sql import SparkSession

    conf = {k: v for k, v in DEFAULT_CONF.items() if k in _SESSION_CONF}
    if settings.shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(settings.shuffle_partitions)
    conf |= {k: v for k, v in settings.conf if k.startswith(("spark.sql.", _HADOOP))}
    try:
        spark = SparkSession.builder.remote(url).getOrCreate()
        for key, value in conf.items():
            spark.conf.set(key.removeprefix(_HADOOP), value)
    except Exception as e:  # pyspark's and gRPC's: the server is not there, or refuses
        if not type(e).__module__.startswith(("pyspark", "grpc")):
            raise
        first = next((x.strip() for x in str(e).splitlines() if x.strip()), type(e).__name__)
        raise VpubError(f"Spark Connect server {url}: {first}") from None
    _quiet_python_logs()
    return spark


def is_connect(spark) -> bool:
    """Whether `spark` is a Spark Connect session (no `sparkContext`, no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


_PARALLELISM: dict[str, int] = {}


def default_parallelism(spark) -> int:
    """The session's default parallelism (its cores in local mode): `sparkContext`'s, or,
    over Spark Connect, the partitions of a `range` (which has that many), asked once."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    if spark.session_id not in _PARALLELISM:
        from pyspark.sql import functions as F

        ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
        _PARALLELISM[spark.session_id] = max(1, ids.distinct().count())
    return _PARALLELISM[spark.session_id]


_LOG: list[Path] = []


def log_file() -> Path | None:
    """The file the driver JVM's stderr goes to (Spark's error logs, the JVM's warnings,
    the Python workers' stderr), when this process started the JVM."""
    return _LOG[-1] if _LOG else None


def log_size() -> int:
    """The log's size now (0 without a log): where what happens next starts."""
    path = log_file()
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def log_details(since: int = 0) -> str:
    """` (details in <log>)` when the log holds an error past byte `since`, else ''."""
    path = log_file()
    return f" (details in {path})" if path is not None and _has_errors(path, since) else ""


_ERROR_LINE = re.compile(rb"\bERROR\b|Exception|Error|Traceback")


def _has_errors(path: Path, since: int = 0) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(max(since, path.stat().st_size - (1 << 20)))  # at most the last MiB
            return bool(_ERROR_LINE.search(f.read()))
    except OSError:
        return False


def _new_log() -> Path | None:
    """A new owner-only log file in `$VPUB_LOG_DIR` (default: `vpub-logs-<user id>` in
    the temporary directory); None when it cannot be made. A directory that is not this
    user's alone (another user made it first in a shared /tmp) is never written into: a
    new private one is made instead, so no one else can read the log or plant a link."""
    import secrets
    import tempfile
    import time

    uid = os.getuid() if hasattr(os, "getuid") else 0
    root = Path(os.environ.get("VPUB_LOG_DIR") or Path(tempfile.gettempdir()) / f"vpub-logs-{uid}")
    name = f"spark-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}.log"
    try:
        if not _private_dir(root):
            root = Path(tempfile.mkdtemp(prefix="vpub-logs-"))
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        os.close(os.open(root / name, flags, 0o600))
    except OSError:
        return None
    return root / name


def _private_dir(root: Path) -> bool:
    """Whether `root` is a real directory of this user's, closed to others (made so when
    it does not exist)."""
    import stat

    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(root)
    mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return stat.S_ISDIR(st.st_mode) and mine and not st.st_mode & 0o077


def _launch_logged(conf: dict[str, str]) -> None:
    """Start the driver JVM (pyspark's gateway, with `conf`) with its stderr in a log file
    (`log_file`), not on the terminal; removed at exit when it holds no error. Nothing
    happens once a JVM runs (a stopped session's is reused), or under spark-submit."""
    import atexit

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or (path := _new_log()) is None:
        return
    _LOG.append(path)  # first: a JVM that fails to start says why in it
    atexit.register(_drop_quiet_log, path)
    with open(path, "ab") as err:
        gateway = launch_gateway(
            SparkConf(loadDefaults=False).setAll(list(conf.items())), popen_kwargs={"stderr": err}
        )
    SparkContext._ensure_initialized(gateway=gateway)


def _drop_quiet_log(path: Path) -> None:
    if not _has_errors(path):
        path.unlink(missing_ok=True)


def _quiet_python_logs() -> None:
    """pyspark's own reports off the terminal, as they repeat an error that is raised
    (and shown as one line, `errors.spark_errors`): its warning before a failed Arrow
    conversion (a traceback) is not shown, and the JSON its query-context loggers write
    for a failed query goes to the Spark log (`log_file`), or nowhere."""
    import logging
    import warnings

    from pyspark.logger import PySparkLogger

    warnings.filterwarnings(
        "ignore", message=r".*attempted Arrow optimization.*can not continue", category=UserWarning
    )
    path = log_file()
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logger = PySparkLogger.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        logger.addHandler(logging.FileHandler(path, delay=True) if path else logging.NullHandler())


def _submitted_conf() -> set[str]:
    """Keys spark-submit already set: under spark-submit the JVM (and its conf) exists first."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return set()
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connect to spark-submit's JVM: SparkConf() then reads its settings
    return {k for k, _ in SparkConf().getAll()}
