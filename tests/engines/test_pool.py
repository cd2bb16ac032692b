"""The in-process engine on every core (engines/pool.py): every method's release is the
serial run's, byte for byte in its contents, whatever the worker count; row slices and
partial counts agree; errors in a worker reach the caller as raised; the worker count
is configured and checked."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from release_helpers import config, contents, job_table, same_contents, write_table

from vpub_spark.config import config_from_dict
from vpub_spark.engines import make_engine
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.engines.pool import available_cores, default_workers, run_tasks
from vpub_spark.errors import PrivacyError, SpecError
from vpub_spark.kernels.partitioning import ContentShards, combine_counts
from vpub_spark.publishing.pipeline import publish

SERIAL = InProcessEngine(workers=1)


def _pooled(workers: int) -> InProcessEngine:
    return InProcessEngine(workers=workers, min_rows=0)  # the pool even for small tables


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_table(job_table(7, 4000), tmp_path_factory.mktemp("pool") / "t")


RULES = ["age, zip -> job", "sex, job -> zip"]  # gd: anatomy and projections
METHODS = {
    "uad": {"rules": ["age, sex -> job", "zip -> job"]},  # one anatomy table
    "gd": {"method": "gd"},
    "rda": {
        "method": "rda",
        "streamliner": {"sensitive": "job", "qi": ["age", "zip"], "chunk_rows": 700},
    },
    "gda": {
        "method": "gda",
        "streamliner": {"sensitive": "job", "qi": ["age", "zip"], "chunk_rows": 700},
    },
    "ria": {
        "method": "ria",
        "streamliner": {"sensitive": "job", "qi": ["age", "zip"], "chunk_rows": 700},
    },
    "multi_sa_bip": {
        "rules": ["age, sex -> job", "age -> zip"],
        "method": "multi_sa_bip",
        "multi_sa": {"mode": "partitioned", "chunk_rows": 1000},
    },
}


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("workers", [2, 3])
def test_every_worker_count_publishes_the_serial_release(data, tmp_path, method, workers):
    kw = dict(partitions=4, **METHODS[method])
    rules = kw.pop("rules", RULES)
    serial = publish(config(data, tmp_path / "one", rules, 2, **kw), SERIAL)
    pooled = publish(config(data, tmp_path / "many", rules, 2, **kw), _pooled(workers))
    assert serial.manifest["partitions"] == pooled.manifest["partitions"] > 1
    assert serial.partitions is not None  # partitions ran, on the pool in `pooled`
    assert same_contents(contents(serial.path), contents(pooled.path))
    tables = [{k: v for k, v in t.items() if k != "parts"} for t in serial.manifest["tables"]]
    assert tables == [
        {k: v for k, v in t.items() if k != "parts"} for t in pooled.manifest["tables"]
    ]
    # the summary is the serial one, row for row (partition order kept), timings aside
    timing = [c for c in serial.partitions.columns if c == "task" or c.endswith("_s")]
    pd.testing.assert_frame_equal(
        serial.partitions.drop(columns=timing), pooled.partitions.drop(columns=timing)
    )
    assert pooled.audit.passed


def test_marginals_on_the_pool_equal_the_serial_release(data, tmp_path):
    def cfg(where):
        return config_from_dict(
            {
                "input": {"path": str(data)},
                "privacy": {"model": "m-invariance", "m": 3},
                "method": "marginals",
                "marginals": {
                    "sensitive": "job",
                    "schemas": [["age"], ["age", "zip"]],
                    "state": str(tmp_path / where / "store"),
                    "chunk_rows": 700,
                },
                "output": {"path": str(tmp_path / where / "out"), "release_id": "m"},
                "engine": "inprocess",
                "seed": 3,
            }
        )

    serial = publish(cfg("one"), SERIAL)
    pooled = publish(cfg("many"), _pooled(2))
    assert serial.manifest["method_cost"]["chunks"] > 1
    assert same_contents(contents(serial.path), contents(pooled.path))


def test_row_slices_and_partial_counts_agree_with_one_pass():
    frame = job_table(3, 5000).apply(lambda c: pd.factorize(c)[0].astype(np.int32))
    sharding = ContentShards(11, ("age", "zip", "sex"))
    loaded = type("Loaded", (), {"data": frame})()
    domains = {"job": int(frame["job"].max()) + 1}
    one = combine_counts(SERIAL.shard_counts(loaded, ["job"], sharding), ["job"], domains)
    for workers in (2, 5):
        many = combine_counts(
            _pooled(workers).shard_counts(loaded, ["job"], sharding), ["job"], domains
        )
        assert (many.rows == one.rows).all() and (many.values["job"] == one.values["job"]).all()
        assert many.hash_sum == one.hash_sum
        sliced = np.concatenate(_pooled(workers)._row_slices(frame, sharding.of))
        assert (sliced == sharding.of(frame)).all()

    # the plan's shards serve the partitions of a job with the same sharding on the same
    # frame, once; any other job or frame is hashed again
    class Job:
        def __init__(self, sharding):
            self.sharding = sharding

        def shards(self, f: pd.DataFrame) -> np.ndarray:
            return self.sharding.of(f)

    other = ContentShards(12, ("age", "zip", "sex"))
    for workers in (1, 2):
        engine = _pooled(workers)
        engine.shard_counts(loaded, ["job"], sharding)
        kept = engine._kept_shards[2]
        assert (kept == sharding.of(frame)).all()
        assert engine._shards(frame, Job(sharding)) is kept
        assert engine._shards(frame, Job(sharding)) is not kept  # used once
        engine.shard_counts(loaded, ["job"], sharding)
        assert (engine._shards(frame, Job(other)) == other.of(frame)).all()
        engine.shard_counts(loaded, ["job"], sharding)
        assert engine._shards(frame.copy(), Job(sharding)) is not kept
        gone = SimpleNamespace(data=frame.copy())
        engine.shard_counts(gone, ["job"], sharding)
        assert engine._kept_shards is not None
        del gone  # the frame's last reference: its shards go with it
        assert engine._kept_shards is None

    def double(f: pd.DataFrame) -> pd.DataFrame:
        return f.assign(age=f["age"] * 2)

    serial = SERIAL.map_rows(frame, double, None, 3)
    pd.testing.assert_frame_equal(_pooled(2).map_rows(frame, double, None, 3), serial)


def _fails(i: int) -> int:
    if i == 3:
        raise PrivacyError(f"task {i} cannot be published")
    return i * i


def _nested(i: int) -> list[int]:
    return run_tasks(lambda j: i + j, [0, 1], 2)  # inside a worker: serial, no grandchildren


def test_results_in_order_errors_as_raised_and_no_nested_pools():
    assert run_tasks(_fails, [0, 1, 2], 2) == [0, 1, 4]
    with pytest.raises(PrivacyError, match="task 3 cannot be published"):
        run_tasks(_fails, [0, 1, 2, 3, 4], 2)
    assert run_tasks(_nested, [10, 20], 2) == [[10, 11], [20, 21]]
    pids = run_tasks(lambda _: os.getpid(), range(6), 2)
    assert os.getpid() not in pids and len(set(pids)) <= 2  # forked workers, two at most
    assert run_tasks(lambda _: os.getpid(), range(6), 1) == [os.getpid()] * 6


def test_meanwhile_runs_here_while_the_workers_work(tmp_path):
    """`meanwhile` runs once, in this process, while the forked workers work; without
    workers it runs first, before any task. Results unchanged."""
    marker = tmp_path / "meanwhile"
    seen = []

    def task(i: int) -> tuple[int, int, bool]:
        import time

        time.sleep(0.3)  # long enough for `meanwhile` to have run in the parent
        return i * i, os.getpid(), marker.exists()

    def meanwhile() -> None:
        seen.append(os.getpid())
        marker.write_text("")

    done = run_tasks(task, [1, 2, 3], 2, meanwhile)
    assert [d[0] for d in done] == [1, 4, 9] and seen == [os.getpid()]
    assert all(pid != os.getpid() for _, pid, _ in done)
    marker.unlink()
    serial = run_tasks(task, [1, 2], 1, meanwhile)
    assert [d[0] for d in serial] == [1, 4] and all(d[2] for d in serial)  # ran first
    assert seen == [os.getpid()] * 2


def test_the_worker_count(monkeypatch, tmp_path):
    monkeypatch.delenv("VPUB_WORKERS", raising=False)
    assert default_workers() == available_cores() >= 1
    assert default_workers(3) == 3
    monkeypatch.setenv("VPUB_WORKERS", "5")
    assert default_workers() == 5 and make_engine("inprocess").workers == 5
    assert make_engine("inprocess", workers=2).workers == 2  # the config's key wins
    monkeypatch.setenv("VPUB_WORKERS", "many")
    with pytest.raises(SpecError, match="VPUB_WORKERS must be a whole number, not 'many'"):
        default_workers()
    with pytest.raises(SpecError, match="workers must be at least 1, not 0"):
        default_workers(0)
    with pytest.raises(SpecError, match="workers must be a whole number >= 1 and <= 4096, not 0"):
        config_from_dict({"input": {"path": str(tmp_path)}, "workers": 0})
    cfg = config_from_dict({"input": {"path": str(tmp_path)}, "workers": 2})
    assert cfg.workers == 2 and "workers" not in cfg.effective()  # not in the manifest


def test_a_parquet_source_loads_the_same_on_the_workers(tmp_path):
    """Row groups of several files counted and encoded on the workers, each into its
    rows of one shared array: the serial load's frame, dictionaries and counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vpub_spark.model import Attribute, TableSpec

    frame = job_table(5, 3000).astype(str)
    frame.loc[frame.index % 37 == 0, "zip"] = "?"  # rows with a missing value are dropped
    (tmp_path / "data").mkdir()
    for i, part in enumerate(np.array_split(frame, 3)):
        table = pa.Table.from_pandas(part, preserve_index=False)
        pq.write_table(table, tmp_path / "data" / f"part-{i}.parquet", row_group_size=170)
    spec = TableSpec(tuple(Attribute(c) for c in frame.columns), missing_values=("?",))
    one = SERIAL.load(str(tmp_path / "data"), spec)
    assert one.rows_dropped == (frame["zip"] == "?").sum() > 0
    for workers in (2, 3):
        many = _pooled(workers).load(str(tmp_path / "data"), spec)
        assert many.data.equals(one.data) and many.dictionaries == one.dictionaries
        assert all((many.counts[a] == one.counts[a]).all() for a in one.counts)
        assert (many.rows_read, many.rows_dropped) == (one.rows_read, one.rows_dropped)
