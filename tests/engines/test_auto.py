"""`engine: auto`: in process when the input's estimated peak fits half the
available memory and no cluster is configured, Spark otherwise; every choice says why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from release_helpers import write_table

from vpub_spark.cli import main
from vpub_spark.engines import auto, engine_for
from vpub_spark.engines.auto import BASE_BYTES, BYTES_PER_CELL, CSV_FACTOR, choose_engine


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({c: rng.integers(0, 5, 400).astype(str) for c in "abcd"})
    return write_table(frame, tmp_path / "t")


def test_a_small_input_runs_in_process_and_says_why(table):
    choice = choose_engine(str(table / "data"), "local[*]")
    assert (
        choice.engine == "inprocess"
        and "fits in 50%" in choice.reason
        and "MB of CSV" in choice.reason
    )
    engine, why = engine_for("auto", None, str(table / "data"))
    assert engine.name == "inprocess" and why == choice.reason
    assert engine_for("spark", None, str(table / "data"))[1] == "as configured"


def test_estimates_follow_the_measured_rule(table, tmp_path):
    size = (table / "data" / "part.csv").stat().st_size
    assert auto.estimated_peak(table / "data")[0] == BASE_BYTES + int(size * CSV_FACTOR)
    pd.DataFrame({"a": np.arange(1000), "b": np.arange(1000)}).to_parquet(tmp_path / "p.parquet")
    peak, what = auto.estimated_peak(tmp_path / "p.parquet")
    assert peak == BASE_BYTES + int(2000 * BYTES_PER_CELL) and what == "2,000 Parquet cells"


def test_too_big_for_memory_or_a_cluster_means_spark(table, monkeypatch):
    monkeypatch.setattr(auto, "available_memory", lambda: BASE_BYTES)  # nothing to spare
    choice = choose_engine(str(table / "data"), "local[*]")
    assert choice.engine == "spark" and "does not fit" in choice.reason
    monkeypatch.undo()
    assert choose_engine(str(table / "data"), "spark://host:7077").engine == "spark"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")
    assert "spark-submit" in choose_engine(str(table / "data"), "local[*]").reason


def test_publish_defaults_to_auto_and_prints_the_choice(table, tmp_path, capsys):
    cfg = {
        "input": {"path": str(table / "data"), "table": str(table / "table.yaml")},
        "privacy": {"l": 2},
        "rules": [{"lhs": ["a", "b"], "rhs": "c"}],
        "method": "uad",
        "output": {"path": str(tmp_path / "out"), "release_id": "r"},
        "seed": 1,
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["publish", "--config", str(tmp_path / "c.yaml")]) == 0
    out = capsys.readouterr().out
    assert "on the inprocess engine (auto:" in " ".join(out.split())
    manifest = yaml.safe_load((tmp_path / "out" / "r" / "manifest.json").read_text())
    assert manifest["engine"] == "inprocess"


def test_a_spark_run_on_a_small_input_compiles_with_c1_only(table, monkeypatch):
    from vpub_spark.engines.spark.session import SparkSettings, driver_java_options

    engine, _ = engine_for("spark", None, str(table / "data"))
    assert engine.settings.small_input  # type: ignore[attr-defined]
    assert "-XX:TieredStopAtLevel=1" in driver_java_options(engine.settings)  # type: ignore[attr-defined]
    assert "TieredStopAtLevel" not in driver_java_options(SparkSettings())
    monkeypatch.setattr(auto, "SMALL_BYTES", 0)  # the same input, counted as large
    assert not engine_for("spark", None, str(table / "data"))[0].settings.small_input  # type: ignore[attr-defined]
    assert not auto.small_input(str(table / "missing"))  # the read reports that, not the sizing


def _publish_config(table, tmp_path, engine: str) -> str:
    cfg = {
        "input": {"path": str(table / "data"), "table": str(table / "table.yaml")},
        "privacy": {"l": 2},
        "rules": [{"lhs": ["a", "b"], "rhs": "c"}],
        "method": "uad",
        "output": {"path": str(tmp_path / "out"), "release_id": "r"},
        "seed": 1,
        "engine": engine,
    }
    (tmp_path / f"{engine}.yaml").write_text(yaml.safe_dump(cfg))
    return str(tmp_path / f"{engine}.yaml")


def test_spark_starts_early_only_for_a_publish_that_will_run_on_it(table, tmp_path, monkeypatch):
    """`cli/early.py`: the session's settings are `choose`'s, as `cmd_publish` will use."""
    from vpub_spark.cli import early
    from vpub_spark.engines import choose
    from vpub_spark.engines.spark import session

    started: list = []
    monkeypatch.setattr(session, "start_early", started.append)
    spark, auto_ = (
        _publish_config(table, tmp_path, "spark"),
        _publish_config(table, tmp_path, "auto"),
    )
    early.start_spark_early(["publish", "--config", spark])
    assert started == [choose("spark", None, str(table / "data"))[1]] and started[0].small_input
    for argv in (
        ["publish", "--config", auto_],  # auto: in process for this input
        ["publish", "--config", spark, "--engine", "inprocess"],
        ["publish", "--config", spark, "--help"],
        ["publish", "--config", str(tmp_path / "missing.yaml")],  # left for the command to report
        ["audit", "--config", spark],
        [],
    ):
        early.start_spark_early(argv)
    assert len(started) == 1
    early.start_spark_early(["publish", "--config", auto_, "--engine", "spark"])
    assert len(started) == 2


def test_a_publish_on_spark_started_early_commits(table, tmp_path):
    """The whole command in a new process: its session is built by the early thread and
    the command waits for it."""
    import subprocess

    from release_helpers import vpub

    from vpub_spark.release.audit.release import audit_release

    run = subprocess.run(
        vpub("publish", "--config", _publish_config(table, tmp_path, "spark")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "on the spark engine (as configured" in " ".join(run.stdout.split())
    assert audit_release(tmp_path / "out" / "r").passed


def test_the_time_model_prefers_spark_only_for_many_rows_on_many_cores(monkeypatch):
    """On C cores in process takes s n + p n / C, Spark f + q n / C (q about 4p): below
    (q - p) / s cores in process is faster at any size; on 64 cores Spark wins above
    f / (s - (q - p) / 64) rows."""
    rows_beyond = auto.SPARK_FIXED_S / (
        auto.INPROCESS_SERIAL_S - (auto.SPARK_CORE_S - auto.INPROCESS_CORE_S) / 64
    )
    assert 70e6 < rows_beyond < 110e6  # about 82M rows (docs/how-to/choose-engine.md)
    here, spark = auto.predicted_seconds(10**9, 2)
    assert here < spark  # 2 cores: in process however large
    monkeypatch.setattr(auto, "available_memory", lambda: 2**50)  # memory is no limit here
    for rows, engine in [(int(rows_beyond * 0.9), "inprocess"), (int(rows_beyond * 1.1), "spark")]:
        monkeypatch.setattr(auto, "input_size", lambda _p, r=rows: (r, BASE_BYTES, "n rows"))
        monkeypatch.setattr("vpub_spark.engines.pool.available_cores", lambda: 64)
        choice = choose_engine("input", "local[*]", workers=64)
        assert choice.engine == engine, choice.reason
        assert "with 64 cores" in choice.reason and "on 64 worker(s)" in choice.reason


def test_each_worker_adds_its_working_memory(table, monkeypatch):
    alone = auto.estimated_peak(table / "data")[0]
    assert auto.estimated_peak(table / "data", 3)[0] == alone + 3 * auto.WORKER_BYTES
    # room for the table and one worker, not for eight
    monkeypatch.setattr(auto, "available_memory", lambda: 2 * (alone + 2 * auto.WORKER_BYTES))
    assert choose_engine(str(table / "data"), "local[*]", workers=1).engine == "inprocess"
    choice = choose_engine(str(table / "data"), "local[*]", workers=8)
    assert choice.engine == "spark" and "on 8 worker(s), does not fit" in choice.reason


def test_csv_rows_are_estimated_from_the_first_lines(table):
    rows, _, _ = auto.input_size(table / "data")
    assert rows == 401  # 400 rows and the header, all within the first MiB
