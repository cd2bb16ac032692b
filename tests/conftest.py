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
