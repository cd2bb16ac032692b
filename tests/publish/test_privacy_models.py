"""Privacy models beyond 000's l-diversity (`privacy.also`): what each method
guarantees (publishing/registry.check_models' proofs), tested on random tables with the
groups measured independently (kernels/classes.py), the refusals, the manifest, and an
audit that fails when a release does not meet the models its manifest claims."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from release_helpers import config, job_table, marginal_release, write_table

from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError
from vpub_spark.kernels.classes import COUNT, class_measures
from vpub_spark.model import PrivacySpec
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.reader import open_release

RULES = ["age -> job", "sex -> zip"]


def _groups(rel, entry) -> pd.DataFrame:
    """Each group's measures, from its ST counts (a group is the class)."""
    st_ = rel.read(entry["name"], "st").to_pandas()
    s = entry["sensitive"]
    counts = st_.rename(columns={"count": COUNT}).assign(**{s: st_[s].astype(str)})
    values = sorted(counts[s].unique())
    p = pd.Series(np.ones(len(values)) / len(values), index=values)
    return class_measures(
        counts[["group_id", s, COUNT]],
        ["group_id"],
        s,
        p,
        int(rel.manifest["privacy"].get("l") or rel.manifest["privacy"]["m"]),
        False,
    )


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(300, 1500), l=st.integers(2, 4))
def test_anatomy_meets_entropy_and_recursive_diversity(tmp_path_factory, seed, n, l):
    """000's groups (no share above 1/l) are entropy l-diverse and recursive (c, l)-diverse
    for every c > 1 (the proof is in check_models' docstring); measured here."""
    tmp = tmp_path_factory.mktemp("pm")
    data = write_table(job_table(seed, n), tmp / "t")
    cfg = config(data, tmp / "out", RULES, l, seed=seed)
    cfg = replace(
        cfg,
        privacy=PrivacySpec(
            "l-diversity", l, None, (("entropy_l", float(l)), ("recursive_c", 1.0001))
        ),
    )
    r = publish(cfg, InProcessEngine())
    assert r.audit.passed and r.manifest["privacy"]["also"] == {
        "entropy_l": float(l),
        "recursive_c": 1.0001,
    }
    rel = open_release(r.path)
    for entry in [e for e in rel.tables if e["kind"] == "anatomy"]:
        g = _groups(rel, entry)
        assert (g["entropy_l"] >= l - 1e-9).all() and (g["recursive_c"] <= 1.0 + 1e-12).all()


def test_marginals_meet_k_anonymity_up_to_m(tmp_path):
    """Recounted here from the published ST rows, not taken from the audit's verdict:
    every group holds at least k = 3 rows and exp(entropy) >= 3 of its sensitive values."""
    r = marginal_release(tmp_path, 5, 1500, also={"k": 3, "entropy_l": 3})
    names = [c.name for c in r.audit.checks]
    assert (
        r.audit.passed
        and any(n.endswith("k-anonymity") for n in names)
        and any(n.endswith("entropy l-diversity") for n in names)
    )
    rel = open_release(r.path)
    for entry in rel.tables:
        st_ = rel.read(entry["name"], "st").to_pandas()
        counts = st_.groupby(["group_id", entry["sensitive"]], observed=True)["count"].sum()
        sizes = counts.groupby(level=0).sum()
        shares = counts / sizes.reindex(counts.index.get_level_values(0)).to_numpy()
        entropy = (-shares * np.log(shares)).groupby(level=0).sum()
        assert sizes.sum() == 1500 and (sizes >= 3).all()
        assert (np.exp(entropy) >= 3 - 1e-9).all()


@pytest.mark.parametrize(
    ("also", "method", "message"),
    [
        ({"t": 0.2}, "uad", "no method of this version enforces t-closeness"),
        ({"entropy_l": 4}, "uad", "guarantees entropy l-diversity up to 3"),
        ({"recursive_c": 1}, "uad", "for every c > 1, not for c = 1"),
        ({"k": 3}, "uad", "cannot enforce k-anonymity"),
        ({"k": 3}, "multi_sa_bip", "privacy.also (k) is not available"),
        ({"q": 3}, "uad", "unknown model 'q'"),
    ],
)
def test_models_a_method_cannot_enforce_are_refused(tmp_path, also, method, message):
    d = {
        "input": {"path": str(tmp_path)},
        "privacy": {"l": 3, "also": also},
        "rules": RULES,
        "method": method,
        "output": {"path": str(tmp_path / "o")},
    }
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        publish(config_from_dict(d), InProcessEngine())
    assert not (tmp_path / "o").exists()


def test_the_audit_refuses_a_release_that_misses_its_claimed_models(tmp_path):
    data = write_table(job_table(9, 800), tmp_path / "t")
    path = publish(config(data, tmp_path / "out", RULES, 3, seed=1), InProcessEngine()).path
    manifest = json.loads((path / "manifest.json").read_text())
    for claim, failed in (
        ({"entropy_l": 3.5}, "entropy l-diversity"),
        ({"recursive_c": 0.5}, "recursive (c, l)-diversity"),
        ({"k": 3}, "k-anonymity"),
    ):
        (path / "manifest.json").write_text(
            json.dumps(manifest | {"privacy": manifest["privacy"] | {"also": claim}})
        )
        report = audit_release(path)
        assert not report.passed and any(failed in f for f in report.as_dict()["failures"]), claim
    (path / "manifest.json").write_text(
        json.dumps(
            manifest
            | {"privacy": manifest["privacy"] | {"also": {"entropy_l": 3, "recursive_c": 1.01}}}
        )
    )
    assert audit_release(path).passed  # what anatomy with l = 3 guarantees


@pytest.mark.parametrize("ordered", [False, True])
def test_the_audit_measures_t_as_the_check_kernel_does(tmp_path, ordered):
    """No method enforces t-closeness, but a manifest that claims it is audited: the
    audit's EMD per group equals kernels/classes.py's (written apart), at the claim's
    edge; equal distance for a categorical sensitive attribute, ordered for a numeric one."""
    data = write_table(job_table(4, 900), tmp_path / "t")
    if ordered:  # zip, the anatomy table's sensitive attribute, read as numbers
        spec = (
            (data / "table.yaml").read_text().replace("- name: zip", "- name: zip\n  kind: numeric")
        )
        (data / "table.yaml").write_text(spec)
    path = publish(config(data, tmp_path / "out", RULES, 3, seed=2), InProcessEngine()).path
    rel = open_release(path)
    entry = next(e for e in rel.tables if e["kind"] == "anatomy")
    st_ = rel.read(entry["name"], "st").to_pandas().rename(columns={"count": COUNT})
    s = entry["sensitive"]
    st_[s] = st_[s].astype(str)
    p = st_.groupby(s)[COUNT].sum() / st_[COUNT].sum()
    p = p.reindex(sorted(p.index, key=float)) if ordered else p
    t = float(
        class_measures(st_[["group_id", s, COUNT]], ["group_id"], s, p, 3, ordered)["t"].max()
    )
    manifest = json.loads((path / "manifest.json").read_text())
    for claim, ok in ((t + 1e-9, True), (t - 0.01, False)):
        (path / "manifest.json").write_text(
            json.dumps(manifest | {"privacy": manifest["privacy"] | {"also": {"t": claim}}})
        )
        assert audit_release(path).passed is ok, (claim, t)
