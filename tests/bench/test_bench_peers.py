"""`vpub bench peers` on a small table: both tools run in their own process and
report measured figures, ANJANA's output is l-diverse (checked with pyCANON), and the
generalized estimate is exact on ungeneralized rows and uniform on generalized ones."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity
from release_helpers import job_table, write_table

from vpub_bench.bench_peers import (
    BenchPeers,
    bench_peers,
    generalized_estimate,
    hierarchies,
)


def test_generalized_estimate():
    table = pd.DataFrame({"a": ["1", "1~3", "*"], "s": ["x", "x", "y"]})
    covers = {"a": {"1": {"1"}, "1~3": {"1", "2", "3"}, "*": {"1", "2", "3", "4"}}}
    assert generalized_estimate(table, {"a": {"1"}}, covers) == pytest.approx(1 + 1 / 3 + 1 / 4)
    assert generalized_estimate(table, {"a": {"1", "2"}, "s": {"x"}}, covers) == pytest.approx(
        1 + 2 / 3
    )


def test_hierarchies_are_aligned_three_levels():
    h = hierarchies(pd.DataFrame({"a": [str(v) for v in range(10)]}), ("a",))["a"]
    assert list(h) == [0, 1, 2] and len({len(v) for v in h.values()}) == 1
    assert h[1][0] == "0~2" and h[1][9] == "9~9" and set(h[2]) == {"*"}


def test_bench_peers_runs_both_tools(tmp_path):
    data = write_table(job_table(3, 1200), tmp_path / "t")
    r = bench_peers(
        BenchPeers(str(data), ("age", "zip"), "job", l=2, queries=100, out=str(tmp_path / "b"))
    )
    for tool in ("vpub", "anjana"):
        assert all(np.isfinite(r[tool][k]) for k in ("wall_s", "peak_rss", "relative_error"))
    assert r["queries"] == 100 and (tmp_path / "b" / "results.json").exists()
    # the JSON the docs' benchmark pages are made from: the run's record and every table
    written = json.loads((tmp_path / "b" / "results.json").read_text())
    assert (
        written["run"]["command"].startswith("vpub")
        and written["run"]["date"]
        and written["run"]["machine"]["cores"] >= 1
        and written["tables"]
        and all(len(row) == len(t["columns"]) for t in written["tables"] for row in t["rows"])
    )
    theirs = pd.read_csv(tmp_path / "b" / "anjana.csv", dtype=str)
    assert (
        len(theirs) == r["anjana"]["rows_out"] > 0
        and anonymity.l_diversity(theirs, ["age", "zip"], ["job"]) >= 2
    )
