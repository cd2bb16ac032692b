"""The suppression budget (publishing/suppression.py, kernels/suppression.py):
the fewest rows, the same rows on both engines, recorded in the manifest, checked by the
audit (budget, and the tables against the source less exactly those rows)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from release_helpers import config, contents, same_contents, write_table

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import PrivacyError
from vpub_spark.kernels.suppression import excess, fewest_to_suppress
from vpub_spark.model import PrivacySpec
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release

RULES = ["age, zip -> job"]


@settings(max_examples=200, deadline=None)
@given(counts=st.lists(st.integers(0, 60), min_size=1, max_size=8), l=st.integers(2, 5))
def test_fewest_rows_make_the_attribute_eligible(counts, l):
    c = np.array(counts)
    if (c > 0).sum() < l:  # fewer than l values: nothing short of everything helps
        return
    drop = fewest_to_suppress(c, l)
    left = c - drop
    assert (drop >= 0).all() and (drop <= c).all() and left.max() * l <= left.sum()
    total = int(drop.sum())
    assert total == 0 or int(excess(c, l, total - 1).sum()) > total - 1  # one fewer is not enough


def _skewed(n: int = 900, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    job = rng.choice(["a", "b", "c", "d"], n, p=[0.5, 0.2, 0.2, 0.1])  # 'a' above 1/3
    return pd.DataFrame(
        {
            "age": rng.integers(20, 60, n).astype(str),
            "zip": rng.integers(0, 9, n).astype(str),
            "job": job,
        }
    )


def _cfg(data, out, budget: float, seed: int = 3):
    cfg = config(data, out, RULES, 3, seed=seed, output={"path": str(out), "release_id": "r"})
    return replace(cfg, privacy=PrivacySpec("l-diversity", 3, None, (), budget))


def test_a_budget_meets_an_ineligible_rule_and_the_audit_checks_it(tmp_path):
    frame = _skewed()
    data = write_table(frame, tmp_path / "t")
    with pytest.raises(PrivacyError, match="cannot be met"):
        publish(_cfg(data, tmp_path / "no", 0.0), InProcessEngine())
    with pytest.raises(PrivacyError, match="over the budget privacy.suppression = 0.05"):
        publish(_cfg(data, tmp_path / "small", 0.05), InProcessEngine())
    r = publish(_cfg(data, tmp_path / "out", 0.3), InProcessEngine())
    counts = frame["job"].value_counts().reindex(["a", "b", "c", "d"]).to_numpy()
    expected = int(fewest_to_suppress(counts, 3).sum())
    assert r.manifest["suppression"] == {
        "budget": 0.3,
        "rows": expected,
        "per_rule": {"age, zip -> job": expected},
    }
    assert r.manifest["source"]["rows"] == len(frame) - expected and expected > 0
    report = audit_release(r.path, source=str(data))
    assert report.passed, report.as_dict()["failures"]
    manifest = json.loads((r.path / "manifest.json").read_text())
    for tampered in (
        {"rows": expected - 1, "per_rule": {"age, zip -> job": expected - 1}},
        {"budget": 0.01},
    ):
        (r.path / "manifest.json").write_text(
            json.dumps(manifest | {"suppression": manifest["suppression"] | tampered})
        )
        assert not audit_release(r.path, source=str(data)).passed, tampered


def test_both_engines_suppress_the_same_rows(tmp_path, spark_engine):
    data = write_table(_skewed(), tmp_path / "t")
    here = publish(_cfg(data, tmp_path / "a", 0.3), InProcessEngine())
    there = publish(replace(_cfg(data, tmp_path / "b", 0.3), engine="spark"), spark_engine)
    assert there.manifest["suppression"] == here.manifest["suppression"]
    assert same_contents(contents(here.path), contents(there.path))
