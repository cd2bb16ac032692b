"""`method: rda | gda | ria` (003): a release of one generalized l-diverse table that the
auditor passes, on both engines (equal releases), with the discernibility cost in the
manifest; bad configs and ineligible tables are refused before anything is written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from release_helpers import contents, same_contents, write_table

from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import PrivacyError, SpecError
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.reader import open_release


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(3)
    n = 3000
    age = rng.integers(17, 80, n)
    frame = pd.DataFrame(
        {
            "age": age.astype(str),
            "gender": rng.choice(["F", "M"], n),
            "edu": rng.integers(0, 16, n).astype(str),
            "salary": [f"s{x:02d}" for x in (age // 6 + rng.integers(0, 9, n)) % 20],
        }
    )
    return write_table(frame, tmp_path_factory.mktemp("sl") / "t")


def _cfg(data, out, method, l=5, **section):
    return config_from_dict(
        {
            "input": {"path": str(data)},
            "method": method,
            "privacy": {"model": "l-diversity", "l": l},
            "streamliner": {"sensitive": "salary", "chunk_rows": 1000, **section},
            "output": {"path": str(out), "release_id": method},
            "engine": "inprocess",
            "seed": 4,
        }
    )


@pytest.mark.parametrize("method", ["rda", "gda", "ria"])
def test_each_method_publishes_an_audited_l_diverse_table(data, tmp_path, method):
    r = publish(
        _cfg(data, tmp_path, method, weights={"gender": 1000, "edu": 64, "age": 1}),
        InProcessEngine(),
    )
    assert r.audit.passed
    report = audit_release(r.path)
    assert any(c.name == f"{method}: 5-diverse" and c.ok for c in report.checks)
    rel = open_release(r.path)
    st = rel.read(method, "st").to_pandas()
    per = st.groupby("group_id")["count"].agg(["sum", "max"])
    assert (per["max"] * 5 <= per["sum"]).all() and per["sum"].sum() == 3000
    if method != "ria":
        assert (
            rel.manifest["method_cost"]["dm"] < 3000 * 7
        )  # groups of about l (ria merges into few)


@pytest.mark.parametrize("method", ["rda", "gda", "ria"])
def test_spark_and_in_process_releases_are_equal(data, tmp_path, spark_engine, method):
    a = publish(_cfg(data, tmp_path / "a", method), InProcessEngine())
    b = publish(_cfg(data, tmp_path / "b", method), spark_engine)
    assert same_contents(contents(a.path), contents(b.path))
    assert a.manifest["method_cost"] == b.manifest["method_cost"]


def test_a_broken_group_fails_the_audit(data, tmp_path):
    r = publish(_cfg(data, tmp_path, "rda"), InProcessEngine())
    st_file = sorted((r.path / "tables" / "rda" / "st").glob("*.parquet"))[0]
    frame = pd.read_parquet(st_file)
    frame.loc[0, "count"] += 10  # one value now dominates its group
    frame.to_parquet(st_file, index=False)
    report = audit_release(r.path, require_committed=False)
    assert any(c.name == "rda: 5-diverse" and not c.ok for c in report.checks)


def test_bad_configs_and_ineligible_tables_are_refused(data, tmp_path):
    with pytest.raises(SpecError, match="streamliner.sensitive 'wage' is not an attribute"):
        publish(_cfg(data, tmp_path, "rda", sensitive="wage"), InProcessEngine())
    with pytest.raises(SpecError, match="streamliner.weights name height"):
        publish(_cfg(data, tmp_path, "gda", weights={"height": 1}), InProcessEngine())
    with pytest.raises(PrivacyError, match="not 15-eligible.*choose l <= "):
        publish(_cfg(data, tmp_path, "rda", l=15), InProcessEngine())
    with pytest.raises(SpecError, match="method rda needs privacy model l-diversity"):
        publish(
            config_from_dict(
                {
                    "input": {"path": str(data)},
                    "method": "rda",
                    "privacy": {"model": "m-invariance", "m": 4},
                    "streamliner": {"sensitive": "salary"},
                    "engine": "inprocess",
                }
            ),
            InProcessEngine(),
        )
    assert not any(tmp_path.iterdir())


def test_bench_streamliner_publishes_each_size_and_method(tmp_path):
    from vpub_bench.bench_methods import BenchStreamliner, bench_streamliner

    r = bench_streamliner(
        BenchStreamliner(rows=(3000, 6000), engines=("inprocess",), out=str(tmp_path))
    )
    assert [(x["rows"], x["method"]) for x in r["runs"]] == [
        (3000, "rda"),
        (3000, "gda"),
        (6000, "rda"),
        (6000, "gda"),
    ]
    assert all(x["seconds"] > 0 and x["dm"] < 1.01 * x["rows"] * 8 for x in r["runs"])
    assert (tmp_path / "streamliner.json").exists()


@pytest.fixture(scope="module")
def sal(tmp_path_factory):
    from vpub_spark.datasets.presets import write_generated

    d = tmp_path_factory.mktemp("sal") / "sal"
    write_generated(InProcessEngine(), "sal", 20_000, 11, str(d))
    return d


@pytest.mark.parametrize("anonymizer", ["rda", "gda"])
def test_rule_based_releases_with_generalized_sub_tables(sal, tmp_path, anonymizer, capsys):
    """`anonymizer: rda | gda` (003 for 000's sub-tables): every table that enforces a
    rule is generalized and l-diverse, GNF still holds, the auditor re-checks it all
    (with the source), and a query can be estimated from the release."""
    from release_helpers import config

    from vpub_spark.cli import main

    rules = ["age, gender, marital -> occupation", "education, race -> occupation"]
    cfg = config(sal, tmp_path, rules, 5, method="uad", partitions=2, seed=3, anonymizer=anonymizer)
    r = publish(cfg, InProcessEngine())
    kinds = {t["kind"] for t in r.manifest["tables"]}
    assert "generalized" in kinds and "anatomy" not in kinds and r.manifest["gnf"]["ok"]
    assert audit_release(r.path, source=str(sal / "data")).passed
    rel = open_release(r.path)
    t = next(t for t in r.manifest["tables"] if t["kind"] == "generalized")
    per = rel.read(t["name"], "st").to_pandas().groupby("group_id")["count"].agg(["sum", "max"])
    assert (per["max"] * 5 <= per["sum"]).all()
    a = next(x for x in t["attributes"] if x in t["domains"])
    assert main(["query", str(r.path), "--where", f"{a} = {t['domains'][a][0]}"]) == 0
    assert "COUNT" in capsys.readouterr().out


def test_two_generalized_tables_are_refused(sal, tmp_path):
    """Rules of two right-hand sides give two generalized tables over the same people,
    each grouped on its own: refused before any work (their groupings would combine)."""
    from release_helpers import config

    rules = ["age, gender -> occupation", "age, marital -> education"]
    cfg = config(sal, tmp_path, rules, 5, method="gd", seed=3, anonymizer="rda")
    with pytest.raises(PrivacyError, match="2 generalized tables .* anonymizer: anatomy"):
        publish(cfg, InProcessEngine())
    assert not any((tmp_path).rglob("manifest.json"))


def test_anonymizer_is_refused_where_it_does_not_apply(data, tmp_path):
    with pytest.raises(SpecError, match="anonymizer rda applies to uad, gd and single_attribute"):
        publish(
            config_from_dict(
                {
                    "input": {"path": str(data)},
                    "method": "rda",
                    "anonymizer": "rda",
                    "privacy": {"l": 5},
                    "streamliner": {"sensitive": "salary"},
                    "engine": "inprocess",
                }
            ),
            InProcessEngine(),
        )
    with pytest.raises(SpecError, match="anonymizer must be one of anatomy, rda, gda"):
        config_from_dict({"input": {"path": str(data)}, "anonymizer": "mondrian"})
