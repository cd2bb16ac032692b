"""`vpub explore`: the Adult UAD config swept over l, rules fixed once, each value
measured as `vpub utility` measures a release, ineligible values skipped and shown,
the recommendation the largest l within the budget; a sweep with no eligible value is
refused in one line with nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vpub_spark.cli import main
from vpub_spark.config import load_config, with_overrides
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError
from vpub_spark.explore import fixed_rules, parse_vary

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT.parent / "shared" / "data" / "adult"
CONF = ROOT / "conf" / "adult_uad.yaml"

pytestmark = pytest.mark.skipif(not ADULT.is_dir(), reason="shared/data/adult is missing")


def page_data(html: str) -> dict:
    import json

    found = re.search(r'id="report-data">(.*?)</script>', html, re.S)
    assert found
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_a_sweep_over_l_on_adult(capsys, tmp_path, monkeypatch):
    import tempfile

    scratch = tmp_path / "tmp"  # where the sweep's scratch directory goes
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "sweep.html"
    code = main(
        ["explore", "--config", str(CONF), "--input", str(ADULT), "--vary", "l=2,3,12"]
        + ["--engine", "inprocess", "--budget", "0.5", "--out", str(out)]
    )
    said = capsys.readouterr().out
    assert code == 0, said
    html = out.read_text()
    data = page_data(html)
    points = {p["value"]: p for p in data["points"]}
    assert points[2]["skipped"] is None and points[3]["skipped"] is None
    assert points[12]["skipped"] and "cannot be met" in points[12]["skipped"]  # l = 12: skipped
    assert "skipped: " in html and "l = 12: skipped" in " ".join(said.split())
    within = [v for v, p in points.items() if not p["skipped"] and p["median_error"] <= 0.5]
    assert data["recommended"] == max(within)
    assert f"Recommended: l = {max(within)}" in html
    assert len(data["rules"]) == 5 and html.count('<img src="data:image/svg+xml;base64,') == 1
    assert not list(scratch.iterdir())  # the scratch releases, records and stores: gone


def test_random_rules_are_drawn_once_at_the_largest_drawable_value():
    cfg = with_overrides(load_config(str(CONF)), input_path=str(ADULT), engine="inprocess")
    fixed, rules = fixed_rules(cfg, InProcessEngine(), "l", [2, 3, 12])
    at_three, expected = fixed_rules(with_overrides(cfg, l=3), InProcessEngine(), "l", [3])
    assert rules == expected and fixed.rules == at_three.rules  # l = 12: no RHS eligible
    again, _ = fixed_rules(fixed, InProcessEngine(), "l", [2])
    assert again.rules == fixed.rules  # written-out rules stay as they are


@pytest.mark.parametrize("vary", ["k=2,3", "l=", "l=1,2", "l=two", "m2"])
def test_vary_must_name_l_or_m_and_whole_numbers(vary):
    with pytest.raises(SpecError, match="--vary"):
        parse_vary(vary)


def test_no_eligible_value_is_one_line_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "none.html"
    code = main(
        ["explore", "--config", str(CONF), "--input", str(ADULT), "--vary", "l=40,50"]
        + ["--engine", "inprocess", "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.strip().startswith("vpub: error: no attribute")
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and not list(tmp_path.iterdir())
    code = main(["explore", "--config", str(CONF), "--vary", "m=2,3", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "vary l" in err and not out.exists()


def test_a_sweep_over_m_of_marginals(capsys, tmp_path):
    """`--vary m=` on a marginals config: each value with a scratch store of its own; a
    value above what the table allows is skipped."""
    import numpy as np
    import pandas as pd
    import yaml
    from release_helpers import write_table

    rng = np.random.default_rng(3)
    age = rng.integers(20, 70, 1200)
    frame = pd.DataFrame(
        {
            "age": age.astype(str),
            "zip": rng.integers(10, 30, 1200).astype(str),
            "job": [f"j{x:02d}" for x in (age // 5 + rng.integers(0, 7, 1200)) % 12],
        }
    )
    data = write_table(frame, tmp_path / "t")
    conf = tmp_path / "marginals.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "input": {"path": str(data)},
                "method": "marginals",
                "privacy": {"model": "m-invariance", "m": 3},
                "marginals": {
                    "sensitive": "job",
                    "schemas": [["age"], ["age", "zip"]],
                    "state": str(tmp_path / "never-written"),
                },
                "output": {"path": str(tmp_path / "never-published")},
                "engine": "inprocess",
            }
        )
    )
    out = tmp_path / "m.html"
    code = main(["explore", "--config", str(conf), "--vary", "m=2,4,40", "--out", str(out)])
    said = " ".join(capsys.readouterr().out.split())
    assert code == 0, said
    points = {p["value"]: p for p in page_data(out.read_text())["points"]}
    assert points[2]["skipped"] is None and points[4]["skipped"] is None
    assert points[40]["skipped"] and "m = 40: skipped" in said
    assert not (tmp_path / "never-written").exists() and not (tmp_path / "never-published").exists()
