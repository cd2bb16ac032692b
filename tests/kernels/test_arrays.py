import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vpub_spark.kernels.arrays import distinct
from vpub_spark.kernels.minvariance import signatures


@given(hnp.arrays(st.sampled_from([np.int32, np.int64, np.float64]), st.integers(0, 200), elements=st.integers(-50, 50)))  # fmt: skip
def test_distinct_equals_numpy_unique(values):
    got = distinct(values)
    assert got.dtype == values.dtype
    np.testing.assert_array_equal(got, np.unique(values))


@given(st.lists(st.tuples(st.integers(-1, 30), st.integers(0, 9)), max_size=200))
def test_signatures_are_each_buckets_sorted_values(pairs):
    bucket = np.array([b for b, _ in pairs], np.int64)
    sensitive = np.array([s for _, s in pairs], np.int64)
    want: dict[int, set[int]] = {}
    for b, s in pairs:
        want.setdefault(b, set()).add(s)
    assert signatures(bucket, sensitive) == {b: tuple(sorted(v)) for b, v in want.items()}
