"""The m-invariant marginal publisher end to end (002): releases of generalized
marginals audited from their files, the private store (owner-only, outside the
output, one signature per tuple across `marginals add` calls), refused tampering,
clear errors that leave nothing behind, determinism, and Spark giving the same release
in one task per chunk."""

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest
from release_helpers import contents, same_contents, write_table

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import PrivacyError, SpecError, VpubError
from vpub_spark.publishing.marginals_add import add_marginal
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.stores.audit import audit_store

SCHEMAS = [["age"], ["age", "sex"], ["age", "sex", "edu"]]
QI = ["age", "sex", "edu", "marital"]  # marital only for marginals added later


def _table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 80, n)
    return pd.DataFrame(
        {
            "age": [f"{a:03d}" for a in age],
            "sex": rng.choice(["F", "M"], n),
            "edu": [f"e{x:02d}" for x in rng.integers(0, 12, n)],
            "marital": rng.choice(["a", "b", "c", "d"], n),
            "job": [f"j{x:02d}" for x in (age // 7 + rng.integers(0, 9, n)) % 15],
        }
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_table(_table(3000), tmp_path_factory.mktemp("marg") / "t")


def _config(data, tmp, m=4, engine="inprocess", **kw):
    d = {
        "input": {"path": str(data)},
        "privacy": {"model": "m-invariance", "m": m},
        "method": "marginals",
        "marginals": {
            "sensitive": "job",
            "schemas": SCHEMAS,
            "state": str(tmp / "private" / "store"),
            "chunk_rows": 700,
            "qi": QI,
        }
        | kw,
        "output": {"path": str(tmp / "out"), "release_id": "r1"},
        "engine": engine,
        "seed": 5,
    }
    return config_from_dict(d)


def test_publish_add_and_both_audits(data, tmp_path):
    res = publish(_config(data, tmp_path), InProcessEngine())
    m = res.manifest
    assert (
        res.audit.passed
        and m["privacy"] == {"model": "m-invariance", "m": 4}
        and m["method_cost"]["chunks"] > 1
        and m["method_cost"]["partitioning"] == "mondrian"
    )
    assert [t["kind"] for t in m["tables"]] == ["generalized"] * 3 and m["store"]["store_id"]
    assert audit_release(res.path, source=str(data / "data")).passed
    groups = pd.read_parquet(res.path / "tables" / "age-sex-job" / "groups")
    assert list(groups.columns) == ["group_id", "age_min", "age_max", "sex_min", "sex_max", "size"]
    assert groups["size"].sum() == 3000 and (groups["size"] >= 4).all()
    store = tmp_path / "private" / "store"
    assert not any(
        store.name in str(p) for p in (tmp_path / "out").rglob("*")
    )  # nothing of the store in the output
    for p in [store, *store.rglob("*")]:  # owner-only (architecture.md, "Private state")
        assert stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600)
    add_marginal(store, ["edu", "marital"], tmp_path / "out", "r2")
    add_marginal(store, ["marital"], tmp_path / "out", "r3")
    assert audit_release(tmp_path / "out" / "r2").passed
    report = audit_store(store)
    assert report.passed and sum("keeps its signature" in c.name for c in report.checks) == 5
    # the same multiset of group signatures in every marginal of every release
    sig = [
        _signatures(tmp_path / "out" / r / "tables" / t)
        for r, t in [("r1", "age-job"), ("r2", "edu-marital-job"), ("r3", "marital-job")]
    ]
    assert sig[0] == sig[1] == sig[2]
    # per tuple, not only as multisets, recounted from the store's group links and the
    # published ST (no audit code): every tuple's group shows the same values everywhere
    marginals = [(r, t["name"]) for r in ("r1", "r2", "r3") for t in _manifest(tmp_path, r)]
    per_tuple = [_tuple_signatures(store, tmp_path / "out", r, t) for r, t in marginals]
    assert len(marginals) == 5 and all(len(p) == 3000 for p in per_tuple)
    assert all(p.equals(per_tuple[0]) for p in per_tuple[1:])
    assert per_tuple[0].map(lambda sig: len(set(sig.split(",")))).min() >= 4  # m-unique


def test_002_partitioning_publishes_too(data, tmp_path):
    """`partitioning: ncp` (002 Figure 1's splits) publishes audited releases as the
    default Mondrian cuts do, with other groups (how they compare in width:
    docs/benchmarks/marginals.md)."""
    boxes = {}
    for how in ("ncp", "mondrian"):
        res = publish(_config(data, tmp_path / how, partitioning=how), InProcessEngine())
        assert res.audit.passed and res.manifest["method_cost"]["partitioning"] == how
        boxes[how] = pd.read_parquet(res.path / "tables" / "age-sex-edu-job" / "groups")
    assert not boxes["ncp"].equals(boxes["mondrian"])
    with pytest.raises(SpecError, match="marginals.partitioning must be one of"):
        _config(data, tmp_path, partitioning="kd-tree")


def test_the_local_dealing_publishes_audited_releases_with_the_store(data, tmp_path):
    """`assign: local-unsafe` (the QI-local dealing): an audited release whose manifest
    says so, a store the private audit passes and `marginals add` extends; the random
    dealing stays the default; the old name `local` is refused with the reason, a
    misspelled choice with the choices."""
    res = publish(_config(data, tmp_path / "l", assign="local-unsafe"), InProcessEngine())
    assert res.audit.passed and res.manifest["method_cost"]["assign"] == "local-unsafe"
    assert audit_release(res.path, source=str(data / "data")).passed
    store = tmp_path / "l" / "private" / "store"
    add_marginal(store, ["edu", "marital"], tmp_path / "l" / "out", "r2")
    assert audit_release(tmp_path / "l" / "out" / "r2").passed and audit_store(store).passed
    chance = publish(_config(data, tmp_path / "r"), InProcessEngine())
    assert chance.manifest["method_cost"]["assign"] == "random"
    with pytest.raises(SpecError, match="marginals.assign must be one of random, local-unsafe"):
        _config(data, tmp_path, assign="nearest")
    with pytest.raises(SpecError, match="now called local-unsafe: .* above 1/m"):
        _config(data, tmp_path, assign="local")


def _manifest(tmp, release_id):
    return json.loads((tmp / "out" / release_id / "manifest.json").read_text())["tables"]


def _tuple_signatures(store, out, release_id, table) -> pd.Series:
    """row -> the values of the published group holding it (its signature), sorted."""
    links = pd.read_parquet(store / "groups" / release_id / table)
    st = pd.read_parquet(out / release_id / "tables" / table / "st")
    sig = st.sort_values("job").groupby("group_id")["job"].agg(",".join)
    return links.set_index("row")["group_id"].map(sig).sort_index()


def _signatures(table_dir):
    st = pd.read_parquet(table_dir / "st")
    return sorted(st.sort_values("job").groupby("group_id")["job"].agg(tuple).tolist())


def test_tampering_is_refused(data, tmp_path):
    res = publish(_config(data, tmp_path), InProcessEngine())
    st_dir = res.path / "tables" / "age-job" / "st"
    f = next(st_dir.glob("*.parquet"))
    st = pd.read_parquet(f)
    g = st["group_id"].iloc[0]
    st.loc[st["group_id"] == g, "job"] = st.loc[st["group_id"] == g, "job"].iloc[
        0
    ]  # one group shows one value
    st.to_parquet(f, index=False)
    report = audit_release(res.path)
    assert not report.passed and any("4-unique" in c.name for c in report.failures)
    assert any("same signatures" in c.name for c in report.failures)
    store = tmp_path / "private" / "store"
    links = next((store / "groups" / "r1" / "age-sex-job").glob("*.parquet"))
    frame = pd.read_parquet(links)
    frame["group_id"] = frame["group_id"].to_numpy()[::-1]  # tuples linked to other groups
    frame.to_parquet(links, index=False)
    assert any(
        "age-sex-job" in c.name and "signature" in c.name for c in audit_store(store).failures
    )


def test_errors_are_clear_and_leave_nothing(data, tmp_path):
    with pytest.raises(
        PrivacyError, match=r"not 16-eligible.*job = 'j\d\d' covers \d+ of 3000 rows"
    ):
        publish(_config(data, tmp_path, m=16), InProcessEngine())
    with pytest.raises(SpecError, match="not among the QI attributes"):
        publish(
            config_from_dict(_config_dict(data, tmp_path, schemas=[["age", "nope"]])),
            InProcessEngine(),
        )
    with pytest.raises(SpecError, match="must not be inside the output"):
        publish(
            config_from_dict(_config_dict(data, tmp_path, state=str(tmp_path / "out" / "s"))),
            InProcessEngine(),
        )
    with pytest.raises(SpecError, match="needs privacy model m-invariance"):  # before any work
        publish(
            config_from_dict(_config_dict(data, tmp_path) | {"privacy": {"l": 2}}),
            InProcessEngine(),
        )
    leftovers = [
        p.name for p in tmp_path.rglob("*") if p.is_dir() and p.name not in ("out", "private")
    ]
    assert leftovers == [] and not (tmp_path / "private" / "store").exists()
    publish(_config(data, tmp_path), InProcessEngine())
    with pytest.raises(VpubError, match="already a bucket store"):
        publish(
            config_from_dict(
                _config_dict(data, tmp_path)
                | {"output": {"path": str(tmp_path / "out"), "release_id": "r9"}}
            ),
            InProcessEngine(),
        )
    with pytest.raises(SpecError, match="not among the QI"):
        add_marginal(tmp_path / "private" / "store", ["salary"], tmp_path / "out", "r9")
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.name != "_latest") == ["r1"]


def _config_dict(data, tmp, **marg):
    d = {
        "input": {"path": str(data)},
        "privacy": {"model": "m-invariance", "m": 4},
        "method": "marginals",
        "marginals": {
            "sensitive": "job",
            "schemas": SCHEMAS,
            "state": str(tmp / "private" / "store"),
            "chunk_rows": 700,
            "qi": QI,
        }
        | marg,
        "output": {"path": str(tmp / "out"), "release_id": "r1"},
        "engine": "inprocess",
        "seed": 5,
    }
    return d


def test_deterministic_and_row_order_free(data, tmp_path):
    a = publish(_config(data, tmp_path / "a"), InProcessEngine())
    shuffled = write_table(_table(3000).sample(frac=1, random_state=3), tmp_path / "shuffled")
    b = publish(_config(shuffled, tmp_path / "b"), InProcessEngine())
    assert same_contents(contents(a.path), contents(b.path))


def test_cli_publish_add_audit(data, tmp_path):
    conf = tmp_path / "m.yaml"
    conf.write_text(json.dumps(_config_dict(data, tmp_path)))
    assert main(["publish", "--config", str(conf), "--m", "3"]) == 0
    assert json.loads((tmp_path / "out" / "r1" / "manifest.json").read_text())["privacy"]["m"] == 3
    store = str(tmp_path / "private" / "store")
    assert (
        main(
            [
                "marginals",
                "add",
                "--state",
                store,
                "--attributes",
                "sex,marital",
                "--out",
                str(tmp_path / "out"),
                "--release-id",
                "r2",
            ]
        )
        == 0
    )
    assert main(["audit", "--state", store]) == 0
    assert main(["audit", str(tmp_path / "out" / "r2")]) == 0
    assert os.stat(store).st_mode & 0o077 == 0


def test_queries_on_a_published_marginal_are_zhang_et_al(data, tmp_path, capsys):
    """`vpub query` reads a generalized release: its estimate is Zhang et al.'s from the
    published boxes (one marginal), and it is exact when the query spans every box."""
    from vpub_spark.estimate.generalized import generalized_count
    from vpub_spark.release.reader import open_release
    from vpub_spark.utility.queries import estimate_count
    from vpub_spark.utility.release_models import release_models

    r = publish(_config(data, tmp_path, schemas=[["age", "sex"]]), InProcessEngine())
    models, domains = release_models(open_release(r.path))
    (m,) = models
    n = int(r.manifest["source"]["rows"])
    ages = domains["age"]
    lo, hi = len(ages) // 4, len(ages) // 2
    query = {"age": frozenset(range(lo, hi + 1))}
    expected = generalized_count(m.groups, m.st, m.sensitive, {"age": (lo, hi)}, None)  # type: ignore[attr-defined]
    assert estimate_count(models, query, n, domains) == pytest.approx(expected)
    every = {"age": frozenset(range(len(ages)))}
    assert estimate_count(models, every, n, domains) == pytest.approx(n)
    where = f"age between {ages[lo]} and {ages[hi]}"
    assert main(["query", str(r.path), "--where", where]) == 0
    assert f"estimate: {expected:,.1f}" in capsys.readouterr().out


@pytest.mark.spark
def test_spark_gives_the_same_release_one_task_per_chunk(spark_engine, data, tmp_path):
    a = publish(_config(data, tmp_path / "a"), InProcessEngine())
    b = publish(_config(data, tmp_path / "b", engine="spark"), spark_engine)
    assert same_contents(contents(a.path), contents(b.path))
    chunks = b.manifest["method_cost"]["chunks"]
    assert chunks > 2 and b.partitions["task"].nunique() == chunks
    assert audit_store(tmp_path / "b" / "private" / "store").passed


def test_a_schema_may_list_the_sensitive_attribute(data, tmp_path):
    """Without `marginals.qi`, the QI defaults to the schemas' attributes less the
    sensitive one (listing it in a schema is allowed: it is added to every marginal)."""
    r = publish(
        _config(data, tmp_path, schemas=[["age", "job"], ["age", "sex"]], qi=None),
        InProcessEngine(),
    )
    assert [t["name"] for t in r.manifest["tables"]] == ["age-job", "age-sex-job"]
    assert r.audit.passed
