"""The release catalog (lake/catalog.py, `vpub releases`): list, show with
lineage, latest, diff and prune, on a local root and on a real S3-compatible server."""

from __future__ import annotations

import json
import subprocess

from release_helpers import config, vpub

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.lake.catalog import Root, diff, latest, lineage, manifests, prunable, set_latest
from vpub_spark.publishing.pipeline import publish

RULES = ["age, zip -> job", "sex -> job"]


def _family(table, root: str, seeds=(1, 2, 3)) -> None:
    for s in seeds:
        publish(
            config(
                table,
                root,
                RULES,
                3,
                seed=s,
                output={"path": root, "release_id": f"r{s}", "family": "jobs"},
            ),
            InProcessEngine(),
        )


def test_latest_lineage_diff_and_prune(table, root):
    _family(table, root)
    r = Root(root)
    found = manifests(r)
    assert sorted(found) == ["r1", "r2", "r3"] and latest(r, "jobs") == "r3"
    assert [found[i]["supersedes"] for i in ("r1", "r2", "r3")] == [None, "r1", "r2"]
    assert lineage(found, "r3") == ["r3", "r2", "r1"]
    assert diff(found["r1"], found["r1"]) == []
    changed = {what for what, _, _ in diff(found["r1"], found["r2"])}
    assert "files with other bytes" in changed and not any("seed" in w for w in changed)
    set_latest(r, "jobs", "r1")  # the latest is never pruned, even when old
    assert prunable(found, 1, {"r1"}, {}) == ["r2"]
    r.remove_release("r2")
    assert sorted(manifests(r)) == ["r1", "r3"]


def _m(rid: str, at: str, store: str | None = None) -> dict:
    m = {"release_id": rid, "created_at": at, "family": "f"}
    return m | ({"store": {"store_id": store}} if store else {})


def test_prune_keeps_what_a_private_store_references():
    found = {"a": _m("a", "1"), "b": _m("b", "2", "s1"), "c": _m("c", "3", "s1"), "d": _m("d", "4")}
    assert prunable(found, 1, {"d"}, {}) == ["a"]  # b, c name a store nobody showed: kept
    assert prunable(found, 1, {"d"}, {"s1": {"c"}}) == ["a", "b"]  # the store lists c only
    assert prunable(found, 4, {"d"}, {}) == []


def test_releases_commands(table, tmp_path):
    root = str(tmp_path / "lake")
    _family(table, root, (1, 2))

    def run(*args: str) -> str:
        done = subprocess.run(vpub("releases", *args), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = json.loads(run("list", root, "--json"))
    assert [(r["release_id"], r["family"], r["audit"]) for r in listed] == [
        ("r1", "jobs", "passed"),
        ("r2", "jobs", "passed"),
    ]
    assert run("latest", root, "jobs").strip() == "r2"
    shown = json.loads(run("show", root, "r2", "--json"))
    assert shown["lineage (newest first)"] == "r2 <- r1" and shown["latest of its family"] is True
    assert "files with other bytes" in (d := run("diff", root, "r1", "r2")) and "seed" not in d
    assert "would remove r1" in run("prune", root, "--keep", "1", "--dry-run")
    assert "removed r1" in run("prune", root, "--keep", "1")
    assert [r["release_id"] for r in json.loads(run("list", root, "--json"))] == ["r2"]
    bad = subprocess.run(
        vpub("releases", "show", root, "nope"), capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "no committed release 'nope'; there are: r2" in bad.stderr
