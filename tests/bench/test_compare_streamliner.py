"""003 §4's comparison (Figures 1-7): a small run gives every method's DM (RDA and GDA
at the n l bound's ratio, Mondrian above), grouping times, the query-workload error
per predicate (GDA below RDA here) and plots; copies of the table
for the n sweep; clear errors for bad configs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from release_helpers import write_table

from vpub_bench.comparison import load_comparison, run_comparison
from vpub_spark.errors import SpecError


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 4000
    age = rng.integers(0, 79, n)
    frame = pd.DataFrame(
        {
            "age": age,
            "gender": rng.integers(0, 2, n),
            "education": rng.integers(0, 17, n),
            "birthplace": rng.integers(0, 57, n),
            "salary": (age // 4 + rng.integers(0, 12, n)) % 50,
        }
    ).astype(str)
    return write_table(frame, tmp_path_factory.mktemp("cs") / "t")


def _write(tmp_path, data, **compare):
    cfg = {
        "input": {"path": str(data)},
        "privacy": {"model": "l-diversity", "l": 6},
        "streamliner": {
            "sensitive": "salary",
            "qi": ["age", "gender", "education", "birthplace"],
            "weights": {"age": 1, "gender": 10000, "education": 1, "birthplace": 1},
        },
        "compare": {"queries": 150, **compare},
        "output": {"path": str(tmp_path / "out")},
        "seed": 2,
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_a_small_run_of_every_method(data, tmp_path):
    sweeps = [{"vary": "l", "values": [6, 8]}, {"vary": "n", "values": [4000, 10000]}]
    results, _, files = run_comparison(load_comparison(_write(tmp_path, data, sweeps=sweeps)))
    by = results[results["sweep"] == "l"].set_index(["value", "method"])
    assert set(by.index.get_level_values("method")) == {"rda", "gda", "mondrian", "anatomy"}
    for method in ("rda", "gda", "anatomy"):  # groups of about l: the bound n l, nearly
        assert (by.xs(method, level="method")["dm_ratio"] < 1.01).all()
    assert (by.xs("mondrian", level="method")["dm_ratio"] > 1.01).all()
    qwe = by["qwe_age"].unstack()
    assert (qwe["gda"] < qwe["rda"]).all()  # 003 §4.2: GDA answers better than RDA
    assert (by[[f"qwe_{c}" for c in ("age", "gender", "age_gender", "all")]] >= 0).all().all()
    times = results[results["sweep"] == "n"]
    assert set(times["method"]) == {"rda", "gda"} and set(times["n"]) == {4000, 10000}
    assert times["qwe_age"].isna().all() and times["time_s"].notna().all()
    assert {f.name for f in files} >= {"l_dm_ratio.png", "l_qwe_gender.png", "n_time_s.png"}
    assert "n_qwe_age.png" not in {f.name for f in files}


def test_bad_configs_are_refused(data, tmp_path):
    raw = yaml.safe_load(open(_write(tmp_path, data)))
    raw["streamliner"]["qi"] = ["age", "height"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match="unknown attributes height"):
        run_comparison(load_comparison(str(tmp_path / "c.yaml")))
    raw["streamliner"]["qi"] = ["age", "education"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match="need QI attributes gender"):
        run_comparison(load_comparison(str(tmp_path / "c.yaml")))
    del raw["streamliner"]["qi"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match="streamliner.qi is required"):
        load_comparison(str(tmp_path / "c.yaml"))
