"""The StatDB tests' store, and a store whose labels look like a real census extract's,
for the server's tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from release_helpers import marginals_store
from serve_helpers import BIRTH, EDUCATION, JOB, ORIGIN
from statdb.conftest import store  # noqa: F401


@pytest.fixture(scope="session")
def labels_store(tmp_path_factory):
    """(store, release) from a CSV of 900 rows: QI education and origin, sensitive job
    (m = 3), and birth_self, a column the store does not serve."""
    tmp = tmp_path_factory.mktemp("labels")
    rng = np.random.default_rng(11)
    n = 900
    frame = pd.DataFrame(
        {
            "education": rng.choice(EDUCATION, n),
            "origin": rng.choice(ORIGIN, n),
            "job": rng.choice(JOB, n),
            "birth_self": rng.choice(BIRTH, n),
        }
    )
    return marginals_store(frame, tmp, ["education", "origin"], "job", 3, 5)
