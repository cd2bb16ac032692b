"""GD (000 Algorithm 1): GNF after decomposition and after every add-back; ends on
cyclic rules; its release publishes, audits and answers queries."""

from hypothesis import given, settings
from hypothesis import strategies as st
from release_helpers import RULES_1_3, TABLE1, publish_inprocess, write_table
from strategies import rule_sets

from vpub_spark.decompose.gd import gd
from vpub_spark.estimate.codes import to_codes
from vpub_spark.gnf import check_gnf
from vpub_spark.release.reader import open_release
from vpub_spark.rules import parse_rules
from vpub_spark.utility.queries import Estimator, exact_count
from vpub_spark.utility.release_models import release_models


@settings(max_examples=150, deadline=None)
@given(case=rule_sets(max_attrs=7, max_rules=6), seed=st.integers(0, 50))
def test_gd_is_gnf_after_every_add_back(case, seed):
    attrs, rules = case
    scored = []

    def score(schema):  # any score will do for the invariant; record what GD considers
        assert check_gnf(schema, rules).ok, "GD scored a non-GNF candidate"
        scored.append(schema)
        return float(sum(len(t.attributes) ** 2 for t in schema.tables) % 7)

    schema, cost = gd(attrs, rules, seed, score)
    assert check_gnf(schema, rules).ok
    assert set(attrs) <= {a for t in schema.tables for a in t.attributes}  # nothing lost
    assert cost.kl_evaluations == len(scored)
    assert gd(attrs, rules, seed, score)[0] == schema  # deterministic


def test_gd_ends_on_cyclic_rules():
    schema, cost = gd(["a", "b", "c"], parse_rules(["a -> b", "b -> a", "c -> a"]), 0)
    assert check_gnf(schema, parse_rules(["a -> b", "b -> a", "c -> a"])).ok
    assert cost.isolated  # the cycle was broken by publishing an RHS alone


def test_gd_release_of_table1_publishes_audits_and_estimates(tmp_path):
    data = write_table(TABLE1, tmp_path / "t1")
    result = publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2, method="gd")
    assert result.audit.passed and result.manifest["method"] == "gd"
    cost = result.manifest["method_cost"]
    assert cost["score"] == "order" and cost["kl_evaluations"] == 0  # no data read
    models, domains = release_models(open_release(result.path))
    est = Estimator(models, 6, domains)
    source = to_codes(TABLE1, domains)
    total = est.count({})
    assert abs(total - 6) < 1e-9  # p~ sums to 1 over the domain
    for a in TABLE1.columns:  # single-attribute counts are exact: every table covers every row
        for code in range(len(domains[a])):
            q = {a: frozenset({code})}
            assert abs(est.count(q) - exact_count(source, q)) < 1e-9


def test_the_papers_kl_pick_tells_where_values_lie():
    """Why `gd.score` defaults to `order` (decompose/gd.py): on six rows under
    `d -> e`, `e -> d`, GD's KL-scored add-back picks one schema for 18 of the 90
    placements of e's values and another for the other 72, and the schema is public.
    The seeded pick reads no data: one schema for every placement."""
    import itertools

    import numpy as np
    import pandas as pd

    from vpub_spark.decompose.gd import in_order
    from vpub_spark.utility.score import kl_scorer

    attrs, rules = list("abcde"), parse_rules(["d -> e", "e -> d"])
    rng = np.random.default_rng(0)
    base = {a: rng.permutation([0, 0, 1, 1, 2, 2]) for a in attrs}
    picked, plain = {}, set()
    for e in sorted(set(itertools.permutations([0, 0, 1, 1, 2, 2]))):
        frame = pd.DataFrame(base | {"e": np.array(e)})
        schema = gd(attrs, rules, 0, kl_scorer(frame, dict.fromkeys(attrs, 3), 2, 0))[0]
        picked[schema] = picked.get(schema, 0) + 1
        plain.add(gd(attrs, rules, 0, in_order)[0])
    assert sorted(picked.values()) == [18, 72] and len(plain) == 1


def test_gd_reads_no_data_unless_told_kl_unsafe(tmp_path, monkeypatch):
    """The default publish never samples rows for GD and says `score: order`; with
    `gd.score: kl-unsafe` it does, and the release's guarantee says audited only (the
    catalog's words and the export's posterior line); the bare `kl` is refused."""
    import pytest

    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.errors import SpecError
    from vpub_spark.release.export import guarantee_lines
    from vpub_spark.serve.catalog import guarantee

    data = write_table(TABLE1, tmp_path / "t1")
    sampled = []
    real = InProcessEngine.rows_sample
    monkeypatch.setattr(InProcessEngine, "rows_sample", lambda *a: sampled.append(1) or real(*a))
    safe = publish_inprocess(data, tmp_path / "a", RULES_1_3, method="gd")
    assert not sampled and safe.manifest["method_cost"]["score"] == "order"
    assert "audited only" not in guarantee(safe.manifest)
    unsafe = publish_inprocess(
        data, tmp_path / "b", RULES_1_3, method="gd", gd={"score": "kl-unsafe"}
    )
    assert sampled and unsafe.manifest["method_cost"]["score"] == "kl-unsafe"
    assert "audited only: no posterior guarantee (gd.score: kl-unsafe)" in guarantee(
        unsafe.manifest
    )
    assert "gd.score: kl-unsafe" in guarantee_lines(unsafe.manifest)[1]
    with pytest.raises(SpecError, match="kl-unsafe"):
        publish_inprocess(data, tmp_path / "c", RULES_1_3, method="gd", gd={"score": "kl"})
