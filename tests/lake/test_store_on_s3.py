"""Re-publication with a private store on an object store (objectstore.mirrored),
against the real S3-compatible server on loopback: the first marginal release and its
store on S3, `marginals add` from that store, the private audit from the store, the
same releases as with a local store, an aborted run's objects cleaned, a held store
refused naming its holder, and the location checks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import replace

import pandas as pd
import pytest
from release_helpers import contents, job_table, same_contents, write_table
from s3_helpers import new_bucket

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError, VpubError
from vpub_spark.lake import objectstore
from vpub_spark.publishing.marginals_add import add_marginal
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.reader import open_release
from vpub_spark.release.stores.audit import audit_store


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return write_table(job_table(4, 3000), tmp_path_factory.mktemp("mg") / "t")


def _cfg(table, state: str, out: str):
    return config_from_dict(
        {
            "input": {"path": str(table)},
            "privacy": {"model": "m-invariance", "m": 3},
            "method": "marginals",
            "marginals": {
                "sensitive": "job",
                "schemas": [["age"], ["age", "zip"]],
                "state": state,
                "qi": ["age", "zip", "sex"],
                "chunk_rows": 1000,
            },
            "output": {"path": out, "release_id": "g"},
            "engine": "inprocess",
            "seed": 3,
        }
    )


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_store_on_s3_publish_add_and_private_audit(s3, table, tmp_path):
    bucket = new_bucket()
    store, out = f"{bucket}/private/store", f"{bucket}/releases"
    first = publish(_cfg(table, store, out), InProcessEngine())
    assert first.audit.passed
    files = objectstore.listing(store)
    assert "store.json" in files and any(f.startswith("buckets/") for f in files)
    assert "_LOCK" not in files and not any(
        f.startswith("private") for f in objectstore.listing(out)
    )
    meta = json.loads(objectstore.read_bytes(f"{store}/store.json"))
    assert [p["release"] for p in meta["published"]] == [f"{out}/g"] * 2
    added = add_marginal(store, ["sex"], out, "g2")
    assert added.audit.passed and audit_release(f"{out}/g2").passed
    assert (
        main(
            [
                "marginals",
                "add",
                "--state",
                store,
                "--attributes",
                "zip,sex",
                "--out",
                out,
                "--release-id",
                "g3",
            ]
        )
        == 0
    )
    assert main(["audit", "--state", store]) == 0
    assert any(f.startswith("groups/g2/") for f in objectstore.listing(store))
    report = audit_store(store)
    assert report.passed, report.as_dict()["failures"]
    assert sum("keeps its signature" in c.name for c in report.checks) == 4
    # the same releases as from a local store
    local = publish(
        _cfg(table, str(tmp_path / "private" / "s"), str(tmp_path / "out")), InProcessEngine()
    )
    add_marginal(tmp_path / "private" / "s", ["sex"], tmp_path / "out", "g2")
    assert same_contents(contents(f"{out}/g"), contents(local.path))
    assert same_contents(contents(f"{out}/g2"), contents(tmp_path / "out" / "g2"))
    sig = pd.read_parquet(open_release(f"{out}/g2").path / "tables" / "sex-job" / "st")
    assert sig["count"].sum() == 3000


def test_an_aborted_store_is_cleaned_and_a_held_one_refused(s3, table):
    bucket = new_bucket()
    store, out = f"{bucket}/private/store", f"{bucket}/releases"
    dead = {"host": socket.gethostname(), "pid": _dead_pid(), "at": 0}
    objectstore.create_once(f"{store}/_LOCK", json.dumps(dead).encode())
    objectstore.write_bytes(f"{store}/buckets/part-09999.parquet", b"an aborted run's part")
    publish(_cfg(table, store, out), InProcessEngine())
    assert "buckets/part-09999.parquet" not in objectstore.listing(store)
    assert audit_store(store).passed
    live = {"host": "elsewhere", "pid": 7, "at": 4e9}
    objectstore.create_once(f"{store}/_LOCK", json.dumps(live).encode())
    with pytest.raises(VpubError, match="being published by process 7 on elsewhere"):
        add_marginal(store, ["sex"], out, "g2")
    assert not objectstore.exists(f"{out}/g2/_SUCCESS")
    assert [
        p["release_id"]
        for p in json.loads(objectstore.read_bytes(f"{store}/store.json"))["published"]
    ] == ["g", "g"]
    assert _markers(bucket) == []  # the cleanup and the refusal left no directory marker


def _markers(uri: str) -> list[str]:
    """Zero-byte `.../` "directory" marker objects in the bucket (boto3 lists them)."""
    import boto3

    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=uri[len("s3://") :])
    return [
        o["Key"]
        for p in pages
        for o in p.get("Contents", [])
        if o["Key"].endswith("/") and o["Size"] == 0
    ]


def test_store_locations_are_checked(s3, table):
    bucket = new_bucket()
    with pytest.raises(SpecError, match="must not be inside the output"):
        publish(_cfg(table, f"{bucket}/releases/store", f"{bucket}/releases"), InProcessEngine())
    publish(_cfg(table, f"{bucket}/s", f"{bucket}/out"), InProcessEngine())
    with pytest.raises(VpubError, match="already a bucket store"):
        publish(_cfg(table, f"{bucket}/s", f"{bucket}/out2"), InProcessEngine())
    assert objectstore.listing(f"{bucket}/out2") == []
    with pytest.raises(VpubError, match="no store.json"):
        add_marginal(f"{bucket}/nothing", ["sex"], f"{bucket}/out", "x")
    assert _markers(bucket) == []  # refused runs released their locks without a trace
    assert os.environ["AWS_ENDPOINT_URL"]  # the loopback server, never a real account


def test_spark_tasks_write_the_store_and_the_release_straight_to_s3(
    s3, table, spark_engine, tmp_path
):
    """Marginals on Spark with the store and the releases on S3: the tasks write the
    buckets and links into the store and the parts into the release (no shared disk);
    the same release as in process, the private audit passing."""
    bucket = new_bucket()
    store, out = f"{bucket}/private/store", f"{bucket}/releases"
    cfg = _cfg(table, store, out)
    r = publish(replace(cfg, engine="spark"), spark_engine)
    assert r.audit.passed and audit_store(store).passed
    local = publish(_cfg(table, str(tmp_path / "s"), str(tmp_path / "out")), InProcessEngine())
    assert same_contents(contents(r.path), contents(local.path))
