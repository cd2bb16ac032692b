"""Releases on an object store (lake/objectstore.py), against a real
S3-compatible server on loopback (moto's standalone server, started here): publish on
both engines, audit from the store, readers ignoring uncommitted releases, an input on
the store, overwrite, a killed run cleaned by the next, concurrent runs. The same
scenarios on the local file system are in test_concurrency.py and tests/faults/."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from release_helpers import config, contents, job_table, made_with, same_contents, vpub, write_table
from s3_helpers import new_bucket

from vpub_spark import storage
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import DataError, VpubError
from vpub_spark.lake import objectstore
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.reader import open_release

RULES = ["age, zip -> job", "sex -> job"]
BUSY = ("is being published by", "already exists and is not empty")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return write_table(job_table(3, 4000), tmp_path_factory.mktemp("jobs") / "t")


@pytest.fixture(scope="module")
def local_release(table, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    return publish(
        config(table, out, RULES, 3, seed=5, output={"path": str(out), "release_id": "r"}),
        InProcessEngine(),
    )


def _objects(uri: str) -> list[str]:
    return objectstore.listing(uri)


def test_publish_to_s3_commits_the_same_release_and_audits_from_the_store(s3, table, local_release):
    root = new_bucket() + "/releases"
    r = publish(
        config(table, root, RULES, 3, seed=5, output={"path": root, "release_id": "r"}),
        InProcessEngine(),
    )
    assert r.path == f"{root}/r" and r.audit.passed
    local = sorted(
        str(p.relative_to(local_release.path))
        for p in Path(local_release.path).rglob("*")
        if p.is_file()
    )
    assert _objects(r.path) == local  # every part, the manifest and _SUCCESS; no lock left
    assert same_contents(contents(r.path), contents(local_release.path))
    report = audit_release(r.path, source=str(table))  # downloaded, then re-checked
    assert report.passed, report.as_dict()["failures"]
    assert open_release(r.path).manifest["release_id"] == "r"


def test_publish_to_s3_on_spark(s3, table, local_release, spark_engine):
    root = new_bucket()
    r = publish(
        config(
            table, root, RULES, 3, seed=5, engine="spark", output={"path": root, "release_id": "r"}
        ),
        spark_engine,
    )
    assert r.audit.passed and same_contents(contents(r.path), contents(local_release.path))


def test_input_on_s3(s3, table, local_release):
    root = new_bucket()
    for f in [p for p in Path(table).rglob("*") if p.is_file()]:
        objectstore.write_bytes(f"{root}/in/t/{f.relative_to(table)}", f.read_bytes())
    r = publish(
        config(f"{root}/in/t", root, RULES, 3, seed=5, output={"path": root, "release_id": "r"}),
        InProcessEngine(),
    )
    assert same_contents(contents(r.path), contents(local_release.path))


def test_readers_and_the_auditor_ignore_a_release_without_success(s3, local_release):
    root = new_bucket()
    for f in [
        p for p in Path(local_release.path).rglob("*") if p.is_file() and p.name != "_SUCCESS"
    ]:
        objectstore.write_bytes(f"{root}/r/{f.relative_to(local_release.path)}", f.read_bytes())
    with pytest.raises(DataError, match="no _SUCCESS: not a committed release"):
        open_release(f"{root}/r")
    report = audit_release(f"{root}/r")
    assert not report.passed and "not a committed release" in " ".join(report.as_dict()["failures"])


def test_overwrite_and_refusal(s3, table):
    root = new_bucket()
    cfg = config(table, root, RULES, 3, seed=5, output={"path": root, "release_id": "r"})
    publish(cfg, InProcessEngine())
    with pytest.raises(VpubError, match="already exists"):
        publish(cfg, InProcessEngine())
    again = publish(replace(cfg, seed=6, overwrite=True), InProcessEngine())
    assert made_with(json.loads(objectstore.read_bytes(f"{again.path}/manifest.json")), 6)
    assert audit_release(again.path).passed


def _conf(tmp: Path, table: Path, root: str, seed: int = 5) -> Path:
    conf = tmp / f"c{seed}.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "input": {"path": str(table)},
                "rules": RULES,
                "privacy": {"l": 3},
                "seed": seed,
                "engine": "inprocess",
                "output": {"path": root, "release_id": "r"},
            }
        )
    )
    return conf


def test_a_killed_run_is_cleaned_by_the_next(s3, table, local_release, tmp_path):
    """kill -9 once the audit passed, while the upload starts: the store holds a stale
    lock and maybe some parts, no _SUCCESS; the next run commits the same release."""
    root = new_bucket()
    proc = subprocess.Popen(
        vpub("publish", "--config", str(_conf(tmp_path, table, root))),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "✓ audit" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    left = _objects(f"{root}/r")
    assert "_SUCCESS" not in left and "_LOCK" in left
    again = subprocess.run(
        vpub("publish", "--config", str(_conf(tmp_path, table, root))),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert same_contents(contents(f"{root}/r"), contents(local_release.path))
    assert "_LOCK" not in _objects(f"{root}/r") and audit_release(f"{root}/r").passed


def test_exactly_one_of_concurrent_runs_commits(s3, table, tmp_path):
    root = new_bucket()
    procs = [
        subprocess.Popen(
            vpub("publish", "--config", str(_conf(tmp_path, table, root, seed))),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2, 3)
    ]
    done = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    assert sorted(code for code, _ in done) == [0, 2, 2], done
    errors = [err.strip().splitlines()[-1] for code, err in done if code]
    assert all(any(b in e for b in BUSY) for e in errors), errors
    manifest = json.loads(objectstore.read_bytes(f"{root}/r/manifest.json"))
    assert sum(made_with(manifest, s) for s in (1, 2, 3)) == 1 and audit_release(f"{root}/r").passed
    assert "_LOCK" not in _objects(f"{root}/r")


def test_a_live_lock_names_its_holder(s3, table):
    root = new_bucket()
    objectstore.create_once(
        f"{root}/r/_LOCK", json.dumps({"host": "elsewhere", "pid": 1, "at": 4e9}).encode()
    )
    with pytest.raises(VpubError, match="being published by process 1 on elsewhere"):
        publish(
            config(table, root, RULES, 3, output={"path": root, "release_id": "r"}),
            InProcessEngine(),
        )


def test_spark_tasks_write_the_parts_to_the_store_not_the_driver(
    s3, table, local_release, spark_engine, tmp_path, monkeypatch
):
    """No shared disk: the tasks write every part straight under the release's prefix,
    and the distributed audit reads them there; once the audit has passed, the driver's
    stage holds no part of the anatomy tables, and the store holds them, uncommitted."""
    scratch = tmp_path / "scratch"
    monkeypatch.setenv("VPUB_SCRATCH", str(scratch))
    root, seen = new_bucket(), {}

    @contextmanager
    def observer(name):
        yield
        if name == "audit":
            seen["driver"] = [str(p.relative_to(scratch)) for p in scratch.rglob("*.parquet")]
            seen["store"] = _objects(f"{root}/r")

    cfg = config(
        table, root, RULES, 3, seed=5, engine="spark", output={"path": root, "release_id": "r"}
    )
    r = publish(cfg, spark_engine, observer)
    assert r.audit.passed and same_contents(contents(r.path), contents(local_release.path))
    assert not [f for f in seen["driver"] if "/qit/" in f or "/st/" in f], seen["driver"]
    assert any("/qit/part-" in f for f in seen["store"]) and "_SUCCESS" not in seen["store"]


def test_input_on_s3_read_by_spark_tasks(s3, table, local_release, spark_engine):
    """CSV (the in-process reader in each task) and Parquet, read on the store."""
    root = new_bucket()
    for f in [p for p in Path(table).rglob("*") if p.is_file()]:
        objectstore.write_bytes(f"{root}/in/csv/{f.relative_to(table)}", f.read_bytes())
    objectstore.write_bytes(f"{root}/in/pq/table.yaml", (Path(table) / "table.yaml").read_bytes())
    frame = pd.read_csv(Path(table) / "data" / "part.csv", dtype=str)
    for i, half in enumerate((frame.iloc[::2], frame.iloc[1::2])):
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(half, preserve_index=False), sink)
        objectstore.write_bytes(f"{root}/in/pq/data/part-{i}.parquet", sink.getvalue().to_pybytes())
    for where in ("csv", "pq"):
        cfg = config(
            f"{root}/in/{where}",
            f"{root}/out",
            RULES,
            3,
            seed=5,
            engine="spark",
            output={"path": f"{root}/out", "release_id": where},
        )
        r = publish(cfg, spark_engine)
        assert same_contents(contents(r.path), contents(local_release.path)), where


def test_a_failed_overwrite_on_the_store_keeps_the_old_release(s3, table):
    """The new parts go under `_staging/` beside the committed release, which readers
    keep seeing until the new one has passed its audit; a failed run deletes them."""
    root = new_bucket()
    cfg = config(table, root, RULES, 3, seed=5, output={"path": root, "release_id": "r"})
    publish(cfg, InProcessEngine())

    @contextmanager
    def failing(name):
        if name == "audit":
            raise RuntimeError("injected after the parts were written")
        yield

    with pytest.raises(RuntimeError, match="injected"):
        publish(replace(cfg, seed=6, overwrite=True), InProcessEngine(), failing)
    assert not [f for f in _objects(f"{root}/r") if f.startswith(("_staging/", "_LOCK"))]
    assert made_with(open_release(f"{root}/r").manifest, 5) and audit_release(f"{root}/r").passed
    again = publish(replace(cfg, seed=6, overwrite=True), InProcessEngine())
    left = _objects(again.path)
    assert not [f for f in left if f.startswith(("_staging/", "_LOCK"))], left
    assert made_with(open_release(again.path).manifest, 6) and audit_release(again.path).passed


def test_distributed_audit_reads_a_release_on_the_store_in_place(s3, table, spark_engine):
    """`vpub audit s3://... --engine spark`: the driver fetches the manifest, the tasks
    their own files; an edited part on the store is refused."""
    root = new_bucket()
    r = publish(
        config(table, root, RULES, 3, seed=5, output={"path": root, "release_id": "r"}),
        InProcessEngine(),
    )
    rel = open_release(r.path, in_place=True)
    assert rel.remote == r.path and not list(rel.path.rglob("*.parquet"))
    report = audit_release(r.path, engine=spark_engine, distributed=True)
    assert report.passed, report.as_dict()["failures"]
    st = sorted(f for f in _objects(r.path) if "/st/part-" in f)
    objectstore.write_bytes(
        f"{r.path}/{st[0]}",
        objectstore.read_bytes(f"{r.path}/{st[-1]}") if len(st) > 1 else b"PAR1",
    )
    failures = audit_release(r.path, engine=spark_engine, distributed=True).as_dict()["failures"]
    assert any("checksums" in f or "readable" in f for f in failures), failures


def test_objects_that_are_not_a_release_are_refused_not_deleted(s3, table):
    root = new_bucket()
    objectstore.write_bytes(f"{root}/r/notes.txt", b"someone else's")
    cfg = config(table, root, RULES, 3, seed=5, output={"path": root, "release_id": "r"})
    with pytest.raises(VpubError, match="1 object.*not a committed release; pass --overwrite"):
        publish(cfg, InProcessEngine())
    assert _objects(f"{root}/r") == ["notes.txt"]
    assert publish(replace(cfg, overwrite=True), InProcessEngine()).audit.passed


def _markers(uri: str) -> list[str]:
    """Zero-byte `.../` "directory" marker objects anywhere in the bucket of `uri`, listed
    with boto3 (pyarrow shows them as directories, not objects)."""
    import boto3

    bucket = uri[len("s3://") :].split("/")[0]
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [
        o["Key"]
        for p in pages
        for o in p.get("Contents", [])
        if o["Key"].endswith("/") and o["Size"] == 0
    ]


def test_no_directory_markers_after_publish_prune_cleanup_and_refusal(s3, table):
    """pyarrow's delete_file leaves a `prefix/` marker behind; the store's deletes
    (storage.delete, delete_all) do not, whatever the path that deleted."""
    root = new_bucket() + "/lake"

    def cfg(rid: str, seed: int = 5, **kw):
        return config(
            table,
            root,
            RULES,
            3,
            seed=seed,
            output={"path": root, "release_id": rid, "family": "f"},
            **kw,
        )

    publish(cfg("r1"), InProcessEngine())
    publish(cfg("r2", 6), InProcessEngine())
    publish(replace(cfg("r2", 7), overwrite=True), InProcessEngine())  # _staging/ emptied
    with pytest.raises(VpubError, match="already exists"):  # refused: committed
        publish(cfg("r2", 8), InProcessEngine())
    objectstore.write_bytes(f"{root}/r3/notes.txt", b"someone else's")
    with pytest.raises(VpubError, match="not a committed release"):  # refused: not ours
        publish(cfg("r3"), InProcessEngine())

    @contextmanager
    def failing(name):
        if name == "audit":
            raise RuntimeError("injected after the parts were written")
        yield

    with pytest.raises(RuntimeError, match="injected"):  # cleanup: a failed run's parts
        publish(cfg("r4"), InProcessEngine(), failing)
    objectstore.create_once(
        f"{root}/r5/_LOCK", json.dumps({"host": "elsewhere", "pid": 1, "at": 0}).encode()
    )
    objectstore.write_bytes(f"{root}/r5/tables/t/qit/part-0.parquet", b"a killed run's")
    publish(cfg("r5", 9), InProcessEngine())  # cleanup: a stale lock and its run's objects
    pruned = subprocess.run(
        vpub("releases", "prune", root, "--keep", "1"), capture_output=True, text=True, timeout=120
    )
    assert (
        pruned.returncode == 0 and "removed r1" in pruned.stdout and "removed r2" in pruned.stdout
    ), pruned.stdout
    assert _markers(root) == []
    assert (
        _objects(f"{root}/r1") == []
        and _objects(f"{root}/r4") == []
        and _objects(f"{root}/r3") == ["notes.txt"]
    )
    assert "_SUCCESS" in _objects(f"{root}/r5") and "_LOCK" not in _objects(f"{root}/r5")
    assert storage.children(root) == ["_latest", "r3", "r5"]
