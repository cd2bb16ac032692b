"""`vpub check`: the equivalence-class measures, cross-checked against pyCANON
(a test dependency) on random tables, the textbook recursive (c, l), Spark equal to in
process, the ordered EMD in a declared order (bins, `order:`), and the command's report
and exit code."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity
from release_helpers import vpub

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import DataError
from vpub_spark.kernels.classes import class_counts, class_measures
from vpub_spark.utility.check import Model, check_table

QI = ["a", "b"]


@st.composite
def tables(draw):
    n = draw(st.integers(5, 80))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    sizes = draw(st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 6)))
    return pd.DataFrame(
        {
            "a": rng.integers(0, sizes[0], n),
            "b": rng.integers(0, sizes[1], n),
            "s": rng.integers(0, sizes[2], n),
        }
    )


def _ours(frame: pd.DataFrame, ordered: bool, l: int = 2) -> pd.DataFrame:
    values = np.sort(frame["s"].unique())
    coded = frame.assign(s=np.searchsorted(values, frame["s"]))
    p = coded["s"].value_counts(normalize=True).sort_index()
    return class_measures(class_counts(coded, QI, "s"), QI, "s", p, l, ordered)


@settings(max_examples=60, deadline=None)
@given(frame=tables())
def test_measures_equal_pycanon(frame):
    m = _ours(frame, ordered=True)
    assert int(m["k"].min()) == anonymity.k_anonymity(frame, QI)
    assert int(m["distinct_l"].min()) == anonymity.l_diversity(frame, QI, ["s"])
    theirs = anonymity.entropy_l_diversity(frame, QI, ["s"])  # int(min exp(H)), in floats
    assert theirs in {
        math.floor(m["entropy_l"].min() - 1e-9),
        math.floor(m["entropy_l"].min() + 1e-9),
    }
    if frame["s"].nunique() > 1:  # numeric: ordered EMD
        assert m["t"].max() == pytest.approx(anonymity.t_closeness(frame, QI, ["s"]))
    labels = frame.assign(s=frame["s"].map(lambda v: f"v{v}"))  # strings: equal distance
    assert _ours(labels, ordered=False)["t"].max() == pytest.approx(
        anonymity.t_closeness(labels, QI, ["s"])
    )


def test_recursive_c_l_is_the_papers():
    """Counts 5, 3, 1, 1 in one class: r1 / (r_l + ... + r_m) = 5 / (3 + 1 + 1) for l = 2
    and 5 / (1 + 1) for l = 3; fewer than l values: infinite."""
    frame = pd.DataFrame({"a": [0] * 10, "b": [0] * 10, "s": [0] * 5 + [1] * 3 + [2, 3]})
    assert _ours(frame, False, l=2)["recursive_c"].iloc[0] == pytest.approx(1.0)
    assert _ours(frame, False, l=3)["recursive_c"].iloc[0] == pytest.approx(2.5)
    assert _ours(frame, False, l=5)["recursive_c"].iloc[0] == math.inf


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(3)
    n = 3000
    frame = pd.DataFrame(
        {
            "zip": rng.integers(0, 30, n).astype(str),
            "sex": rng.choice(["F", "M"], n),
            "age": rng.integers(20, 70, n),
            "disease": rng.choice(["flu", "hiv", "cold", "asthma"], n, p=[0.4, 0.1, 0.3, 0.2]),
        }
    )
    path = tmp_path_factory.mktemp("chk") / "t.csv"
    frame.to_csv(path, index=False)
    return path, frame


def test_spark_equals_in_process(table, spark_engine):
    path, _ = table
    model = Model.of(k=5, l=3, entropy_l=2.0, c=3.0, t=0.3)
    here = check_table(InProcessEngine(), str(path), ["zip", "sex"], "disease", model)
    there = check_table(spark_engine, str(path), ["zip", "sex"], "disease", model)
    assert there.measured == pytest.approx(here.measured) and there.checks == here.checks
    assert (there.rows, there.classes) == (here.rows, here.classes) == (3000, 60)
    ordered = [
        check_table(e, str(path), ["zip", "sex"], "age", Model.of(t=0.2), ordered=True)
        for e in (InProcessEngine(), spark_engine)
    ]
    assert ordered[0].measured == pytest.approx(ordered[1].measured)


def test_check_command(table):
    path, frame = table
    done = subprocess.run(
        vpub(
            "check", str(path), "--qi", "zip,sex", "--sa", "disease", "--model", "k=5,l=4", "--json"
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    sizes = frame.groupby(["zip", "sex"]).size()
    assert report["measured"]["k"] == sizes.min() and report["classes"] == len(sizes)
    l4 = frame.groupby(["zip", "sex"])["disease"].nunique() < 4
    assert report["checks"]["distinct l-diversity (l = 4)"]["failing_classes"] == int(l4.sum())
    assert done.returncode == (1 if l4.any() or sizes.min() < 5 else 0)
    bad = subprocess.run(
        vpub("check", str(path), "--qi", "zip,nope", "--sa", "disease"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "nope" in bad.stderr
    worse = subprocess.run(
        vpub("check", str(path), "--qi", "zip", "--sa", "disease", "--model", "q=3"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worse.returncode == 2 and "--model: 'q=3'" in worse.stderr


BINS = [
    ("5-9", 5, 9),
    ("10-14", 10, 14),
    ("15-19", 15, 19),
    ("20-24", 20, 24),
]  # sorted as text: 10-14, 15-19, 20-24, 5-9


@pytest.fixture(scope="module")
def binned(tmp_path_factory):
    """A table whose sensitive attribute holds bin labels, the same with each label's rank
    in the bins' order (numbers), and a spec declaring the bins."""
    import yaml

    rng = np.random.default_rng(11)
    n = 2000
    rank = rng.choice(4, n, p=[0.1, 0.2, 0.3, 0.4])
    zip_ = rng.integers(0, 12, n)
    rank = np.where(zip_ < 3, 0, rank)  # a few classes far from the whole table
    tmp = tmp_path_factory.mktemp("binned")
    labels = pd.DataFrame({"zip": zip_.astype(str), "age": [BINS[r][0] for r in rank]})
    labels.to_csv(tmp / "labels.csv", index=False)
    labels.assign(age=rank).to_csv(tmp / "ranks.csv", index=False)
    spec = {
        "name": "b",
        "attributes": [
            {"name": "zip"},
            {
                "name": "age",
                "kind": "numeric",
                "bins": [{"label": lab, "min": lo, "max": hi} for lab, lo, hi in BINS],
            },
        ],
    }
    (tmp / "bins.yaml").write_text(yaml.safe_dump(spec))
    return tmp


def test_ordered_t_follows_the_declared_bins(binned, spark_engine):
    """The ordered EMD over bin labels in the bins' order equals the one over their ranks,
    and differs from the labels' text order; both engines agree."""
    ranks = check_table(
        InProcessEngine(), str(binned / "ranks.csv"), ["zip"], "age", Model.of(t=0.2), ordered=True
    )
    for engine in (InProcessEngine(), spark_engine):
        bins = check_table(
            engine,
            str(binned / "labels.csv"),
            ["zip"],
            "age",
            Model.of(t=0.2),
            ordered=True,
            table=str(binned / "bins.yaml"),
        )
        assert bins.measured == pytest.approx(ranks.measured) and bins.checks == ranks.checks
    import yaml

    text = {
        "name": "b",
        "attributes": [{"name": "zip"}, {"name": "age", "order": sorted(b[0] for b in BINS)}],
    }
    (binned / "text.yaml").write_text(yaml.safe_dump(text))
    as_text = check_table(
        InProcessEngine(),
        str(binned / "labels.csv"),
        ["zip"],
        "age",
        Model(),
        ordered=True,
        table=str(binned / "text.yaml"),
    )
    assert as_text.measured["t"] != pytest.approx(ranks.measured["t"])
    with pytest.raises(DataError, match=r"value '\d+-\d+' .* is not a number; declare the order"):
        check_table(
            InProcessEngine(), str(binned / "labels.csv"), ["zip"], "age", Model(), ordered=True
        )


def test_ordered_t_follows_an_order_list_from_the_data_sets_table_yaml(tmp_path):
    """`order:` in the table.yaml beside data/ (as `vpub datasets` writes) orders the
    sensitive labels; a label outside it is refused."""
    import yaml

    levels = ["primary", "secondary", "bachelor", "master", "doctorate"]
    rng = np.random.default_rng(5)
    n = 1500
    rank = rng.choice(5, n)
    zip_ = rng.integers(0, 8, n)
    rank = np.where(zip_ == 0, 4, rank)
    (tmp_path / "ds" / "data").mkdir(parents=True)
    pd.DataFrame({"zip": zip_.astype(str), "edu": [levels[r] for r in rank]}).to_csv(
        tmp_path / "ds" / "data" / "part.csv", index=False
    )
    (tmp_path / "ds" / "table.yaml").write_text(
        yaml.safe_dump(
            {"name": "e", "attributes": [{"name": "zip"}, {"name": "edu", "order": levels}]}
        )
    )
    pd.DataFrame({"zip": zip_.astype(str), "edu": rank}).to_csv(tmp_path / "ranks.csv", index=False)
    ours = check_table(
        InProcessEngine(),
        str(tmp_path / "ds" / "data"),
        ["zip"],
        "edu",
        Model.of(t=0.1),
        ordered=True,
    )
    ranks = check_table(
        InProcessEngine(),
        str(tmp_path / "ranks.csv"),
        ["zip"],
        "edu",
        Model.of(t=0.1),
        ordered=True,
    )
    assert ours.measured == pytest.approx(ranks.measured) and ours.measured["t"] > 0.1
    (tmp_path / "ds" / "table.yaml").write_text(
        yaml.safe_dump(
            {"name": "e", "attributes": [{"name": "zip"}, {"name": "edu", "order": levels[:-1]}]}
        )
    )
    with pytest.raises(DataError, match="'doctorate' is not in the declared order"):
        check_table(InProcessEngine(), str(tmp_path / "ds"), ["zip"], "edu", Model(), ordered=True)
