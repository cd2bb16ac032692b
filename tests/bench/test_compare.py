"""`vpub compare` on a small generated table: a tidy results table and the plots."""

import pandas as pd
import yaml

from vpub_spark.cli import main


def test_compare_writes_results_and_plots(tmp_path, capsys):
    assert (
        main(
            [
                "datasets",
                "generate",
                "sal",
                "--rows",
                "3000",
                "--seed",
                "2",
                "--out",
                str(tmp_path / "sal"),
                "--engine",
                "inprocess",
            ]
        )
        == 0
    )
    conf = tmp_path / "compare.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "engine": "inprocess",
                "input": {"path": str(tmp_path / "sal"), "sample_rows": 2000},
                "privacy": {"l": 4},
                "compare": {
                    "methods": ["uad", "gd", "single_attribute", "multi_sa_bip"],
                    "repeats": 2,
                    "queries": 50,
                    "sweeps": [{"vary": "c", "values": [1, 3]}, {"vary": "qd", "values": [2]}],
                },
                "gd": {"budget_s": 5, "sample_rows": 1000},
                "output": {"path": str(tmp_path / "cmp")},
                "seed": 3,
            }
        )
    )
    assert main(["compare", "--config", str(conf)]) == 0
    results = pd.read_parquet(tmp_path / "cmp" / "results.parquet")
    assert len(results) == 3 * 2 * 4  # (2 values of c + 1 of qd) x 2 repeats x 4 methods
    assert (results["kl"] >= 0).all() and results["relative_error"].notna().all()
    one_rule = results[(results["sweep"] == "c") & (results["value"] == 1)]
    by = one_rule.groupby(["repeat", "method"])["kl"].first().unstack()
    assert (abs(by["uad"] - by["gd"]) < 1e-9).all()  # 000 §6.2: with one rule UAD and GD coincide
    assert (by["single_attribute"] >= by["uad"] - 1e-9).all()
    # Algorithm 3's largest group: with one rule the whole sample is one bucket, so multi-SA loses to anatomy
    assert (by["multi_sa_bip"] > by["uad"]).all()
    for f in (
        "results.csv",
        "summary.csv",
        "c_kl.png",
        "c_relative_error.png",
        "c_time_s.png",
        "qd_kl.png",
    ):
        assert (tmp_path / "cmp" / f).stat().st_size > 0
    conf.write_text(yaml.safe_dump({"engine": "spark", "input": {"path": "x"}}))
    assert main(["compare", "--config", str(conf)]) == 2
    assert "engine must be one of inprocess" in capsys.readouterr().err
