import pytest


@pytest.fixture(scope="session")
def spark():
    """One local[2] session for the whole run (UI off, Arrow on, few shuffle partitions)."""
    from vpub_spark.engines.spark.session import SparkSettings, get_session

    session = get_session(
        SparkSettings(master="local[2]", driver_memory="2g", shuffle_partitions=4)
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_engine(spark):
    from vpub_spark.engines.spark.engine import SparkEngine

    return SparkEngine()


@pytest.fixture
def inprocess():
    from vpub_spark.engines.inprocess import InProcessEngine

    return InProcessEngine()


def pytest_configure(config):
    """Point pyarrow and boto3 at the loopback S3 server (`s3`) before anything starts."""
    import os

    from s3_helpers import test_environment

    for k, v in test_environment().items():
        os.environ[k] = v  # hermetic: never a real account
    # run records (the secret seeds, release/secret.py) go to an owner-only directory of
    # this run, never to the tester's own
    import tempfile

    os.environ["VPUB_PRIVATE_DIR"] = tempfile.mkdtemp(prefix="vpub-private-")
    os.environ.setdefault("VPUB_LOG_DIR", tempfile.mkdtemp(prefix="vpub-logs-"))  # Spark's logs


@pytest.fixture(scope="session")
def s3():
    """A real S3-compatible server on loopback (tests/s3_helpers.py), on the port the
    environment names."""
    import os
    from urllib.parse import urlparse

    from s3_helpers import s3_server

    with s3_server(urlparse(os.environ["AWS_ENDPOINT_URL"]).port) as env:
        yield env


SLOWEST_FIRST = (  # files whose tests take a minute or more (pytest --durations), first
    "tests/cli/test_fuzz_cli.py",
    "tests/deploy/test_cluster.py",
    "tests/deploy/test_airflow_dag.py",
    "tests/engines/test_spark_archive.py",
    "tests/lake/test_table_inputs.py",
    "tests/deploy/test_spark_connect.py",
    "tests/release/test_export_sql.py",
    "tests/faults/test_faults.py",
    "tests/test_notebook_tutorial.py",
    "tests/publish/test_publish_spark.py",
    "tests/decompose/test_gd.py",
)
SPLIT = ("tests/cli/test_fuzz_cli.py",)  # independent slow tests: one group each


def pytest_collection_modifyitems(config, items):
    """For `make test`'s two xdist workers (`--dist loadgroup`): each file is one group,
    so its module fixtures (a cluster, a Spark Connect server) start once, but the
    fuzzers' tests are a group each; the slowest files are handed out first, so that
    neither worker is left alone with a long file at the end (25.5 min with files in
    collection order, measured)."""
    for item in items:
        path = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(item.nodeid if path in SPLIT else path))
    rank = {f: i for i, f in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
