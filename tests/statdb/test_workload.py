"""004 §9's workloads (Table 4's lambda and ql) and the statdb benchmark job."""

from __future__ import annotations

import pytest

from vpub_spark.errors import SpecError
from vpub_spark.statdb.workload import workload

SIZES = {"age": 79, "gender": 2, "education": 17, "salary": 50}


def test_each_query_constrains_lambda_qi_attributes_and_the_sensitive_one():
    qs = workload(SIZES, ["age", "gender", "education"], "salary", 2, 0.1, 200, seed=3)
    assert len(qs) == 200 and all(len(q.ranges) == 2 for q in qs)
    for q in qs:
        for a, (lo, hi) in q.ranges.items():
            assert 0 <= lo <= hi < SIZES[a] and hi - lo + 1 == max(1, round(0.1 * SIZES[a]))
        assert len(q.sensitive) == 5 and max(q.sensitive) - min(q.sensitive) == 4
    assert qs == workload(SIZES, ["age", "gender", "education"], "salary", 2, 0.1, 200, seed=3)


@pytest.mark.parametrize(
    "lam, ql, message",
    [(0, 0.1, "lambda must be between 1 and 3"), (4, 0.1, "lambda"), (1, 0.0, "ql must be in")],
)
def test_bad_parameters(lam, ql, message):
    with pytest.raises(SpecError, match=message):
        workload(SIZES, ["age", "gender", "education"], "salary", lam, ql, 10, 0)


def test_the_bench_job_answers_a_workload_on_a_store(tmp_path):
    import numpy as np
    import pandas as pd
    from release_helpers import write_table

    from vpub_bench.bench_statdb import BenchStatdb, bench_statdb
    from vpub_spark.config import config_from_dict
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.statdb.build import build_store

    rng = np.random.default_rng(2)
    n = 900
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 70, n).astype(str),
            "zip": rng.integers(10, 30, n).astype(str),
            "salary": [f"s{x:02d}" for x in rng.integers(0, 12, n)],
        }
    )
    data = write_table(frame, tmp_path / "t")
    cfg = config_from_dict(
        {
            "input": {"path": str(data)},
            "privacy": {"model": "m-invariance", "m": 4},
            "engine": "inprocess",
            "marginals": {
                "sensitive": "salary",
                "qi": ["age", "zip"],
                "state": str(tmp_path / "store"),
            },
        }
    )
    build_store(cfg, InProcessEngine())
    out = bench_statdb(
        BenchStatdb(str(tmp_path / "store"), queries=40, lam=1, ql=0.2, out=str(tmp_path / "bench"))
    )
    assert {m: r["held_the_truth"] for m, r in out["methods"].items()} == {
        "dyn-ana": 40,
        "dyn-gen": 40,
    }
    # the truth from the source table, not the store: each inside both methods' intervals
    from release_helpers import workload_truths

    from vpub_spark.statdb.db import StatDB

    db = StatDB.open(tmp_path / "store")
    for text, truth in workload_truths(db, frame, 1, 0.2, 40, 1):
        for method in ("dyn-ana", "dyn-gen"):
            answer = db.count(text, method, log=False)
            assert answer.low <= truth <= answer.high, (text, method, truth, answer)
