from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# the suite runs two workers on two cores beside JVMs: generating inputs may be slow, and
# strategies that keep eligible tables only filter many out; neither is a failure
settings.register_profile(
    "suite", suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
settings.load_profile("suite")


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
    # the suite's cache beside the checkout, never the tester's own (`make test` sets the
    # same and builds the Spark driver's class-data archive in it first)
    root = Path(__file__).resolve().parents[1]
    os.environ.setdefault("VPUB_CACHE", str(root / ".cache" / "vpub"))


@pytest.fixture(scope="session")
def s3():
    """A real S3-compatible server on loopback (tests/s3_helpers.py), on the port the
    environment names."""
    import os
    from urllib.parse import urlparse

    from s3_helpers import s3_server

    with s3_server(urlparse(os.environ["AWS_ENDPOINT_URL"]).port) as env:
        yield env
