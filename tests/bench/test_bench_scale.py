"""`vpub bench scale` and `vpub bench kl` on small tables: the sizes they report are the
release's, the model is the least-squares fit of the step times and predicts by its
formula, the KL computations and the workload answers agree. No timing is asserted."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from vpub_bench.bench_scale import BenchKl, BenchScale, bench_kl, bench_scale

pytestmark = pytest.mark.spark


def test_bench_scale_measures_fits_and_predicts(tmp_path, spark_engine):
    bench = BenchScale(
        rows=(20_000, 40_000, 80_000),
        warm_up_rows=10_000,
        out=str(tmp_path),
        figure=str(tmp_path / "model.png"),
    )
    r = bench_scale(bench)
    assert [run["rows"] for run in r["runs"]] == [20_000, 40_000, 80_000]
    for run in r["runs"]:
        # the sizes are the release's files; the steps were timed inside the wall time
        files = list((tmp_path / "releases" / f"sal-{run['rows']}").rglob("*.parquet"))
        assert run["files"] == len(files) >= run["partitions"]
        assert run["bytes"] == sum(f.stat().st_size for f in files)
        assert sum(run["steps_s"].values()) <= run["wall_s"]
    # the model is the least-squares line through the step times, t = a + b n / cores
    written = json.loads((tmp_path / "scale.json").read_text())
    cores = written["run"]["machine"]["cores"]
    n = np.array([run["rows"] for run in r["runs"]], float) / cores
    for step, line in r["model"].items():
        t = [run["steps_s"][step] for run in r["runs"]]
        b, a = np.polyfit(n, t, 1)
        assert (line["fixed_s"], line["core_s_per_row"]) == pytest.approx(
            (a, b), rel=1e-6, abs=1e-9
        )
        guess = line["fixed_s"] + line["core_s_per_row"] * 10**9 / r["prediction"]["cores"]
        assert r["prediction"]["steps_s"][step] == pytest.approx(guess)
    assert set(r["model"]) == {"read and encode", "plan partitions", "anonymize and write", "audit"}
    last = r["runs"][-1]
    assert r["prediction"]["partitions"] == int(
        np.ceil(10**9 / (last["rows"] / last["partitions"]))
    )
    assert written["runs"] == r["runs"] and (tmp_path / "model.png").stat().st_size > 0


def test_bench_kl_agrees_across_engines(tmp_path, spark_engine):
    bench_scale(
        BenchScale(
            rows=(20_000,), warm_up_rows=10_000, out=str(tmp_path), figure=str(tmp_path / "m.png")
        )
    )
    rel, src = str(tmp_path / "releases" / "sal-20000"), str(tmp_path / "sal-20000" / "data")
    r = bench_kl(BenchKl(rel, src, repeat=1, queries=200, out=str(tmp_path / "kl")))
    env = os.environ.get("VPUB_WORKERS")
    only = bench_kl(
        BenchKl(
            rel,
            src,
            repeat=1,
            queries=200,
            engines=("inprocess",),
            workers=(1, 2),
            out=str(tmp_path / "kl"),
        )
    )
    assert not any("spark" in k for k in only)
    for w in (1, 2):  # every in-process run once per worker count, the same values
        assert only[f"kl in process ({w} workers)"]["value"] == pytest.approx(
            r["kl in process"]["value"]
        )
        assert (
            only[f"workload in process ({w} workers)"]["value"] == r["workload in process"]["value"]
        )
    assert os.environ.get("VPUB_WORKERS") == env  # as it was
    kls = [r[k]["value"] for k in r if k.startswith("kl")]
    assert len(kls) == 6 and kls == pytest.approx([kls[0]] * 6, rel=1e-9)
    # the same 200 queries with the same exact answers, drawn and counted on either engine,
    # the source held or read inside the timer
    answers = [
        r[k]["value"]
        for k in ("workload spark", "workload in process", "workload in process, source read too")
    ]
    assert answers[0] == answers[1] == answers[2] and len(answers[0]) == 200
    timed = [k for k in r if k.startswith(("kl", "workload"))]
    assert all(r[k]["median_s"] == r[k]["runs_s"][0] and len(r[k]["runs_s"]) == 1 for k in timed)


def test_bench_kl_refuses_results_that_disagree():
    from vpub_bench.bench_scale import _check_agreement
    from vpub_spark.errors import VpubError

    _check_agreement(
        {"kl a": {"value": 2.0}, "kl b": {"value": 2.0 + 1e-12}, "workload x": {"value": [3]}}
    )
    with pytest.raises(VpubError, match="KL runs disagree"):
        _check_agreement({"kl a": {"value": 2.0}, "kl b": {"value": 2.1}})
    with pytest.raises(VpubError, match="workload answers disagree"):
        _check_agreement({"workload a": {"value": [3, 4]}, "workload b": {"value": [3, 5]}})
