"""`vpub bench scale` and `vpub bench kl` (issue 18) on small tables: every number they
print is measured, the model is fitted on them, the three KL computations agree."""

from __future__ import annotations

import pytest

from vpub_spark.experiments.bench_scale import BenchKl, BenchScale, bench_kl, bench_scale

pytestmark = pytest.mark.spark


def test_bench_scale_measures_fits_and_predicts(tmp_path, spark_engine):
    bench = BenchScale(rows=(20_000, 40_000, 80_000), warm_up_rows=10_000, out=str(tmp_path), figure=str(tmp_path / "model.png"))  # fmt: skip
    r = bench_scale(bench)
    assert [run["rows"] for run in r["runs"]] == [20_000, 40_000, 80_000]
    for run in r["runs"]:
        assert run["wall_s"] > 0 and run["python_peak_bytes"] > 0 and run["files"] > 0
    assert set(r["model"]) == {"read and encode", "plan partitions", "anonymize and write", "audit"}
    assert r["prediction"]["rows"] == 10**9 and r["prediction"]["partitions"] > 0
    assert (tmp_path / "model.png").stat().st_size > 0 and (tmp_path / "scale.json").exists()


def test_bench_kl_agrees_across_engines(tmp_path, spark_engine):
    bench_scale(BenchScale(rows=(20_000,), warm_up_rows=10_000, out=str(tmp_path), figure=str(tmp_path / "m.png")))  # fmt: skip
    r = bench_kl(BenchKl(str(tmp_path / "releases" / "sal-20000"), str(tmp_path / "sal-20000" / "data"), repeat=1, out=str(tmp_path / "kl")))  # fmt: skip
    only = bench_kl(BenchKl(str(tmp_path / "releases" / "sal-20000"), str(tmp_path / "sal-20000" / "data"), repeat=1, engines=("inprocess",), out=str(tmp_path / "kl")))  # fmt: skip
    assert "spark one shuffle" not in only and only["inprocess"]["kl"] == pytest.approx(r["inprocess"]["kl"])  # fmt: skip
    kls = [r[name]["kl"] for name in ("inprocess", "spark one shuffle", "spark per term")]
    assert kls == pytest.approx([kls[0]] * 3, rel=1e-9) and all(r[n]["median_s"] > 0 for n in ("inprocess", "spark one shuffle"))  # fmt: skip
