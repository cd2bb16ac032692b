import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.encoding import (
    ColumnCodes,
    EncodingPlan,
    build_dictionary,
    decode_batch,
    encode_batch,
)
from vpub_spark.errors import DataError, SpecError
from vpub_spark.model import Attribute, CategoryGroup, NumericBin, TableSpec
from vpub_spark.tablespec import table_spec_from_dict, table_spec_to_dict


def test_numeric_orders_by_value_not_text():
    d, cc, counts = build_dictionary(
        Attribute("age", "numeric"), {"9": 1, "10": 2, "10.0": 1, "100": 3}
    )
    assert d.labels == ("9", "10", "100")
    assert dict(zip(cc.raw, cc.codes, strict=True)) == {"10": 1, "10.0": 1, "100": 2, "9": 0}
    assert counts.tolist() == [1, 3, 3]


def test_bins_keep_declared_domain_and_reject_outsiders():
    a = Attribute("age", "numeric", bins=(NumericBin("young", 0, 29), NumericBin("old", 30, 99)))
    d, _, counts = build_dictionary(a, {"31": 4})
    assert d.labels == ("young", "old") and counts.tolist() == [0, 4]
    with pytest.raises(DataError, match="2 rows hold values outside every bin"):
        build_dictionary(a, {"120": 2, "5": 1})


def test_groups_rest_and_order():
    a = Attribute("country", groups=(CategoryGroup("US", ("United-States",)),), rest="non-US")
    d, _, counts = build_dictionary(a, {"United-States": 5, "Peru": 1, "Cuba": 2})
    assert d.labels == ("US", "non-US") and counts.tolist() == [5, 3]
    b = Attribute("sex", order=("M", "F"))
    assert build_dictionary(b, {"F": 1, "M": 2})[0].labels == ("M", "F")
    with pytest.raises(DataError, match="'X' is not in the declared order"):
        build_dictionary(b, {"X": 1})


def test_spec_validation_is_clear():
    with pytest.raises(SpecError, match="overlap"):
        Attribute("age", "numeric", bins=(NumericBin("a", 0, 10), NumericBin("b", 10, 20)))
    with pytest.raises(SpecError, match="unknown keys"):
        table_spec_from_dict({"attributes": [{"name": "a", "colour": 1}]})
    with pytest.raises(SpecError, match="duplicate attribute"):
        table_spec_from_dict({"attributes": [{"name": "a"}, {"name": "a"}]})


def test_spec_yaml_round_trip():
    spec = TableSpec(
        (
            Attribute("age", "numeric", bins=(NumericBin("17-24", 17, 24),)),
            Attribute("c", groups=(CategoryGroup("x", ("a", "b")),), rest="y"),
        )
    )
    assert table_spec_from_dict(table_spec_to_dict(spec)) == spec


@given(
    st.lists(
        st.one_of(st.sampled_from(["a", "b", " c ", "?", ""]), st.none()), min_size=1, max_size=50
    )
)
@settings(max_examples=100, deadline=None)
def test_encode_decode_round_trip_drops_missing(values):
    spec = TableSpec((Attribute("x"),))
    present = [v.strip() for v in values if v is not None and v.strip() not in ("?", "")]
    counts = {v: present.count(v) for v in set(present)}
    if not counts:
        return
    d, cc, _ = build_dictionary(spec.attributes[0], counts)
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.string())], names=["x"])
    out = encode_batch(batch, EncodingPlan((cc,)))
    assert out.num_rows == len(present)
    assert decode_batch(out, {"x": d}).column(0).to_pylist() == present
    assert np.all(np.diff([d.labels.index(v) for v in sorted(set(present))]) > 0)


@given(
    st.lists(st.one_of(st.integers(-(2**31), 2**31 - 1), st.none()), min_size=1, max_size=40),
    st.lists(
        st.one_of(
            st.integers(-(2**40), 2**40).map(str),
            st.sampled_from(["007", "-0", "+5", " 5", "5 ", "1e3", "x", "٣"]),
        ),
        max_size=10,
    ),
    st.sampled_from([pa.int8(), pa.int32(), pa.int64(), pa.uint16()]),
)
@settings(max_examples=150, deadline=None)
def test_integer_columns_encode_as_their_strings(values, extra_raw, kind):
    """`encode_batch`'s integer path gives the codes of the values' strings: the same raw
    values match (canonical decimals only, within the column type's range)."""
    info = np.iinfo(kind.to_pandas_dtype())
    values = [v if v is None or info.min <= v <= info.max else None for v in values]
    raw = sorted({str(v) for v in values if v is not None} | set(extra_raw))
    cc = ColumnCodes("x", "x", tuple(raw), tuple(range(len(raw))))
    as_int = pa.RecordBatch.from_arrays([pa.array(values, kind)], names=["x"])
    as_text = pa.RecordBatch.from_arrays([pa.array(values, kind).cast(pa.string())], names=["x"])
    plan = EncodingPlan((cc,))
    assert encode_batch(as_int, plan).equals(encode_batch(as_text, plan))


@given(
    st.lists(
        st.one_of(st.integers(-300, 300), st.integers(-(2**31), 2**31 - 1), st.none()),
        min_size=1,
        max_size=40,
    ),
    st.lists(
        st.one_of(
            st.integers(-300, 300).map(str),
            st.sampled_from(["?", "", "007", "-0", "+5", " 5", "x"]),
        ),
        max_size=4,
    ),
    st.sampled_from([pa.int8(), pa.int32(), pa.int64(), pa.uint16()]),
)
@settings(max_examples=150, deadline=None)
def test_integer_columns_count_as_their_strings(values, missing, kind):
    """`raw_value_counts` counts an integer column as integers: the same raw values,
    counts, rows and missing rows as the column cast to strings (missing-value tokens
    that are integers' canonical decimals match those integers, no other token does)."""
    from vpub_spark.encoding import raw_value_counts

    info = np.iinfo(kind.to_pandas_dtype())
    values = [v if v is None or info.min <= v <= info.max else None for v in values]
    spec = TableSpec((Attribute("x"), Attribute("y")), missing_values=tuple(missing))
    ints = pa.array(values, kind)
    other = pa.array([str(i % 3) for i in range(len(values))], pa.string())
    as_int = pa.table({"x": ints, "y": other})
    as_text = pa.table({"x": ints.cast(pa.string()), "y": other})
    assert raw_value_counts(as_int, spec) == raw_value_counts(as_text, spec)
