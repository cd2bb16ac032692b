"""Versions of a store (release/stores/versions.py, statdb/update.py): a keyed build, updates
from new snapshots that keep every survivor's signature and every bucket m-unique
(counterfeits where needed), answers on any version that hold the truth, a failed update
that changes nothing, tampering found, the same version from both engines' stores."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_helpers import write_table

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import DataError, SpecError, VpubError
from vpub_spark.kernels.dynamic import signature_keys
from vpub_spark.release.stores.integrity import verified, verify_store
from vpub_spark.release.stores.store import STORE_FILE, file_digests, read_store, write_store
from vpub_spark.release.stores.versions import read_version, version_dir
from vpub_spark.statdb.build import build_store
from vpub_spark.statdb.db import StatDB
from vpub_spark.statdb.update import update_store

M = 5


def _people(rng, first: int, n: int) -> pd.DataFrame:
    age = rng.integers(20, 70, n)
    return pd.DataFrame(
        {
            "pid": [f"p{i}" for i in range(first, first + n)],
            "age": age.astype(str),
            "zip": rng.integers(10, 30, n).astype(str),
            "salary": [f"s{x:02d}" for x in (age // 4 + rng.integers(0, 9, n)) % 15],
        }
    )


@pytest.fixture(scope="module")
def v1(tmp_path_factory):
    rng = np.random.default_rng(9)
    frame = _people(rng, 0, 2000)
    return frame, write_table(frame, tmp_path_factory.mktemp("v1") / "t")


def _cfg(data, state, engine="inprocess", key="pid"):
    return config_from_dict(
        {
            "input": {"path": str(data)},
            "privacy": {"model": "m-invariance", "m": M},
            "engine": engine,
            "seed": 3,
            "marginals": {
                "sensitive": "salary",
                "qi": ["age", "zip"],
                "state": str(state),
                "chunk_rows": 700,
            }
            | ({"key": key} if key else {}),
        }
    )


def _churn(frame: pd.DataFrame, seed: int, first: int, gone: int, new: int, changed: int):
    """The next snapshot: `gone` records deleted, `new` inserted, `changed` re-valued."""
    rng = np.random.default_rng(seed)
    out = frame.drop(index=frame.index[rng.choice(len(frame), gone, replace=False)])
    out = out.reset_index(drop=True)
    which = rng.choice(len(out), changed, replace=False)  # among the records kept
    old = out["salary"].iloc[which].str[1:].astype(int).to_numpy()
    shift = 1 + rng.integers(0, 14, changed)  # always another value
    out.loc[which, "salary"] = [f"s{x:02d}" for x in (old + shift) % 15]
    out = pd.concat([out, _people(rng, first, new)], ignore_index=True)
    return out.sample(frac=1, random_state=seed).reset_index(drop=True)


def _truth(frame: pd.DataFrame, lo: int, hi: int, values) -> int:
    ages = pd.to_numeric(frame["age"])
    return int(((ages >= lo) & (ages <= hi) & frame["salary"].isin(values)).sum())


def test_versions_keep_signatures_and_answer_the_truth(v1, tmp_path):
    frame, data = v1
    state = tmp_path / "private" / "store"
    build_store(_cfg(data, state), InProcessEngine())
    snapshots = [frame]
    for k in range(3):  # three updates: deletes, inserts, changed values
        nxt = _churn(snapshots[-1], k, 10_000 * (k + 1), 60, 50, 10)
        u = update_store(state, str(write_table(nxt, tmp_path / f"s{k}")))
        assert (u.version, u.rows) == (k + 2, len(nxt))
        assert u.deleted == 60 + 10 and u.inserted == 50 + 10  # a changed record: both
        snapshots.append(nxt)
    report = verify_store(state)
    assert report.passed, report.as_dict()["failures"]
    db = StatDB.open(state)
    assert db.latest == 4
    for n, snap in enumerate(snapshots, start=1):
        for lo, hi, values in [(30, 45, ["s03", "s04"]), (20, 69, ["s01"]), (50, 55, ["s10"])]:
            where = f"age between {lo} and {hi} and salary in ({', '.join(values)})"
            for method in ("dyn-ana", "dyn-gen", "sta-ana"):
                a = db.count(where, method, version=n)
                assert a.low <= _truth(snap, lo, hi, values) <= a.high, (n, method, where)
        assert (
            db.count("salary in (s02)", "dyn-gen", version=n).low <= (snap["salary"] == "s02").sum()
        )
    logged = [json.loads(x) for x in (state / "queries.jsonl").read_text().splitlines()]
    assert {x["version"] for x in logged} == {1, 2, 3, 4}


def test_every_survivor_keeps_its_signature(v1, tmp_path):
    """Checked here from the files, apart from the store's own check."""
    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    update_store(state, str(write_table(_churn(frame, 5, 50_000, 200, 150, 0), tmp_path / "s")))
    meta, base = verified(state)
    keys = []
    for n in (1, 2):
        rows = read_version(state, meta, base, n).with_counterfeits("salary")
        key = signature_keys(rows["bucket"].to_numpy(), rows["salary"].to_numpy(), 15)
        keys.append(pd.Series(key, index=rows["row"].to_numpy()))
        per = rows.groupby(["bucket", "salary"]).size().groupby(level=0).agg(["min", "max", "size"])
        assert (per["min"] == per["max"]).all() and (per["size"] >= M).all()
    both = keys[0].index.intersection(keys[1].index[keys[1].index >= 0])
    assert len(both) == 1800 and (keys[0][both] == keys[1][both]).all()
    fake = pq.read_table(version_dir(state, 2) / "counterfeits.parquet").to_pandas()
    assert int(fake["count"].sum()) == meta["versions"][1]["counterfeits"] > 0


def test_a_failed_update_changes_nothing(v1, tmp_path):
    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    before = (state / STORE_FILE).read_bytes()
    bad = frame.copy()
    bad.loc[0, "age"] = "200"  # outside the store's domain
    with pytest.raises(DataError, match="age: 200 not in the store's domain"):
        update_store(state, str(write_table(bad, tmp_path / "a")))
    twice = pd.concat([frame, frame.iloc[:3]], ignore_index=True)
    with pytest.raises(DataError, match="3 values of the record identifier pid appear more"):
        update_store(state, str(write_table(twice, tmp_path / "b")))
    assert (state / STORE_FILE).read_bytes() == before
    assert not (state / "versions").exists() or not any((state / "versions").iterdir())
    # an interrupted update's directory (renamed, never listed) is ignored, then replaced
    leftover = version_dir(state, 2)
    leftover.mkdir(parents=True)
    (leftover / "added.parquet").write_bytes(b"half")
    assert verify_store(state).passed
    update_store(state, str(write_table(_churn(frame, 1, 90_000, 5, 5, 0), tmp_path / "c")))
    assert verify_store(state).passed and StatDB.open(state).latest == 2


def test_a_store_without_a_key_cannot_be_updated(v1, tmp_path):
    frame, data = v1
    build_store(_cfg(data, tmp_path / "store", key=None), InProcessEngine())
    with pytest.raises(VpubError, match="built without a record identifier"):
        update_store(tmp_path / "store", str(data))


def test_tampering_with_a_version_is_found(v1, tmp_path):
    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    update_store(state, str(write_table(_churn(frame, 2, 70_000, 100, 80, 0), tmp_path / "s")))
    f = version_dir(state, 2) / "counterfeits.parquet"
    fake = pq.read_table(f).to_pandas()
    fake.loc[0, "count"] += 1
    fake.to_parquet(f, index=False)
    assert not verify_store(state).passed  # its SHA-256
    meta = read_store(state)  # re-sealed by someone who can write the store
    meta["files"] = file_digests(state)
    meta["versions"][1]["counterfeits"] += 1
    write_store(state, meta)
    failures = " ".join(verify_store(state).as_dict()["failures"])
    assert "version 2: 1 buckets not balanced" in failures


def test_same_store_and_snapshot_give_the_same_version(v1, tmp_path):
    frame, data = v1
    a, b = tmp_path / "a", tmp_path / "b"
    build_store(_cfg(data, a), InProcessEngine())
    shutil.copytree(a, b)
    _same_update(a, b, write_table(_churn(frame, 3, 80_000, 40, 70, 5), tmp_path / "s"))


def _same_update(a, b, snapshot) -> None:
    """Both stores updated from `snapshot` write the same version, file by file."""
    update_store(a, str(snapshot))
    update_store(b, str(snapshot))
    for name in ("added.parquet", "deleted.parquet", "counterfeits.parquet"):
        assert pq.read_table(version_dir(a, 2) / name).equals(
            pq.read_table(version_dir(b, 2) / name)
        )


def test_the_cli_updates_lists_and_queries_versions(v1, tmp_path, capsys):
    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    snap = write_table(_churn(frame, 4, 60_000, 30, 30, 0), tmp_path / "s")
    assert main(["statdb", "update", str(state), "--input", str(snap)]) == 0
    assert "version 2" in capsys.readouterr().out
    assert main(["statdb", "versions", str(state), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [e["version"] for e in listed] == [1, 2] and listed[1]["deleted"] == 30
    where = "age between 30 and 40"
    assert main(["statdb", "query", str(state), "--where", where, "--version", "1"]) == 0
    assert "(version 1)" in capsys.readouterr().out
    assert (
        main(["statdb", "query", str(state), "--where", where, "--version", listed[1]["id"][:8]])
        == 0
    )
    assert "(version 2)" in capsys.readouterr().out
    assert main(["statdb", "query", str(state), "--where", where, "--version", "7"]) != 0
    assert "no version 7" in capsys.readouterr().err


def test_sta_gen_refuses_a_version_with_counterfeits(v1, tmp_path):
    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    update_store(state, str(write_table(_churn(frame, 6, 20_000, 50, 0, 0), tmp_path / "s")))
    db = StatDB.open(state)
    assert db.count("age between 20 and 30", "sta-gen", version=1).high >= 0
    with pytest.raises(SpecError, match="this version holds counterfeits"):
        db.count("age between 20 and 30", "sta-gen")


@pytest.mark.spark
def test_both_engines_stores_give_the_same_version(v1, tmp_path, spark_engine):
    frame, data = v1
    a, b = tmp_path / "a", tmp_path / "b"
    build_store(_cfg(data, a), InProcessEngine())
    build_store(_cfg(data, b, engine="spark"), spark_engine)
    _same_update(a, b, write_table(_churn(frame, 7, 30_000, 50, 50, 5), tmp_path / "s"))


def test_the_server_answers_any_version(v1, tmp_path):
    from serve_helpers import call, running

    from vpub_spark.serve.app import ServeSettings

    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    nxt = _churn(frame, 8, 40_000, 80, 20, 0)
    update_store(state, str(write_table(nxt, tmp_path / "s")))
    with running(ServeSettings(str(state), rate=0)) as url:
        status, schema = call(url, "/statdb/schema", token=None)
        assert status == 200 and schema["versions"] == [1, 2]
        body = {"where": "age between 30 and 45 and salary in (s03, s04)"}
        for version, snap in ((1, frame), (2, nxt), (None, nxt)):
            ask = body if version is None else {**body, "version": version}
            status, answer = call(url, "/statdb/count", ask, token=None)
            assert status == 200 and answer["version"] == (version or 2)
            assert answer["lower"] <= _truth(snap, 30, 45, ["s03", "s04"]) <= answer["upper"]
        status, answer = call(url, "/statdb/count", {**body, "version": 9}, token=None)
        assert status == 422 and answer["field"] == "version"
        ask = {**body, "method": "sta-gen"}
        status, answer = call(url, "/statdb/count", ask, token=None)
        assert status == 422 and answer["field"] == "method"
        third = _churn(nxt, 15, 95_000, 30, 30, 0)  # an update while the server runs
        update_store(state, str(write_table(third, tmp_path / "s3")))
        status, answer = call(url, "/statdb/count", body, token=None)
        assert status == 200 and answer["version"] == 3
        assert answer["lower"] <= _truth(third, 30, 45, ["s03", "s04"]) <= answer["upper"]
        assert call(url, "/statdb/schema", token=None)[1]["rows"] == len(third)
    logged = [json.loads(x) for x in (state / "queries.jsonl").read_text().splitlines()]
    assert [x["version"] for x in logged] == [1, 2, 2, 3]


def test_a_batch_answers_the_version_asked(v1, tmp_path):
    from vpub_spark.statdb.batch import answer_workload, write_workload

    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    update_store(state, str(write_table(_churn(frame, 9, 45_000, 90, 60, 0), tmp_path / "s")))
    workload = tmp_path / "w.txt"
    write_workload(state, 1, 0.3, 40, 1, workload)
    db = StatDB.open(state)
    for version in (1, 2):
        got = answer_workload(state, workload, "dyn-ana", InProcessEngine(workers=1), 0, version)
        want = [db.count(w, version=version, log=False) for w in got.answers["where"]]
        assert got.answers["low"].tolist() == [a.low for a in want]
        assert got.answers["high"].tolist() == [a.high for a in want]
    logged = [json.loads(x)["version"] for x in (state / "queries.jsonl").read_text().splitlines()]
    assert logged == [1] * 40 + [2] * 40


def test_marginals_from_every_version_stay_m_invariant(v1, tmp_path):
    """A marginal from version 1 and one from version 2: each release passes its audit,
    the private audit checks both against their versions (every tuple in one group, its
    signature its bucket's, sizes and counterfeits as published), and an estimate from
    version 2's marginal scales away its counterfeits."""
    from vpub_spark.publishing.marginals_add import add_marginal
    from vpub_spark.release.reader import open_release
    from vpub_spark.release.stores.audit import audit_store
    from vpub_spark.utility.queries import estimate_count
    from vpub_spark.utility.release_models import release_models
    from vpub_spark.utility.where import parse_where

    frame, data = v1
    state, out = tmp_path / "store", tmp_path / "out"
    build_store(_cfg(data, state), InProcessEngine())
    first = add_marginal(state, ["age"], out, "age-v1")
    nxt = _churn(frame, 10, 35_000, 150, 120, 10)
    snapshot = write_table(nxt, tmp_path / "s")
    update_store(state, str(snapshot))
    second = add_marginal(state, ["age", "zip"], out, "agezip-v2")
    assert main(["audit", str(second.path), "--source", str(snapshot)]) == 0  # its source
    assert first.audit.passed and second.audit.passed
    m1, m2 = first.manifest["store"], second.manifest["store"]
    assert m1["version"] == 1 and m2["version"] == 2 and m2["version_id"] != m1["version_id"]
    rel = open_release(second.path)
    groups = rel.read("age-zip-salary", "groups").to_pandas()
    assert groups["size"].sum() == len(nxt) and groups["counterfeits"].sum() > 0
    st = rel.read("age-zip-salary", "st").to_pandas()
    assert st["count"].sum() == len(nxt) + groups["counterfeits"].sum()
    report = audit_store(state)
    assert report.passed, report.as_dict()["failures"]
    models, domains = release_models(rel)
    query = parse_where("age between 30 and 45 and salary in (s03, s04)", domains)
    est = estimate_count(models, query, int(rel.manifest["source"]["rows"]), domains)
    truth = _truth(nxt, 30, 45, ["s03", "s04"])
    assert abs(est - truth) < 0.5 * truth + 5
    meta = read_store(state)
    assert [p.get("version") for p in meta["published"]] == [1, 2]


def test_vpub_releases_names_the_store_version(v1, tmp_path, capsys):
    frame, data = v1
    state, out = tmp_path / "store", tmp_path / "out"
    build_store(_cfg(data, state), InProcessEngine())
    update_store(state, str(write_table(_churn(frame, 11, 25_000, 20, 20, 0), tmp_path / "s")))
    add = ["marginals", "add", "--state", str(state), "--out", str(out)]
    assert main([*add, "--attributes", "age", "--release-id", "a2"]) == 0
    assert main([*add, "--attributes", "zip", "--release-id", "z1", "--version", "1"]) == 0
    capsys.readouterr()
    ids = {e["version"]: e["id"] for e in read_store(state)["versions"]}
    assert main(["releases", "list", str(out), "--json"]) == 0
    listed = {r["release_id"]: r["store version"] for r in json.loads(capsys.readouterr().out)}
    assert listed == {"a2": ids[2], "z1": ids[1]}
    assert main(["releases", "show", str(out), "a2"]) == 0
    assert ids[2] in capsys.readouterr().out


def test_an_update_from_the_same_snapshot_writes_nothing(v1, tmp_path, capsys):
    """A rerun of a scheduled update (the same snapshot, rows in another order)."""
    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    nxt = _churn(frame, 12, 15_000, 10, 10, 0)
    assert update_store(state, str(write_table(nxt, tmp_path / "a"))).version == 2
    before = (state / STORE_FILE).read_bytes()
    assert update_store(state, str(data)).version == 3  # version 1's source again: a change
    before = (state / STORE_FILE).read_bytes()
    again = write_table(frame.sample(frac=1, random_state=3), tmp_path / "b")
    u = update_store(state, str(again))
    assert u.unchanged and u.version == 3 and (state / STORE_FILE).read_bytes() == before
    assert main(["statdb", "update", str(state), "--input", str(again)]) == 0
    assert "already has these changes (version 3)" in " ".join(capsys.readouterr().out.split())
    fresh = tmp_path / "fresh"
    build_store(_cfg(data, fresh), InProcessEngine())
    assert update_store(fresh, str(again)).unchanged  # version 1's own source


def test_the_record_keys_are_sealed_and_never_published(v1, tmp_path):
    """The store keeps keyed hashes of the identifiers, never the identifiers; a release
    published from a keyed store holds neither (no key column, no identifier)."""
    from vpub_spark.publishing.pipeline import publish

    frame, data = v1
    state = tmp_path / "store"
    build_store(_cfg(data, state), InProcessEngine())
    keys = pq.read_table(state / "keys" / "part-0.parquet").to_pandas()
    assert list(keys.columns) == ["row", "key0", "key1"] and len(keys) == 2000
    text = b"".join(f.read_bytes() for f in state.rglob("*") if f.is_file())
    assert b"p1999" not in text and b"p0" not in text  # no identifier in the clear
    out, published = tmp_path / "out", tmp_path / "p"
    marginals = {"sensitive": "salary", "schemas": [["age"]], "state": str(published), "key": "pid"}
    release = publish(_publish_cfg(data, out, marginals), InProcessEngine()).path
    files = [f for f in release.rglob("*") if f.is_file()]
    assert b"p1999" not in b"".join(f.read_bytes() for f in files)
    for part in (f for f in files if f.suffix == ".parquet"):
        names = pq.read_schema(part).names
        assert not {"pid", "key0", "key1", "row"} & set(names), (part, names)
    assert b"key0" not in (release / "manifest.json").read_bytes()
    pq.write_table(pa.Table.from_pandas(keys.iloc[1:]), state / "keys" / "part-0.parquet")
    assert not verify_store(state).passed


def _publish_cfg(data, out, marginals: dict):
    return config_from_dict(
        {
            "input": {"path": str(data)},
            "method": "marginals",
            "privacy": {"model": "m-invariance", "m": M},
            "engine": "inprocess",
            "marginals": marginals,
            "output": {"path": str(out), "release_id": "first"},
        }
    )


def test_a_store_made_by_publish_is_updatable(v1, tmp_path):
    """`vpub publish` with method marginals and `marginals.key`: the same updatable
    store, then a version, a marginal from it, and the private audit of both releases."""
    from vpub_spark.publishing.marginals_add import add_marginal
    from vpub_spark.publishing.pipeline import publish
    from vpub_spark.release.stores.audit import audit_store

    frame, data = v1
    state, out = tmp_path / "p", tmp_path / "out"
    marginals = {"sensitive": "salary", "schemas": [["age"]], "state": str(state), "key": "pid"}
    assert publish(_publish_cfg(data, out, marginals), InProcessEngine()).audit.passed
    meta = read_store(state)
    assert meta["key"] == "pid" and [e["version"] for e in meta["versions"]] == [1]
    nxt = _churn(frame, 13, 55_000, 70, 40, 5)
    assert update_store(state, str(write_table(nxt, tmp_path / "s"))).version == 2
    assert add_marginal(state, ["age"], out, "second").audit.passed
    report = audit_store(state)
    assert report.passed, report.as_dict()["failures"]
    bad = {**marginals, "key": "age", "state": str(tmp_path / "q")}
    with pytest.raises(SpecError, match="a QI or the sensitive attribute"):
        publish(_publish_cfg(data, tmp_path / "out2", bad), InProcessEngine())


def test_a_change_set_gives_the_snapshots_changes(v1, tmp_path, capsys):
    """--upserts (new and changed records) and --deletes (identifiers): the same
    deletions and insertions as the snapshot they describe, a valid version, a rerun
    that writes nothing, and clear errors."""
    from vpub_spark.statdb.update import Changes

    frame, data = v1
    a, b = tmp_path / "a", tmp_path / "b"
    build_store(_cfg(data, a), InProcessEngine())
    shutil.copytree(a, b)
    nxt = _churn(frame, 14, 65_000, 40, 30, 6)
    old = frame.set_index("pid")
    new = nxt.set_index("pid")
    gone = sorted(set(old.index) - set(new.index))
    changed = [p for p in new.index if p not in old.index or not old.loc[p].equals(new.loc[p])]
    ups = write_table(nxt[nxt["pid"].isin(changed)], tmp_path / "ups")
    dels = write_table(pd.DataFrame({"pid": gone}), tmp_path / "dels")
    by_snapshot = update_store(a, str(write_table(nxt, tmp_path / "snap")))
    by_changes = update_store(b, Changes(upserts=str(ups), deletes=str(dels)))
    assert (
        (by_changes.deleted, by_changes.inserted, by_changes.rows)
        == (
            by_snapshot.deleted,
            by_snapshot.inserted,
            by_snapshot.rows,
        )
        == (46, 36, len(nxt))
    )
    gone_a = pq.read_table(version_dir(a, 2) / "deleted.parquet")["row"].to_pylist()
    gone_b = pq.read_table(version_dir(b, 2) / "deleted.parquet")["row"].to_pylist()
    assert sorted(gone_a) == sorted(gone_b)
    assert verify_store(b).passed
    args = ["statdb", "update", str(b), "--upserts", str(ups), "--deletes", str(dels)]
    assert main(args) == 0 and "already has these changes" in capsys.readouterr().out
    with pytest.raises(DataError, match="1 identifiers to delete are not in the store"):
        update_store(
            b, Changes(deletes=str(write_table(pd.DataFrame({"pid": ["nobody"]}), tmp_path / "x")))
        )
    both = write_table(pd.DataFrame({"pid": [changed[0]]}), tmp_path / "y")
    with pytest.raises(DataError, match="both deleted and upserted"):
        update_store(b, Changes(upserts=str(ups), deletes=str(both)))
    with pytest.raises(SpecError, match="not both"):
        Changes(str(ups), str(ups))
    only = write_table(pd.DataFrame({"pid": changed[:4]}), tmp_path / "z")  # deletes alone
    u = update_store(b, Changes(deletes=str(only)))
    assert (u.version, u.deleted, u.inserted) == (3, 4, 0) and verify_store(b).passed


def test_version_numbers_and_ids():
    from vpub_spark.release.stores.versions import version_number

    meta = {
        "store_id": "s",
        "versions": [{"version": 1, "id": "abcdef0123"}, {"version": 2, "id": "abcdef0199"}],
    }
    assert version_number(meta, None) == 2 and version_number(meta, "1") == 1
    assert version_number(meta, "abcdef0199") == 2 and version_number(meta, "abcdef019") == 2
    with pytest.raises(SpecError, match="begins the ids of versions 1, 2"):
        version_number(meta, "abcdef01")
    with pytest.raises(SpecError, match="no version 3"):
        version_number(meta, 3)
