"""Content hashes of encoded rows, identical on both engines (pandas' stable row hash)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def content_hash(frame: pd.DataFrame, seed: int) -> np.ndarray:
    """uint64 hash of each row's values and `seed`; depends on content, never on row order."""
    salted = frame.assign(__seed=np.int64(seed))
    return pd.util.hash_pandas_object(salted, index=False).to_numpy(np.uint64)
