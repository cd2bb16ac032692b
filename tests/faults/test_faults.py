"""The fault-injection suite (marker `faults`, in CI): a driver killed at every
step, a full disk, an unwritable store, a corrupt input, concurrent publishes (in
tests/lake/test_concurrency.py) and 20 tampered releases. Every case: a clear error,
nothing half-committed, and a rerun commits the identical release."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from release_helpers import contents, same_contents, vpub

from vpub_spark.datasets.presets import write_generated
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.release.audit.release import audit_release

pytestmark = pytest.mark.faults
STEPS = ("read and encode", "rules and schema", "plan partitions", "anonymize and write", "audit")


@pytest.fixture(scope="module")
def sal(tmp_path_factory):
    out = tmp_path_factory.mktemp("sal") / "sal"
    write_generated(InProcessEngine(), "sal", 300_000, 5, str(out))
    return out


def _config(tmp: Path, data: Path, out: Path, engine: str = "inprocess") -> Path:
    conf = tmp / f"c-{uuid.uuid4().hex[:6]}.yaml"
    conf.write_text(
        json.dumps(
            {
                "input": {"path": str(data)},
                "privacy": {"l": 5},
                "rules": {"random": {"c": 4, "lhs": 3, "seed": 3}},
                "output": {"path": str(out), "release_id": "r"},
                "seed": 11,
                "engine": engine,
                "partitions": 3,
            }
        )
    )
    return conf


def _publish(conf: Path, **kw) -> subprocess.CompletedProcess:
    cmd = vpub("publish", "--config", str(conf))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


ENGINES = ["inprocess", pytest.param("spark", marks=pytest.mark.spark)]


def _spark_logged(done: subprocess.CompletedProcess, logs: Path) -> bool:
    """The one line names the Spark log (in `logs`), which holds what Spark reported."""
    found = list(logs.glob("spark-*.log"))
    return (
        len(found) == 1
        and f"(details in {found[0]})" in done.stderr
        and "ERROR" in found[0].read_text()
    )


def _clean(out: Path) -> bool:
    """Nothing half-committed: no target, or a committed one that audits clean."""
    target = out / "r"
    return not target.exists() or ((target / "_SUCCESS").exists() and audit_release(target).passed)


@pytest.fixture(scope="module")
def reference(sal, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    assert _publish(_config(tmp, sal, tmp / "out")).returncode == 0
    return contents(tmp / "out" / "r")


@pytest.mark.parametrize("after", [None, *STEPS[:-1]])
def test_driver_killed_at_each_step(sal, reference, tmp_path, after):
    """kill -9 once the step before has finished (`after`; None: as soon as it starts)."""
    out = tmp_path / "out"
    cmd = vpub("publish", "--config", str(_config(tmp_path, sal, out)))
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if (after is None and line.startswith("publishing")) or (after and f"✓ {after}" in line):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL and _clean(out)
    assert not (out / "r").exists()  # killed mid-run (each later step takes >= 0.1 s here)
    again = _publish(_config(tmp_path, sal, out))
    assert again.returncode == 0, again.stderr
    assert same_contents(contents(out / "r"), reference)
    assert sorted(p.name for p in out.iterdir() if p.name != "_latest") == [
        "r"
    ]  # the dead run's stage was removed


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a 2 MiB tmpfs here ({done.stderr.strip() or 'mount failed'}); the file-size-limit test in tests/release/test_reliability.py covers the same path"
        )
    yield disk
    subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_full_disk(sal, reference, tmp_path, small_disk, engine):
    """On Spark too: one line (no executor log, no worker traceback on the terminal).
    The rerun where there is room is the in-process one, so only that case runs it (the
    engines' releases agree: tests/engines)."""
    env = os.environ | {"VPUB_LOG_DIR": str(tmp_path / "logs")}
    done = _publish(_config(tmp_path, sal, small_disk / "out", engine), env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr
    assert engine == "inprocess" or _spark_logged(done, tmp_path / "logs"), done.stderr
    assert list((small_disk / "out").iterdir()) == []  # staging removed, nothing committed
    if engine == "spark":
        return
    out = tmp_path / "out"  # the same run where there is room
    assert _publish(_config(tmp_path, sal, out)).returncode == 0
    assert same_contents(contents(out / "r"), reference)


def test_an_unwritable_store(tmp_path):
    import numpy as np
    import pandas as pd
    from release_helpers import write_table

    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 60, 300).astype(str),
            "job": [f"j{x}" for x in rng.integers(0, 8, 300)],
        }
    )
    data = write_table(frame, tmp_path / "t")
    (tmp_path / "blocked").write_text("a file where the store's directory should go")
    conf = tmp_path / "m.yaml"
    d = {
        "input": {"path": str(data)},
        "method": "marginals",
        "privacy": {"model": "m-invariance", "m": 3},
        "marginals": {
            "sensitive": "job",
            "schemas": [["age"]],
            "state": str(tmp_path / "blocked" / "store"),
        },
        "output": {"path": str(tmp_path / "out"), "release_id": "r"},
        "engine": "inprocess",
    }
    conf.write_text(json.dumps(d))
    done = _publish(conf)
    assert (
        done.returncode == 2
        and "cannot create the output directory" in done.stderr
        and "Traceback" not in done.stderr
    )
    assert not (tmp_path / "out" / "r").exists()
    d["marginals"]["state"] = str(tmp_path / "private" / "store")
    conf.write_text(json.dumps(d))
    assert _publish(conf).returncode == 0 and audit_release(tmp_path / "out" / "r").passed


@pytest.mark.parametrize("engine", ENGINES)
def test_a_corrupt_input_file(sal, tmp_path, engine):
    broken = tmp_path / "sal"
    shutil.copytree(sal, broken)
    part = next((broken / "data").glob("*.parquet"))
    part.write_bytes(part.read_bytes()[:1000])
    done = _publish(_config(tmp_path, broken, tmp_path / "out", engine))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and part.name in done.stderr, (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert list((tmp_path / "out").iterdir()) == []
