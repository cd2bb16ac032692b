"""The KL's distinct source rows (utility/kl.py) and a release's parts read file by file
and coded (utility/release_models.read_part, estimate/codes.py) equal their plain
pandas definitions."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpub_spark.estimate.codes import LocalCodes, to_codes
from vpub_spark.utility.kl import coarser, distinct_counts, sorted_distinct, unpacked


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    rows=st.integers(0, 300),
    radix=st.lists(st.integers(1, 40), min_size=1, max_size=5),
    wide=st.booleans(),
)
def test_distinct_rows_and_every_coarser_prefix_equal_groupby(seed, rows, radix, wide):
    rng = np.random.default_rng(seed)
    if wide:  # a packed range past the counting table's: the sort
        radix = [*radix, 100_000]
    cols = [f"c{i}" for i in range(len(radix))]
    frame = pd.DataFrame(
        {c: rng.integers(0, r, rows).astype(np.int32) for c, r in zip(cols, radix, strict=True)}
    )
    every = sorted_distinct(frame, cols)
    assert every is not None
    for k in range(1, len(cols) + 1):
        want = frame.groupby(cols[:k]).size()
        rows_k = coarser(every, k)
        got = unpacked(rows_k, cols[:k], [np.int32] * k)
        assert got.dtypes.tolist() == [np.dtype(np.int32)] * k
        pd.testing.assert_frame_equal(got, want.index.to_frame(index=False))
        np.testing.assert_array_equal(rows_k[1], want.to_numpy())
        frame_k, counts_k = distinct_counts(frame, cols[:k])
        pd.testing.assert_frame_equal(frame_k, got)
        np.testing.assert_array_equal(counts_k, rows_k[1])


@settings(max_examples=25, deadline=None)
@given(
    files=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 9),
                st.one_of(st.none(), st.sampled_from(["1", "2", "10", "x"])),
                st.integers(0, 3),
            ),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=4,
    ),
    counts_float=st.booleans(),
    holding=st.booleans(),
)
def test_a_part_read_file_by_file_codes_as_the_part_read_whole(
    files, counts_float, holding, tmp_path_factory
):
    """`read_part` (each file's dictionary indices, recoded in place; or, by a holding
    reader, the part whole, its chunks so) gives the codes of the part read whole and
    coded; a null in a number column reads it whole."""
    import pyarrow.parquet as pq

    from vpub_spark.release.reader import ReleaseReader
    from vpub_spark.utility.release_models import read_part, release_domains

    root = tmp_path_factory.mktemp("rel")
    folder = root / "tables" / "t" / "qit"
    folder.mkdir(parents=True)
    number = pa.float64() if counts_float else pa.int64()
    for i, rows in enumerate(files):
        group, label, count = zip(*rows, strict=True)
        counts = [float(c) if counts_float else c for c in count]
        if counts_float and i == 0:
            counts[0] = None  # a null in a number column: the whole-part reader
        schema = pa.schema([("group_id", pa.int64()), ("a", pa.string()), ("count", number)])
        pq.write_table(
            pa.table({"group_id": list(group), "a": list(label), "count": counts}, schema),
            folder / f"part-{i:05d}.parquet",
        )
    rel = ReleaseReader(root, {"tables": [{"name": "t", "parts": ["qit"], "attributes": ["a"]}]})
    whole = rel.read("t", "qit").to_pandas()
    domains = release_domains(rel, {("t", "qit"): whole})
    reader = rel.holding_parts() if holding else rel
    if holding:
        reader.read("t", "qit")  # held whole: read_part reads it from memory
    part = read_part(reader, "t", "qit")
    assert isinstance(part, LocalCodes) != counts_float  # the null: read whole
    assert release_domains(rel, {("t", "qit"): part}) == domains
    got = to_codes(part, domains)
    want = to_codes(whole, domains)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert got["a"].dtype == np.int32


@pytest.mark.parametrize("dense", [True, False])
def test_each_anatomy_term_builds_its_runs_once_whatever_the_junction_order(dense):
    """A separator whose columns lead the packing in another order than its clique's:
    the model's dense joints (`dense`) or sorted runs are built once per attribute
    order (by `_warm`), not again on the threads (the row threshold lowered, so that
    these 400 rows take the threaded path)."""
    from vpub_spark.estimate import models as estimate_models
    from vpub_spark.estimate.models import AnatomyModel
    from vpub_spark.kernels.anatomy import anatomize
    from vpub_spark.utility import kl as kl_module
    from vpub_spark.utility.kl import kl_divergence

    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({c: rng.integers(0, 4, n).astype(np.int32) for c in "abcst"})
    models = []
    for name, cols, s in (("t1", ["a", "b", "c", "s"], "s"), ("t2", ["b", "a", "t"], "t")):
        qit, st_ = anatomize(frame[cols], s, 2, 0)
        models.append(AnatomyModel(name, tuple(cols), s, qit, st_))
    domains = {c: [str(i) for i in range(4)] for c in frame.columns}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(estimate_models, "_joint_fits", lambda *_: dense)
        patch.setattr(kl_module, "MIN_ROWS", 1)
        kl = kl_divergence(models, frame, domains)
        patch.setattr(kl_module, "MIN_ROWS", n + 1)  # the serial path: the same value
        assert kl_divergence(models, frame, domains) == pytest.approx(kl, rel=1e-12)
    assert np.isfinite(kl) and kl >= -1e-12
    # t2's term and its separator with t1 ask for (b, a) and (b, a, t): one order each
    for m, order in zip(models, [("a", "b", "c"), ("b", "a")], strict=True):
        held = {q for q, _, _ in m._joints} if dense else set(m._sorted_held)
        assert held == {order}
        assert not (m._sorted_held if dense else m._joints)


def test_a_later_file_of_another_column_type_is_an_error_not_a_cast(tmp_path):
    import pytest

    from vpub_spark.errors import DataError
    from vpub_spark.release.reader import ReleaseReader
    from vpub_spark.utility.release_models import read_part

    folder = tmp_path / "tables" / "t" / "qit"
    folder.mkdir(parents=True)
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": ["1", "2"], "count": [1, 2]}), folder / "part-0.parquet")
    for later in ([2.5, 1.0], ["3", "4"]):
        pq.write_table(pa.table({"a": ["1", "2"], "count": later}), folder / "part-1.parquet")
        rel = ReleaseReader(
            tmp_path, {"tables": [{"name": "t", "parts": ["qit"], "attributes": ["a"]}]}
        )
        with pytest.raises(DataError, match="files disagree"):
            read_part(rel, "t", "qit")


def test_the_labels_a_part_shows_are_the_same_in_every_form():
    """A float attribute with NaN and a null: no "nan" label in any form of a part."""
    from vpub_spark.estimate.codes import LocalCodes, shown_labels

    frame = pd.DataFrame({"a": [1.5, np.nan, None, 2.0]})
    local = LocalCodes({"a": np.array([1.5, np.nan, np.nan, 2.0])}, {})
    want = {"a": {1.5, 2.0}}
    assert shown_labels(frame, ["a"]) == want
    assert shown_labels(local, ["a"]) == want
