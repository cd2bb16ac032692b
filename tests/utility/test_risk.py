"""Risk and information-loss figures (utility/risk.py): the formulas on known
class sizes, the anatomy QIT's prosecutor risk against pyCANON's k, generalized tables'
risk bounded by 1/m and their GCP computed by hand, and `vpub utility` showing them."""

from __future__ import annotations

import numpy as np
import pytest
from pycanon import anonymity
from release_helpers import config, job_table, marginal_release, write_table

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.reader import open_release
from vpub_spark.utility.risk import class_risks, release_risk


def test_formulas_on_known_classes():
    r = class_risks(np.array([1, 2, 3]))
    assert r == pytest.approx(
        {
            "prosecutor_max": 1.0,
            "prosecutor_avg": 0.5,
            "journalist_max": 1.0,
            "marketer": 0.5,
            "sample_uniqueness": 1 / 6,
            "avg_class_size": 2.0,
            "discernibility": 14.0,
        }
    )


def test_anatomy_qit_risk_equals_pycanon_k(tmp_path):
    data = write_table(job_table(2, 2000), tmp_path / "t")
    rel = open_release(
        publish(
            config(data, tmp_path / "o", ["age -> job", "sex -> zip"], 3, seed=1), InProcessEngine()
        ).path
    )
    risks = release_risk(rel)
    for t in rel.tables:
        if t["kind"] != "anatomy":
            continue
        qit = rel.read(t["name"], "qit").to_pandas().drop(columns="group_id").astype(str)
        k = anonymity.k_anonymity(qit, list(qit.columns))
        assert risks[t["name"]]["prosecutor_max"] == pytest.approx(1 / k)
        assert risks[t["name"]]["marketer"] == pytest.approx(len(qit.drop_duplicates()) / len(qit))
        assert risks[t["name"]]["gcp"] == 0.0


def test_generalized_risk_and_gcp(tmp_path):
    rel = open_release(marginal_release(tmp_path, 5, 1500).path)
    entry = rel.tables[0]
    r = release_risk(rel)[entry["name"]]
    assert r["prosecutor_max"] <= 1 / 3 and 0 < r["gcp"] <= 1
    groups = rel.read(entry["name"], "groups").to_pandas()
    ncp = []
    for _, g in groups.iterrows():  # by hand, one group at a time (a few hundred rows)
        per = [
            (
                entry["domains"][a].index(str(g[f"{a}_max"]))
                - entry["domains"][a].index(str(g[f"{a}_min"]))
            )
            / (len(entry["domains"][a]) - 1)
            for a in ("age", "zip")
        ]
        ncp.append(np.mean(per))
    assert r["gcp"] == pytest.approx(np.average(ncp, weights=groups["size"]))
