"""The registry of privacy criteria (vpub_spark/privacy.py): one entry carries a criterion
through the config, the publish refusals, `vpub check` on both sides of its summary and
the audit. A criterion registered in a test alone (no other file touched) must work
everywhere, which is what "adding a privacy model" promises."""

from __future__ import annotations

import json
import math

import pytest
from release_helpers import config, job_table, write_table

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError
from vpub_spark.privacy import CRITERIA, Criterion, thresholds, thresholds_from_text
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.utility.check import Model, check_table

RULES = ["age -> job", "sex -> zip"]
DIVERSE = Criterion(  # distinct l-diversity again, under another name
    "diverse_l",
    "diverse-value l-diversity",
    "l",
    "min",
    lambda v, p: v <= p,
    "{name} promises {title} up to {p}, not {value:g}",
    measure="distinct_l",
)


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("k", [1, 5], [0, 2.5, True, math.inf]),
        ("distinct_l", [1, 3], [0.5, -1, "3"]),
        ("entropy_l", [1, 2.5], [0.99, math.nan]),
        ("recursive_c", [0.1, 3], [0, -1, math.inf]),
        ("t", [0, 0.3, 1], [-0.1, 1.01, math.nan]),
    ],
)
def test_each_criterion_accepts_its_range_only(key, good, bad):
    for value in good:
        assert CRITERIA[key].problem(value) is None, value
    for value in bad:
        assert CRITERIA[key].problem(value), value
        with pytest.raises(SpecError, match=f"privacy.also.{key}"):
            thresholds([(key, value)], "privacy.also")


def test_the_command_line_names_are_the_config_names_and_the_short_ones():
    assert thresholds_from_text("k=5,distinct_l=3,recursive_c=2,t=0.2") == (
        ("k", 5),
        ("distinct_l", 3),
        ("recursive_c", 2),
        ("t", 0.2),
    )
    assert thresholds_from_text("l=3,c=2") == (("distinct_l", 3), ("recursive_c", 2))
    with pytest.raises(SpecError, match="given twice"):
        thresholds_from_text("l=3,distinct_l=3")


def test_meets_is_the_same_on_floats_and_columns():
    """A class exactly at its threshold meets min criteria and t, not recursive c
    (r_1 < c (r_l + ...) is strict)."""
    import pandas as pd

    for key, at in (("k", True), ("entropy_l", True), ("recursive_c", False), ("t", True)):
        found = CRITERIA[key]
        assert bool(found.meets(2.0, 2.0)) is at
        assert found.meets(pd.Series([2.0]), 2.0).tolist() == [at]


def test_distinct_l_is_enforced_refused_and_audited(tmp_path):
    data = write_table(job_table(5, 900), tmp_path / "t")
    also = {"privacy": {"l": 3, "also": {"distinct_l": 3}}}
    r = publish(config(data, tmp_path / "out", RULES, 3, seed=1, **also), InProcessEngine())
    assert r.audit.passed and any(c.name.endswith("distinct l-diversity") for c in r.audit.checks)
    too_many = {"privacy": {"l": 3, "also": {"distinct_l": 4}}}
    with pytest.raises(SpecError, match="distinct l-diversity up to 3"):
        publish(config(data, tmp_path / "o2", RULES, 3, seed=1, **too_many), InProcessEngine())
    manifest = json.loads((r.path / "manifest.json").read_text())
    manifest["privacy"]["also"] = {"distinct_l": 4}
    (r.path / "manifest.json").write_text(json.dumps(manifest))
    report = audit_release(r.path)
    assert not report.passed and any("distinct l-diversity" in c.name for c in report.failures)


def test_a_criterion_added_in_the_registry_alone_works_everywhere(tmp_path, monkeypatch):
    monkeypatch.setitem(CRITERIA, DIVERSE.key, DIVERSE)
    data = write_table(job_table(6, 900), tmp_path / "t")
    also = {"privacy": {"l": 3, "also": {"diverse_l": 3}}}
    r = publish(config(data, tmp_path / "out", RULES, 3, seed=1, **also), InProcessEngine())
    names = [c.name for c in r.audit.checks]
    assert r.audit.passed and any(n.endswith("diverse-value l-diversity") for n in names)
    with pytest.raises(SpecError, match="promises diverse-value l-diversity up to 3, not 5"):
        refused = {"privacy": {"l": 3, "also": {"diverse_l": 5}}}
        publish(config(data, tmp_path / "o2", RULES, 3, seed=1, **refused), InProcessEngine())
    csv = tmp_path / "t.csv"
    job_table(6, 900).to_csv(csv, index=False)
    report = check_table(InProcessEngine(), str(csv), ["age"], "job", Model.of(diverse_l=2))
    standard = check_table(InProcessEngine(), str(csv), ["age"], "job", Model.of(distinct_l=2))
    assert list(report.checks) == ["diverse-value l-diversity (l = 2)"]
    assert list(report.checks.values()) == list(standard.checks.values())


def test_a_damaged_claim_fails_the_audit_in_one_check(tmp_path):
    """A manifest whose privacy.also is not a mapping, names an unknown criterion or a
    threshold its criterion does not take fails a check; the audit does not crash."""
    data = write_table(job_table(8, 600), tmp_path / "t")
    r = publish(config(data, tmp_path / "out", RULES, 3, seed=1), InProcessEngine())
    manifest = json.loads((r.path / "manifest.json").read_text())
    for claim in (["k"], {"k": "5"}, {"entropy_l": None}, {"q": 2}, {"k": 10**400}):
        manifest["privacy"]["also"] = claim
        (r.path / "manifest.json").write_text(json.dumps(manifest))
        report = audit_release(r.path)
        assert not report.passed and any("privacy.also" in c.name for c in report.failures), claim


def test_thresholds_far_beyond_a_float_are_refused_in_one_line():
    """They are compared with float measures (the comparison overflowed)."""
    for value in ("x", 10**400):
        with pytest.raises(SpecError, match="privacy.also.k must be a whole number"):
            thresholds([("k", value)], "privacy.also")
    with pytest.raises(SpecError, match="--model.l must be a whole number"):
        thresholds_from_text("l=2.5")
