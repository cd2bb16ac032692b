"""The distributed audit: file set by file set in the engine's tasks, only
summaries in the driver. It must say what the in-driver audit says, on good releases
and on tampered ones."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_helpers import config, job_table, rehash, write_table

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release

RULES = [{"lhs": ["age", "zip"], "rhs": "job"}]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_table(job_table(5, 4000), tmp_path_factory.mktemp("dist") / "t")


@pytest.fixture(scope="module")
def releases(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("rels")
    kw = {
        "uad": {"method": "uad", "partitions": 3},
        "rda": {
            "method": "rda",
            "privacy": {"l": 4},
            "streamliner": {"sensitive": "job", "chunk_rows": 1000},
        },
        "marginals": {
            "method": "marginals",
            "privacy": {"model": "m-invariance", "m": 4},
            "marginals": {
                "sensitive": "job",
                "schemas": [["age"], ["age", "zip"]],
                "state": str(tmp_path_factory.mktemp("private") / "store"),
                "chunk_rows": 1000,
            },
        },
    }
    made = {}
    for name, extra in kw.items():
        cfg = config(
            data,
            out,
            RULES,
            4,
            seed=2,
            **({"output": {"path": str(out), "release_id": name}} | extra),
        )
        made[name] = publish(cfg, InProcessEngine()).path
    return made


def _both(path, engine=None):
    driver = audit_release(path)
    spread = audit_release(path, engine=engine or InProcessEngine(), distributed=True)
    return driver, spread


def _verdicts(report) -> dict[str, bool]:
    return {c.name: c.ok for c in report.checks}


@pytest.mark.parametrize("name", ["uad", "rda", "marginals"])
def test_good_releases_pass_both_with_the_same_checks(releases, name):
    driver, spread = _both(releases[name])
    assert driver.passed and spread.passed
    assert _verdicts(driver) == _verdicts(spread)
    assert any(name.endswith("groups within one file") for name in _verdicts(spread))
    files = [f for f in (releases[name] / "tables").rglob("*.parquet")]
    assert len({f.name for f in files}) > 1  # several file sets: the combination is exercised


def _rewrite(f, change):
    pq.write_table(
        pa.Table.from_pandas(change(pq.read_table(f).to_pandas()), preserve_index=False), f
    )


def _tampered(releases, tmp_path, name, edit, forge=True):
    p = tmp_path / name
    shutil.copytree(releases[name], p)
    edit(p)
    if forge:  # the manifest's checksums recomputed, as a careful forger would
        rehash(p)
    return p


def _anatomy_table(path) -> str:
    m = json.loads((path / "manifest.json").read_text())
    return next(t["name"] for t in m["tables"] if t["kind"] == "anatomy")


@pytest.mark.parametrize(
    "case, expected",
    [
        ("one value per group", ": 4-diverse"),
        ("a row removed", ": group sizes agree"),
        ("a file removed", ""),
        ("groups shared by two files", "groups within one file"),
        ("bytes changed, checksums left", "checksums"),
    ],
)
def test_tampered_releases_fail_both(releases, tmp_path, case, expected):
    t = _anatomy_table(releases["uad"])

    def edit(p):
        qit, st = (
            sorted((p / "tables" / t / "qit").glob("*.parquet")),
            sorted((p / "tables" / t / "st").glob("*.parquet")),
        )
        if case == "one value per group":
            _rewrite(st[1], lambda f: f.assign(job="j01"))
        elif case in ("a row removed", "bytes changed, checksums left"):
            _rewrite(qit[1], lambda f: f.iloc[1:])
        elif case == "a file removed":
            qit[2].unlink()
        else:  # the second file's groups renamed into the first file's range
            low = int(pq.read_table(qit[0]).column("group_id").to_pandas().min())
            for f in (qit[1], st[1]):
                _rewrite(f, lambda x: x.assign(group_id=x["group_id"] - x["group_id"].min() + low))

    p = _tampered(releases, tmp_path, "uad", edit, forge=case != "bytes changed, checksums left")
    driver, spread = _both(p)
    assert not driver.passed and not spread.passed, (driver.as_dict(), spread.as_dict())
    if expected:
        assert any(expected in c.name for c in driver.failures)
        assert any(expected in c.name for c in spread.failures)


@pytest.mark.spark
def test_spark_tasks_give_the_same_audit(releases, spark_engine):
    for name in ("uad", "marginals"):
        spark = audit_release(releases[name], engine=spark_engine, distributed=True)
        local = audit_release(releases[name], engine=InProcessEngine(), distributed=True)
        assert spark.passed and [(c.name, c.ok) for c in spark.checks] == [
            (c.name, c.ok) for c in local.checks
        ]


def test_a_small_local_stage_is_audited_in_the_driver(releases, monkeypatch):
    from vpub_spark.lake import commit
    from vpub_spark.release.layout import REMOTE

    stage, engine = releases["uad"], InProcessEngine()
    assert not commit.audit_in_tasks(stage, None)
    assert not commit.audit_in_tasks(stage, engine)  # a few KB: one Spark job costs more
    monkeypatch.setattr(commit, "IN_DRIVER_BYTES", 0)
    assert commit.audit_in_tasks(stage, object())  # larger than the bound: in the tasks
    assert not commit.audit_in_tasks(stage, engine)  # ... but the engine's own bound
    monkeypatch.setattr(engine, "in_driver_bytes", 0)
    assert commit.audit_in_tasks(stage, engine)
    monkeypatch.undo()
    (stage / REMOTE).write_text("{}")
    try:
        assert commit.audit_in_tasks(stage, engine)  # parts on an object store: in the tasks
    finally:
        (stage / REMOTE).unlink()
