"""The scheduled release run for real (`-m airflow`): Apache Airflow installed from the
package registry into its own virtual environment (`.airflow-venv/`, kept between
runs), a standalone SQLite metadata database, the `spark_default` connection on
`local[2]` with this checkout's `spark-submit`, and `airflow dags test` on
deploy/airflow/vpub_release_dag.py. The release it commits must pass the audit from
its files. A publish task that fails (its input has not landed yet) commits nothing;
its retry, once the input is there, commits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vpub_spark.release.audit.release import audit_release

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT.parent / "shared" / "data" / "adult"
VENV = ROOT / ".airflow-venv"
DAY = "2026-11-23"
RELEASE = "adult-uad-20261123"

pytestmark = pytest.mark.airflow


def _airflow() -> Path:
    """Airflow in its own virtual environment (scripts/install_airflow.sh, which `make
    test` runs before the suite; installed here when missing, then reused)."""
    airflow = VENV / "bin" / "airflow"
    if not airflow.exists():
        env = os.environ | {"PYTHON": sys.executable}
        subprocess.run(
            [str(ROOT / "scripts" / "install_airflow.sh")], env=env, check=True, timeout=1200
        )
    return airflow


def _vpub_root(tmp: Path, landing: Path) -> Path:
    """What the DAG's `vpub_root` variable names: jobs/ and conf/ (the shipped Adult
    config, reading its input from `landing`)."""
    root = tmp / "vpub"
    (root / "conf").mkdir(parents=True)
    (root / "jobs").symlink_to(ROOT / "jobs")
    cfg = yaml.safe_load((ROOT / "conf" / "adult_uad.yaml").read_text())
    cfg["input"]["path"] = str(landing)
    (root / "conf" / "adult_uad.yaml").write_text(yaml.safe_dump(cfg))
    shutil.copy(ROOT / "conf" / "spark.yaml", root / "conf" / "spark.yaml")
    return root


def _env(tmp: Path, vpub_root: Path, releases: Path) -> dict[str, str]:
    home = tmp / "airflow"
    home.mkdir(exist_ok=True)
    bin_dir = Path(sys.executable).parent  # this checkout's python and spark-submit
    return os.environ | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "deploy" / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
        "AIRFLOW_VAR_VPUB_ROOT": str(vpub_root),
        "AIRFLOW_VAR_VPUB_RELEASES": str(releases),
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def _run(airflow: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(airflow), *args], env=env, capture_output=True, text=True, timeout=900
    )


def test_the_release_dag_runs_commits_an_audited_release_and_retries_safely(tmp_path):
    airflow = _airflow()
    landing, releases = tmp_path / "landing" / "adult", tmp_path / "releases"
    releases.mkdir()
    env = _env(tmp_path, _vpub_root(tmp_path, landing), releases)
    assert _run(airflow, env, "db", "migrate").returncode == 0
    failed = _run(airflow, env, "tasks", "test", "vpub_release", "publish", DAY)
    log = failed.stdout + failed.stderr  # the input has not landed: the task fails ...
    assert "input not found" in log and "new_state=up_for_retry" in log
    assert not (releases / RELEASE).exists()  # ... commits nothing, and is retried
    shutil.copytree(ADULT, landing)  # the data land; the whole run (its retry) goes through
    ran = _run(airflow, env, "dags", "test", "vpub_release", DAY)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "state=success" in ran.stdout + ran.stderr
    committed = releases / RELEASE
    assert (committed / "_SUCCESS").is_file()
    assert audit_release(committed).passed
