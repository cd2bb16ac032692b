"""The multi-SA baseline end to end (000 Appendix B): the chunk kernel over random
tables (every group meets the condition, suppressed rows hide every sensitive value,
row order does not matter), releases in both modes audited against the source, the
infeasible path, a forced time limit in the manifest, a tampered release refused, the
estimate against enumeration, and the Spark engine giving the same release."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from release_helpers import config, contents, publish_inprocess, same_contents, write_table

from vpub_spark.cli import main
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.estimate.multi_sa import multi_sa_model
from vpub_spark.kernels.anatomy import COUNT, GROUP
from vpub_spark.kernels.bip import meets_constraints, multi_sa_chunk, sa_combinations
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.reader import open_release

RULES = ["q1, q2 -> s1", "q1 -> s2", "s1, q2 -> s3"]  # QI = q1, q2; SA = s1, s2, s3


def _table(seed: int, n: int, domain: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {"q1": rng.integers(0, 12, n), "q2": rng.integers(0, 4, n)}
    cols |= {s: rng.integers(0, domain, n) for s in ("s1", "s2", "s3")}
    return pd.DataFrame(cols).astype(np.int32)


def _check_groups(res, sa, l):
    """Every published group meets 000 Appendix B's condition; suppressed rows are one null row."""
    shown = res.st.dropna()
    for _, g in shown.groupby(GROUP):
        combos, inv = np.unique(g[sa].to_numpy(dtype=np.int64), axis=0, return_inverse=True)
        assert meets_constraints(
            combos, np.bincount(inv.reshape(-1), weights=g[COUNT]).astype(int), l
        )
    hidden = res.st[res.st[sa].isna().any(axis=1)]
    assert hidden[sa].isna().all(axis=None) and len(hidden) == (res.suppressed_rows > 0)
    assert int(hidden[COUNT].sum()) == res.suppressed_rows
    sizes = res.qit.groupby(GROUP).size()
    assert sizes.to_dict() == res.st.groupby(GROUP)[COUNT].sum().to_dict()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 400),
    s=st.integers(1, 3),
    l=st.integers(2, 3),
    domain=st.integers(1, 4),
)
def test_chunk_groups_meet_the_condition_and_ignore_row_order(seed, n, s, l, domain):
    frame = _table(seed, n, domain)
    sa = ["s1", "s2", "s3"][:s]
    qi = ["q1", "q2"]
    res = multi_sa_chunk(frame[qi + sa], qi, sa, l, seed=5, first_group=100)
    _check_groups(res, sa, l)
    assert len(res.qit) == n and res.qit[GROUP].min() >= 100 and res.qit[GROUP].max() < 100 + n
    assert sum(g.sum() for g in res.plan.groups) + res.suppressed_rows == n
    shuffled = frame[qi + sa].sample(frac=1, random_state=seed).reset_index(drop=True)
    again = multi_sa_chunk(shuffled, qi, sa, l, seed=5, first_group=100)
    assert again.qit.equals(res.qit) and again.st.equals(res.st)


def test_rows_follow_the_quotas():
    frame = _table(3, 2000)
    res = multi_sa_chunk(frame, ["q1", "q2"], ["s1", "s2"], 2, seed=1)
    combos, _, inverse = sa_combinations(frame.sort_values(["s1", "s2", "q1", "q2"]), ["s1", "s2"])
    for g, quota in enumerate(res.plan.groups):
        got = res.st[res.st[GROUP] == g].dropna()
        per = {tuple(int(v) for v in r[["s1", "s2"]]): int(r[COUNT]) for _, r in got.iterrows()}
        want = {tuple(int(v) for v in combos[k]): int(quota[k]) for k in np.flatnonzero(quota)}
        assert per == want


@pytest.fixture
def data(tmp_path):
    frame = _table(0, 3000).astype(str)
    return write_table(frame, tmp_path / "t")


@pytest.fixture
def spread(tmp_path):
    """Five values per sensitive attribute: no value above 1/(2l) of the table at l = 2,
    so the chunk planner can cut it (kernels/partitioning.py: a range it cannot cut
    safely stays one chunk)."""
    return write_table(_table(0, 3000, domain=5).astype(str), tmp_path / "t5")


@pytest.mark.parametrize("mode", ["exact", "partitioned"])
def test_release_audits_clean_and_is_deterministic(data, spread, tmp_path, mode):
    data = spread if mode == "partitioned" else data
    kw = dict(method="multi_sa_bip", multi_sa={"mode": mode, "chunk_rows": 400})
    a = publish_inprocess(data, tmp_path / "a", RULES, 2, **kw)
    b = publish_inprocess(data, tmp_path / "b", RULES, 2, **kw)
    assert same_contents(contents(a.path), contents(b.path))
    (entry,) = a.manifest["tables"]
    assert entry["kind"] == "multi_sa" and entry["sensitive"] == ["s1", "s2", "s3"]
    cost = a.manifest["method_cost"]
    assert cost["mode"] == mode and cost["all_optimal"] and cost["solves"] >= 1
    assert (cost["chunks"] > 1) == (mode == "partitioned")
    report = audit_release(a.path, source=str(data / "data"))
    assert report.passed, report.as_dict()
    assert any(c.name == "multi_sa: multi-SA 2-diverse" for c in report.checks)
    # recounted from the published ST rows, not the audit's verdict: every group holds
    # every source row once, and no value of any sensitive attribute above half a group
    st_ = open_release(a.path).read(entry["name"], "st").to_pandas().dropna()
    sizes = st_.groupby(GROUP)[COUNT].sum()
    assert sizes.sum() + entry.get("suppressed_rows", 0) == 3000
    for s in entry["sensitive"]:
        top = st_.groupby([GROUP, s])[COUNT].sum().groupby(level=0).max()
        assert (2 * top <= sizes.reindex(top.index)).all(), s
    assert all(v["status"] == "guardian" for v in a.manifest["gnf"]["verdicts"])


def test_infeasible_rows_are_suppressed_and_reported(tmp_path):
    frame = _table(1, 600).astype(str)
    heavy = pd.DataFrame(
        {
            "q1": ["0"] * 200,
            "q2": ["1"] * 200,
            "s1": ["9"] * 200,
            "s2": ["9"] * 200,
            "s3": ["9"] * 200,
        }
    )
    data = write_table(pd.concat([frame, heavy], ignore_index=True), tmp_path / "t")
    result = publish_inprocess(data, tmp_path / "out", RULES, 2, method="multi_sa_bip")
    entry = result.manifest["tables"][0]
    assert (
        entry["suppressed_rows"] >= 100
        and result.manifest["method_cost"]["suppressed_rows"] == entry["suppressed_rows"]
    )
    st_ = pd.read_parquet(result.path / "tables" / "multi_sa" / "st")
    assert st_[["s1", "s2", "s3"]].isna().all(axis=1).sum() == 1
    assert audit_release(result.path, source=str(data / "data")).passed


def test_time_limit_is_recorded_never_called_optimal(tmp_path):
    rng = np.random.default_rng(0)
    combos = np.unique(rng.integers(0, 10, (1000, 3)), axis=0)
    rows = np.repeat(combos, rng.integers(1, 20, len(combos)), axis=0)
    frame = pd.DataFrame(
        {"q": rng.integers(0, 5, len(rows)), "s1": rows[:, 0], "s2": rows[:, 1], "s3": rows[:, 2]}
    ).astype(str)
    data = write_table(frame, tmp_path / "t")
    result = publish_inprocess(
        data,
        tmp_path / "out",
        ["q -> s1", "q -> s2", "q -> s3"],
        3,
        method="multi_sa_bip",
        multi_sa={"time_limit_s": 0.01},
    )
    cost = result.manifest["method_cost"]
    assert not cost["all_optimal"] and cost["time_limited"] >= 1
    assert all(s["status"] != "optimal" for s in cost["driver_solves"][:1])
    assert result.audit.passed


def test_tampered_multi_sa_release_is_refused(data, tmp_path):
    result = publish_inprocess(data, tmp_path / "out", RULES, 2, method="multi_sa_bip")
    st_dir = result.path / "tables" / "multi_sa" / "st"
    (f,) = sorted(st_dir.glob("*.parquet"))
    st_ = pd.read_parquet(f)
    st_.loc[0, COUNT] += 10_000  # one combination now dominates its group
    qit_dir = result.path / "tables" / "multi_sa" / "qit"
    qit = pd.read_parquet(qit_dir)
    extra = pd.concat([qit[qit[GROUP] == st_.loc[0, GROUP]].head(1)] * 10_000, ignore_index=True)
    st_.to_parquet(f, index=False)
    extra.to_parquet(qit_dir / "part-99999.parquet", index=False)
    report = audit_release(result.path)
    assert not report.passed
    assert any("multi-SA 2-diverse" in c.name and not c.ok for c in report.checks)


def test_estimate_equals_enumeration_with_suppression():
    frame = pd.concat(
        [
            _table(2, 60, 2),
            pd.DataFrame(
                {"q1": [1] * 8, "q2": [0] * 8, "s1": [1] * 8, "s2": [1] * 8, "s3": [1] * 8}
            ),
        ]
    ).astype(np.int32)
    qi, sa = ["q1", "q2"], ["s1", "s2", "s3"]
    res = multi_sa_chunk(frame, qi, sa, 2, seed=0)
    assert res.suppressed_rows > 0
    sizes = {"q1": 12, "q2": 4, "s1": 2, "s2": 2, "s3": 2}
    model = multi_sa_model(res.qit, res.st, qi + sa, sa, sizes)
    cells = pd.DataFrame(
        list(itertools.product(*(range(sizes[a]) for a in qi + sa))), columns=qi + sa
    ).astype(np.int32)
    est = model.marginal(cells)
    assert est.sum() == pytest.approx(len(frame))
    # by hand: per group, QI counts times the combination's share (uniform where suppressed)
    by_hand = np.zeros(len(cells))
    for g, rows in res.qit.groupby(GROUP):
        n_q = (
            cells[qi]
            .merge(rows.groupby(qi).size().rename("n").reset_index(), on=qi, how="left")["n"]
            .fillna(0)
            .to_numpy()
        )
        st_g = res.st[res.st[GROUP] == g]
        if st_g[sa].isna().any(axis=None):
            share = np.full(len(cells), 1 / 8)
        else:
            w = st_g.astype({a: np.int32 for a in sa}).assign(w=st_g[COUNT] / st_g[COUNT].sum())
            share = cells[sa].merge(w[[*sa, "w"]], on=sa, how="left")["w"].fillna(0).to_numpy()
        by_hand += n_q * share
    assert est == pytest.approx(by_hand)
    query = {"q2": frozenset({0, 1}), "s1": frozenset({1}), "s3": frozenset({0, 1})}
    mask = cells["q2"].isin([0, 1]) & cells["s1"].isin([1])
    assert model.count(query) == pytest.approx(est[mask.to_numpy()].sum())
    assert model.marginal(cells[["q1", "s2"]]).sum() == pytest.approx(len(cells) / 24 * len(frame))


def test_cli_publish_and_utility(data, tmp_path, capsys):
    cfg = {
        "engine": "inprocess",
        "input": {"path": str(data)},
        "privacy": {"l": 2},
        "rules": RULES,
        "method": "multi_sa_bip",
        "multi_sa": {"mode": "partitioned", "chunk_rows": 500, "solver": "highs"},
        "output": {"path": str(tmp_path / "out"), "release_id": "r"},
    }
    (tmp_path / "c.yaml").write_text(json.dumps(cfg))
    assert main(["publish", "--config", str(tmp_path / "c.yaml")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines
    assert "multi-SA (partitioned, highs" in out and "proven optimal" in out
    assert (
        main(
            [
                "utility",
                str(tmp_path / "out" / "r"),
                "--source",
                str(data / "data"),
                "--queries",
                "50",
            ]
        )
        == 0
    )
    assert "KL" in capsys.readouterr().out


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["exact", "partitioned"])
def test_spark_publishes_the_same_multi_sa_release(spark_engine, data, spread, tmp_path, mode):
    data = spread if mode == "partitioned" else data
    kw = dict(method="multi_sa_bip", multi_sa={"mode": mode, "chunk_rows": 700})
    a = publish(config(data, tmp_path / "a", RULES, 2, **kw), InProcessEngine())
    b = publish(config(data, tmp_path / "b", RULES, 2, engine="spark", **kw), spark_engine)
    assert same_contents(contents(a.path), contents(b.path))
    assert a.manifest["method_cost"]["chunks"] == b.manifest["method_cost"]["chunks"]
    if mode == "partitioned":
        assert b.partitions["task"].nunique() == b.manifest["method_cost"]["chunks"] > 1
    assert audit_release(b.path, source=str(data / "data")).passed
