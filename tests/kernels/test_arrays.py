import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vpub_spark.kernels.arrays import (
    dense_counts,
    dense_ids,
    distinct,
    lex_order,
    pack_counts,
    pack_sorted,
    stable_order,
    unpack_counts,
    unpack_sorted,
)
from vpub_spark.kernels.minvariance import signatures


@given(
    hnp.arrays(
        st.sampled_from([np.int32, np.int64, np.float64]),
        st.integers(0, 200),
        elements=st.integers(-50, 50),
    )
)
def test_distinct_equals_numpy_unique(values):
    got = distinct(values)
    assert got.dtype == values.dtype
    np.testing.assert_array_equal(got, np.unique(values))


@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=3),
    st.integers(0, 120),
    st.integers(0, 2**16),
    st.sampled_from([np.int8, np.int32, np.int64]),
)
def test_dense_counts_equal_pandas_group_sizes(radix, rows, seed, dtype):
    """Rows per combination, sorted by the columns, in their own type: pandas' sorted
    group sizes; None when the space has more cells than allowed."""
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, r, rows).astype(dtype) for r in radix]
    got = dense_counts(codes, radix)
    assert got is not None
    if not rows:
        assert len(got[1]) == 0
        return
    frame = pd.DataFrame({f"c{i}": c for i, c in enumerate(codes)})
    want = frame.groupby(list(frame.columns), sort=True).size()
    for i, column in enumerate(got[0]):
        assert column.dtype == dtype
        np.testing.assert_array_equal(
            column, want.index.get_level_values(i) if len(radix) > 1 else want.index
        )
    np.testing.assert_array_equal(got[1], want.to_numpy())
    assert dense_counts(codes, radix, cells=int(np.prod(radix)) - 1) is None


@given(st.lists(st.tuples(st.integers(-1, 30), st.integers(0, 9)), max_size=200))
def test_signatures_are_each_buckets_sorted_values(pairs):
    bucket = np.array([b for b, _ in pairs], np.int64)
    sensitive = np.array([s for _, s in pairs], np.int64)
    want: dict[int, set[int]] = {}
    for b, s in pairs:
        want.setdefault(b, set()).add(s)
    assert signatures(bucket, sensitive) == {b: tuple(sorted(v)) for b, v in want.items()}


TOPS = st.sampled_from([1, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 2**62])


@given(st.data(), TOPS)
def test_packed_counts_come_back_exactly(data, top):
    """Every width: the values at each unsigned type's bounds come back, as int64."""
    values = data.draw(hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(0, top)))
    got = unpack_counts(pack_counts(values))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, values)


@given(st.data(), TOPS)
def test_packed_sorted_keys_come_back_exactly(data, top):
    keys = np.sort(
        data.draw(hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(0, top)))
    )
    np.testing.assert_array_equal(unpack_sorted(pack_sorted(keys)), keys)


def test_packing_is_compact_and_refuses_what_it_cannot_hold():
    counts = np.zeros(1_000_000, np.int64)
    counts[::7] = 300  # two bytes each, mostly zeros
    assert len(pack_counts(counts)) < counts.nbytes // 50
    with pytest.raises(ValueError, match="non-negative"):
        pack_counts(np.array([3, -1]))
    with pytest.raises(ValueError, match="non-negative"):
        pack_sorted(np.array([5, 2]))  # not sorted: a negative gap


@given(st.data(), st.sampled_from([1, 8, 9, 16, 17, 31, 33, 48, 49, 62]))
def test_stable_order_is_numpys_stable_argsort(data, bits):
    """The radix order equals the comparison sort's for every key width, ties in input
    order (the one-pass, multi-pass and fallback branches)."""
    n = data.draw(st.integers(0, 300))
    top = data.draw(st.sampled_from([2**bits - 1, 2 ** max(bits - 1, 0), 3]))
    keys = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, top)))
    np.testing.assert_array_equal(stable_order(keys), np.argsort(keys, kind="stable"))


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**60), st.integers(0, 3)), max_size=100)
)
def test_lex_order_is_pandas_stable_sort(rows):
    """Packed (narrow values) and np.lexsort (wide) branches alike."""
    cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
    frame = pd.DataFrame({str(i): c for i, c in enumerate(cols)})
    expected = frame.sort_values(["0", "1", "2"], kind="stable").index.to_numpy()
    np.testing.assert_array_equal(lex_order(cols), expected)


@given(hnp.arrays(np.int64, st.integers(0, 200), elements=st.integers(0, 10**5)))
def test_dense_ids_are_numpys_unique_with_inverse(values):
    """Counting (a narrow range) and np.unique (a wide one) alike."""
    ids, inverse = dense_ids(values)
    expected, where = np.unique(values, return_inverse=True)
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_array_equal(inverse, where.reshape(-1))


@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=60, unique=True),
    st.lists(st.integers(-5, 400), max_size=80),
)
def test_positions_equal_searchsorted(ids, values):
    from vpub_spark.kernels.arrays import positions

    ids_, values_ = np.sort(np.array(ids, np.int64)), np.array(values, np.int64)
    np.testing.assert_array_equal(positions(ids_, values_), np.searchsorted(ids_, values_))
    inside = values_[(values_ >= 0) & (values_ <= ids_[-1])]  # the lookup table's case
    np.testing.assert_array_equal(positions(ids_, inside), np.searchsorted(ids_, inside))
