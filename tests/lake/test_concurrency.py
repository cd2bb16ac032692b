"""Concurrent publishes of one release id (lake/commit.py): exactly one commits, the
others fail with a clear message and leave nothing; with --wait they queue. Real
processes, many times, on both engines; the private store of the marginal publisher too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from release_helpers import RULES_1_3, TABLE1, made_with, vpub, write_table

from vpub_spark.release.audit.release import audit_release

BUSY = ("is being published by", "already exists and is not empty")


def _start(conf: Path, *extra: str, engine: str = "inprocess") -> subprocess.Popen:
    cmd = vpub("publish", "--config", str(conf), "--engine", engine, *extra)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _race(procs: list[subprocess.Popen]) -> tuple[int, list[str]]:
    """(how many committed, the others' error lines)"""
    done = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    errors = [err.strip().splitlines()[-1] for code, err in done if code != 0]
    assert all(code in (0, 2) for code, _ in done), done
    return sum(code == 0 for code, _ in done), errors


def _conf(tmp: Path, data: Path, **extra) -> Path:
    conf = tmp / "c.yaml"
    d = {
        "input": {"path": str(data)},
        "rules": RULES_1_3,
        "privacy": {"l": 2},
        "output": {"path": str(tmp / "out"), "release_id": "r"},
    } | extra
    conf.write_text(yaml.safe_dump(d))
    return conf


def _only_the_release(out: Path) -> None:
    assert sorted(p.name for p in out.iterdir() if p.name != "_latest") == [
        "r"
    ]  # no stage, no lock left
    assert audit_release(out / "r").passed


def test_exactly_one_of_three_concurrent_runs_commits(tmp_path):
    data = write_table(TABLE1, tmp_path / "t")
    for trial in range(6):
        run = tmp_path / f"trial{trial}"
        run.mkdir()
        conf = _conf(run, data)
        committed, errors = _race([_start(conf, "--seed", str(s)) for s in range(3)])
        assert committed == 1, errors
        assert len(errors) == 2 and all(
            e.startswith("vpub: error: ") and any(b in e for b in BUSY) for e in errors
        )
        _only_the_release(run / "out")
        manifest = json.loads((run / "out" / "r" / "manifest.json").read_text())
        assert sum(made_with(manifest, s) for s in (0, 1, 2)) == 1


def test_waiting_runs_queue_and_overwrite_in_turn(tmp_path):
    data = write_table(TABLE1, tmp_path / "t")
    conf = _conf(tmp_path, data)
    committed, errors = _race(
        [_start(conf, "--seed", str(s), "--wait", "120", "--overwrite") for s in range(3)]
    )
    assert (committed, errors) == (3, [])
    _only_the_release(tmp_path / "out")
    committed, errors = _race([_start(conf, "--wait", "120") for _ in range(2)])  # no --overwrite
    assert committed == 0 and all("already exists" in e for e in errors)


def test_concurrent_marginals_share_one_private_store_safely(tmp_path):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 60, n).astype(str),
            "sex": rng.choice(["F", "M"], n),
            "job": [f"j{x}" for x in rng.integers(0, 8, n)],
        }
    )
    data = write_table(frame, tmp_path / "t")
    store = tmp_path / "private" / "store"
    for trial in range(3):
        conf = _conf(
            tmp_path,
            data,
            method="marginals",
            rules=None,
            privacy={"model": "m-invariance", "m": 3},
            marginals={
                "sensitive": "job",
                "schemas": [["age"], ["age", "sex"]],
                "state": str(store),
            },
            output={"path": str(tmp_path / f"out{trial}"), "release_id": "r"},
        )
        committed, errors = _race([_start(conf, "--seed", str(s)) for s in range(2)])
        assert committed == 1 and len(errors) == 1, errors
        assert any(b in errors[0] for b in (*BUSY, "already a bucket store")), errors
        meta = json.loads((store / "store.json").read_text())
        assert [p["release_id"] for p in meta["published"]] == ["r", "r"]  # its own two marginals
        assert (
            subprocess.run(vpub("audit", "--state", str(store)), capture_output=True).returncode
            == 0
        )
        import shutil

        shutil.rmtree(store)


@pytest.mark.spark
def test_concurrent_runs_on_spark(tmp_path):
    data = write_table(TABLE1, tmp_path / "t")
    conf = _conf(tmp_path, data)
    committed, errors = _race([_start(conf, "--seed", str(s), engine="spark") for s in range(2)])
    assert committed == 1 and len(errors) == 1 and any(b in errors[0] for b in BUSY), errors
    _only_the_release(tmp_path / "out")
