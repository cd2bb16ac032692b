from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from vpub_spark.datasets import synthetic
from vpub_spark.datasets.presets import resolve_input, write_adult, write_generated

ADULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "adult"


@pytest.mark.parametrize("name", sorted(synthetic.SCHEMAS))
def test_generator_deterministic_and_within_domains(name):
    a = synthetic.generate_block(name, 7, 250_000, 1).to_pandas()
    assert a.equals(synthetic.generate_block(name, 7, 250_000, 1).to_pandas())
    assert not a.equals(synthetic.generate_block(name, 8, 250_000, 1).to_pandas())
    assert len(a) == synthetic.BLOCK_ROWS
    for col, d in synthetic.schema(name):
        assert a[col].min() >= 1 and a[col].max() <= d
    assert len(synthetic.generate_block(name, 7, 250_000, 2)) == 50_000


def test_generator_has_skew_and_dependence():
    df = synthetic.generate_block("sal", 7, 100_000, 0).to_pandas()
    shares = df["salary"].value_counts(normalize=True)
    assert shares.max() > 2.0 / 50  # skewed: the top value is well above uniform
    # dependence: some child attribute is far from independent of its parent
    nodes = synthetic.network("sal", 7)
    names = [a for a, _ in synthetic.schema("sal")]
    child = next(i for i, n in enumerate(nodes) if n.parents)
    ct = pd.crosstab(df[names[nodes[child].parents[0]]], df[names[child]], normalize="index")
    assert (ct.max(axis=0) - ct.min(axis=0)).max() > 0.05


@pytest.mark.spark
def test_spark_generation_equals_inprocess(spark_engine, inprocess, tmp_path):
    rows = 2 * synthetic.BLOCK_ROWS + 123
    write_generated(spark_engine, "census", rows, 3, str(tmp_path / "s"))
    write_generated(inprocess, "census", rows, 3, str(tmp_path / "i"))
    s = pq.read_table(tmp_path / "s" / "data").to_pandas()
    i = pq.read_table(tmp_path / "i" / "data").to_pandas()
    assert len(s) == rows
    key = list(s.columns)
    assert (
        s.sort_values(key).reset_index(drop=True).equals(i.sort_values(key).reset_index(drop=True))
    )
    path, spec = resolve_input(tmp_path / "s", None)
    loaded = inprocess.load(path, spec)
    assert loaded.rows == rows and spec.names == tuple(key)


@pytest.mark.spark
def test_adult_preset_domains_rows_and_sample(spark_engine, inprocess, tmp_path):
    if not ADULT.is_dir():
        pytest.skip("shared/data/adult is not beside the checkout")
    w = write_adult(spark_engine, str(ADULT), str(tmp_path / "adult"), None, 0)
    assert (w.rows, w.dropped) == (45_223, 3_619)
    path, spec = resolve_input(tmp_path / "adult", None)
    full = inprocess.load(path, spec)
    sizes = {a: full.dictionaries[a].size for a in full.names}
    assert sizes == {
        "age": 6,
        "country": 2,
        "education": 7,
        "marital_status": 7,
        "occupation": 3,
        "income": 2,
        "sex": 2,
    }
    assert full.dictionaries["age"].labels[0] == "17-24" and full.dictionaries[
        "occupation"
    ].labels == ("white-collar", "blue-collar", "other")
    # the paper's 10,000-row sample: same rows from both engines, and a subset of the full table
    a = write_adult(spark_engine, str(ADULT), str(tmp_path / "sa"), 10_000, 5)
    b = write_adult(inprocess, str(ADULT), str(tmp_path / "sb"), 10_000, 5)
    assert a.rows == b.rows == 10_000
    sa = pq.read_table(tmp_path / "sa" / "data").to_pandas()
    sb = pq.read_table(tmp_path / "sb" / "data").to_pandas()
    cols = list(sa.columns)
    assert (
        sa.sort_values(cols)
        .reset_index(drop=True)
        .equals(sb.sort_values(cols).reset_index(drop=True))
    )
    fulldf = pq.read_table(tmp_path / "adult" / "data").to_pandas()
    counts_full = fulldf.value_counts()
    counts_s = sa.value_counts()
    assert (counts_s <= counts_full.reindex(counts_s.index)).all()
    assert np.isclose(sa["sex"].eq("Male").mean(), fulldf["sex"].eq("Male").mean(), atol=0.03)


def _conditional_entropy(df: pd.DataFrame, qi: list[str], s: str) -> float:
    """H(S | QI) in nats, from the table's counts."""
    joint = df.groupby([*qi, s]).size()
    marg = joint.groupby(level=list(range(len(qi)))).transform("sum")
    p = joint / joint.sum()
    return float(-(p * np.log(joint / marg)).sum())


def test_dependence_knob():
    """dependence 0 is the data as before; more dependence, less uncertainty about the
    sensitive attribute given the first DEPENDS_ON attributes; 1 makes it a function of them."""
    base = synthetic.generate_block("census", 5, 100_000, 0).to_pandas()
    assert base.equals(synthetic.generate_block("census", 5, 100_000, 0, 0.0).to_pandas())
    qi, s = [a for a, _ in synthetic.schema("census")][: synthetic.DEPENDS_ON], "occupation"
    h = [
        _conditional_entropy(
            synthetic.generate_block("census", 5, 100_000, 0, d).to_pandas(), qi, s
        )
        for d in (0.0, 0.5, 1.0)
    ]
    assert h[0] > h[1] > h[2] and h[2] == pytest.approx(0.0, abs=1e-9)
    same_qi = synthetic.generate_block("census", 5, 100_000, 0, 1.0).to_pandas()
    assert same_qi.equals(synthetic.generate_block("census", 5, 100_000, 0, 1.0).to_pandas())


@pytest.mark.parametrize("name, share", [("census", 0.2475), ("sal", 0.495), ("census", 0.01)])
def test_top_share_knob(name, share):
    """--top-share: the last attribute's most likely value holds round(share * n) of every
    block's rows (raised or lowered), the other columns and the other values' proportions
    stay; no knob is the data as before."""
    base = synthetic.generate_block(name, 3, 150_000, 0).to_pandas()
    assert base.equals(synthetic.generate_block(name, 3, 150_000, 0, top_share=None).to_pandas())
    skewed = synthetic.generate_block(name, 3, 150_000, 0, top_share=share).to_pandas()
    last, top = synthetic.schema(name)[-1][0], synthetic.network(name, 3)[-1].top + 1
    assert (skewed[last] == top).sum() == round(share * len(skewed))
    assert skewed.drop(columns=last).equals(base.drop(columns=last))
    changed = skewed[last] != base[last]
    assert ((skewed[last] == top) | ~changed).all() or ((base[last] == top) | ~changed).all()
    others = lambda df: df[last][df[last] != top].value_counts(normalize=True)  # noqa: E731
    common = others(base).index[:5]
    assert others(skewed)[common].to_numpy() == pytest.approx(
        others(base)[common].to_numpy(), abs=0.01
    )
    assert skewed.equals(synthetic.generate_block(name, 3, 150_000, 0, top_share=share).to_pandas())


def test_top_share_is_checked(tmp_path, inprocess):
    from vpub_spark.errors import SpecError

    with pytest.raises(SpecError, match=r"--top-share must be in \(0, 1\)"):
        write_generated(inprocess, "census", 100, 1, str(tmp_path / "x"), top_share=1.0)
    assert not (tmp_path / "x").exists()
