"""Every method over Spark Connect, as a user runs it: a real Spark Connect server on
loopback (deploy/connect-server.sh: pyspark's own sbin script and spark-connect jar),
`SPARK_REMOTE` set, and the command line (`main`, one client process per step)
publishing (scripts/same_release.py, every method), auditing and querying on the Spark
engine through it. The releases equal the
in-process engine's for the same seed (which the engine-equality tests prove equal to a
classic Spark session's). A bad column is one line and exit 2.

Each command runs in its own process: pyspark's Spark Connect mode is process-wide (a
classic session in the same process would run over the server too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from s3_helpers import free_port

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[2]
SAME_RELEASE = ROOT / "scripts" / "same_release.py"
ROWS = 3000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The server's URL; stopped after the module."""
    env = os.environ | {
        "CONNECT_DIR": str(tmp_path_factory.mktemp("connect")),
        "CONNECT_PORT": str(free_port()),
        "PYTHON": sys.executable,
    }
    env.pop("SPARK_REMOTE", None)
    script = str(ROOT / "deploy" / "connect-server.sh")
    started = subprocess.run(
        [script, "start"], env=env, capture_output=True, text=True, timeout=240
    )
    try:
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        assert url == f"sc://127.0.0.1:{env['CONNECT_PORT']}"
        yield url
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True, timeout=120)


def _run(args: list[str], remote: str | None, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    env |= {"SPARK_REMOTE": remote} if remote else {}
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, **kw)


def _vpub(*args: str, remote: str | None) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "vpub_spark.cli", *args], remote, timeout=600)


@pytest.fixture(scope="module")
def published(server, tmp_path_factory):
    """Every method published over Spark Connect and in process, one seed."""
    out = tmp_path_factory.mktemp("same")
    for engine, remote in (("spark", server), ("inprocess", None)):
        done = _run(
            [sys.executable, str(SAME_RELEASE), "publish", str(out / engine)]
            + ["--engines", engine, "--rows", str(ROWS), "--one-process"],
            remote,
            timeout=1200,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_every_method_over_spark_connect_equals_in_process(published):
    spark, inprocess = published / "spark" / "spark", published / "inprocess" / "inprocess"
    done = _run([sys.executable, str(SAME_RELEASE), "compare", str(spark), str(inprocess)], None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("identical") == 9, done.stdout


AUDIT_AND_QUERY = """
import contextlib, io, json, sys
from vpub_spark.cli import main
out = {}
for release, where, data in json.loads(sys.argv[1]):
    for name, argv in (
        ("audit", ["audit", release, "--engine", "spark", "--json"]),
        ("query", ["query", release, "--where", where, "--engine", "spark", "--source", data]),
    ):
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            code = main(argv)
        out[f"{release} {name}"] = [code, text.getvalue()]
print("VPUB-RESULTS " + json.dumps(out))
"""


def test_every_release_audits_and_answers_over_spark_connect(server, published):
    """`vpub audit` and `vpub query --source` of every release on the Spark engine over
    the server (the command line's `main`, in one client process)."""
    data = published / "spark" / "data"
    where = f"salary = '{_a_label(data, 'salary')}'"
    releases = sorted(m.parent for m in (published / "spark" / "spark").glob("*/manifest.json"))
    assert len(releases) == 9
    asked = json.dumps([[str(r), where, str(data)] for r in releases])
    done = _run([sys.executable, "-c", AUDIT_AND_QUERY, asked], server, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("VPUB-RESULTS "))
    for key, (code, text) in json.loads(line.removeprefix("VPUB-RESULTS ")).items():
        assert code == 0, f"{key}: {text}"
        if key.endswith("audit"):
            assert json.loads(text)["passed"] is True, key
        else:
            assert "exact" in text, f"{key}: {text}"


def _a_label(data: Path, column: str) -> str:
    import pyarrow.dataset as ds

    return str(ds.dataset(data / "data", format="parquet").to_table(columns=[column])[column][0])


def test_a_bad_column_over_spark_connect_is_one_line(server, published, tmp_path):
    """A table spec naming a column the data lack: Spark's schema, read over the server,
    is checked; one line, exit 2, nothing written."""
    data = published / "spark" / "data"
    spec = yaml.safe_load((data / "table.yaml").read_text())
    spec["attributes"].append({"name": "nosuchcolumn"})
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(spec))
    config = {
        "input": {"path": str(data / "data"), "table": str(tmp_path / "table.yaml")},
        "engine": "spark",
        "rules": ["age, nosuchcolumn -> salary"],
        "privacy": {"l": 3},
        "output": {"path": str(tmp_path / "out")},
        "seed": 1,
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    done = _vpub("publish", "--config", str(path), remote=server)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuchcolumn" in lines[0], done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.parquet"))
