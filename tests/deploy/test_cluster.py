"""A real standalone cluster on loopback (deploy/cluster.sh: a master and two workers),
jobs submitted through deploy/submit.sh (docs/how-to/setup.md):
- the driver killed in the middle of writing: nothing is committed;
- its rerun, a whole job on the cluster, has an executor killed in the middle of
  writing: Spark's retries finish it, and the release equals the local-mode release
  for the same seed and audits clean (one rerun for both faults: a job here takes
  about a minute and a half)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from release_helpers import config, contents, same_contents
from s3_helpers import free_port

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[2]
ROWS, PARTITIONS = 120_000, 12
SETTINGS = dict(partitions=PARTITIONS, seed=7)
RULES = {"random": {"c": 5, "lhs": 3, "seed": 2}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    env = os.environ | {
        "CLUSTER_DIR": str(tmp_path_factory.mktemp("cluster")),
        "MASTER_PORT": str(free_port()),
        "MASTER_UI_PORT": str(free_port()),
        "WORKER_CORES": "1",
        "WORKER_MEMORY": "1536m",
        "PYTHON": sys.executable,
    }
    script = str(ROOT / "deploy" / "cluster.sh")
    started = subprocess.run(
        [script, "start", "2"], env=env, capture_output=True, text=True, timeout=180
    )
    try:
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        assert url == f"spark://127.0.0.1:{env['MASTER_PORT']}"
        status = subprocess.run(
            [script, "status"], env=env, capture_output=True, text=True, timeout=60
        )
        assert "2 alive worker(s)" in status.stdout, status.stdout + status.stderr
        yield url, env
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def sal(tmp_path_factory):
    from vpub_spark.datasets.presets import write_generated

    d = tmp_path_factory.mktemp("sal") / "sal"
    write_generated(InProcessEngine(), "sal", ROWS, 11, str(d))
    return d


@pytest.fixture(scope="module")
def reference(spark_engine, sal, tmp_path_factory):
    """The local-mode (local[2]) release for the same input, seed and partitions."""
    out = tmp_path_factory.mktemp("local")
    return publish(config(sal, out, RULES, 5, engine="spark", **SETTINGS), spark_engine)


def _job(tmp_path: Path, sal: Path, out: Path) -> Path:
    cfg = {
        "engine": "spark",
        "input": {"path": str(sal)},
        "privacy": {"l": 5},
        "rules": RULES,
        "method": "uad",
        "output": {"path": str(out), "release_id": "r"},
        "seed": SETTINGS["seed"],
        "partitions": PARTITIONS,
    }
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(cfg))
    return f


def _submit(url: str, env: dict, job: Path, **popen) -> subprocess.Popen:
    cmd = [
        str(ROOT / "deploy" / "submit.sh"),
        "--master",
        url,
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.task.maxFailures=4",
        str(ROOT / "jobs" / "publish.py"),
        "--config",
        str(job),
    ]
    return subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def _wait_for_first_part(
    out: Path,
    proc: subprocess.Popen,
    timeout: float = 240,
    exclude: tuple[Path, ...] | list[Path] = (),
) -> None:
    """Until a task of this run has written its first part file into its staging
    directory (`exclude`: the staging directories of earlier runs)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        parts = out.glob(".r.staging-*/tables/*/qit/part-*.parquet")
        if any(p.parents[3] not in exclude for p in parts):
            return
        if proc.poll() is not None:
            pytest.fail(f"the job ended before writing started: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    pytest.fail("no part file appeared")


def _executor_pids(cluster_dir: str) -> list[int]:
    """Executor JVMs this cluster's workers launched (their command line names the work dir)."""
    out = subprocess.run(
        ["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True
    ).stdout.split()
    pids = []
    for p in out:
        try:
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(f"/proc/{p}/cwd")
        except OSError:
            continue
        if "CoarseGrainedExecutorBackend" in cmdline and cwd.startswith(cluster_dir):
            pids.append(int(p))
    return sorted(pids)


def test_a_killed_driver_commits_nothing_and_a_rerun_that_loses_an_executor_commits(
    cluster, sal, reference, tmp_path
):
    """Two faults, one job each: the driver killed while its tasks write commits
    nothing; the rerun has an executor killed while its tasks write, Spark's retries
    finish it, and it commits the local-mode release, which audits clean."""
    url, env = cluster
    out = tmp_path / "out"
    job = _job(tmp_path, sal, out)
    proc = _submit(url, env, job, start_new_session=True)
    _wait_for_first_part(out, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # spark-submit's JVM and the Python driver
    proc.communicate(timeout=60)
    assert not (out / "r").exists()  # no committed (or half-written) release at the target
    dead = list(out.glob(".r.staging-*"))
    assert dead  # what the killed run wrote stays hidden in its staging directory
    rerun = _submit(url, env, job)
    _wait_for_first_part(out, rerun, exclude=dead)
    pids = _executor_pids(env["CLUSTER_DIR"])
    assert len(pids) == 2 and rerun.poll() is None  # both executors up, the job still running
    os.kill(pids[0], signal.SIGKILL)
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err[-3000:]
    assert pids[0] not in _executor_pids(env["CLUSTER_DIR"])
    release = out / "r"
    assert (release / "_SUCCESS").exists()
    assert not list(out.glob(".r.staging-*"))  # the dead driver's staging directory was removed
    assert same_contents(contents(release), contents(reference.path))
    report = audit_release(release, source=str(sal / "data"))
    assert report.passed, report.as_dict()
