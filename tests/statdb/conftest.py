"""A marginals store (1,500 rows, m = 4, two published marginals) the StatDB tests share:
(the store, the release, the source table as written)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from release_helpers import write_table

from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("statdb")
    rng = np.random.default_rng(4)
    n = 1500
    age = rng.integers(20, 70, n)
    frame = pd.DataFrame(
        {
            "age": age.astype(str),
            "zip": rng.integers(10, 40, n).astype(str),
            "job": [f"j{x:02d}" for x in (age // 5 + rng.integers(0, 7, n)) % 12],
        }
    )
    data = write_table(frame, tmp / "t")
    cfg = config_from_dict(
        {
            "input": {"path": str(data)},
            "method": "marginals",
            "privacy": {"model": "m-invariance", "m": 4},
            "marginals": {
                "sensitive": "job",
                "schemas": [["age"], ["age", "zip"]],
                "state": str(tmp / "private" / "store"),
                "chunk_rows": 600,
            },
            "output": {"path": str(tmp / "out"), "release_id": "r"},
            "engine": "inprocess",
            "seed": 2,
        }
    )
    r = publish(cfg, InProcessEngine())
    return tmp / "private" / "store", r.path, frame
