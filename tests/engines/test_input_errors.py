"""Damaged and foreign input: one line naming the file and what is wrong, on
both engines, and the engines agree on what they accept."""

from __future__ import annotations

import os
import re
import subprocess

import pandas as pd
import pytest
import yaml
from release_helpers import vpub

from vpub_spark.cli import main
from vpub_spark.datasets.presets import resolve_input
from vpub_spark.errors import DataError, SpecError


def _csv_table(tmp_path, lines: list[bytes], encoding: str | None = None):
    (tmp_path / "data").mkdir(parents=True)
    (tmp_path / "data" / "a.csv").write_bytes(b"name,city\nAna,Madrid\nLuis,Lima\n")
    (tmp_path / "data" / "b.csv").write_bytes(b"name,city\n" + b"\n".join(lines) + b"\n")
    spec = {"name": "t", "attributes": [{"name": "name"}, {"name": "city"}]}
    if encoding:
        spec["encoding"] = encoding
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(spec))
    return resolve_input(tmp_path, None)


def _engines(inprocess, spark_engine=None):
    return [inprocess] + ([spark_engine] if spark_engine is not None else [])


@pytest.mark.spark
def test_undecodable_bytes_are_refused_by_both_engines_naming_file_and_line(
    tmp_path, inprocess, spark_engine
):
    path, spec = _csv_table(tmp_path, [b"Pepe,Quito", "José,España".encode("latin-1")])
    for engine in (inprocess, spark_engine):
        with pytest.raises(DataError, match=r"b\.csv: line 3 is not valid utf-8"):
            engine.load(path, spec)


@pytest.mark.spark
def test_a_declared_encoding_is_read_the_same_by_both_engines(tmp_path, inprocess, spark_engine):
    path, spec = _csv_table(tmp_path / "t", ["José,España".encode("latin-1")], encoding="latin-1")
    for engine in (inprocess, spark_engine):
        loaded = engine.load(path, spec)
        assert (
            "España" in loaded.dictionaries["city"].labels
            and "José" in loaded.dictionaries["name"].labels
        )


def test_a_real_replacement_character_in_utf8_is_kept(tmp_path, inprocess):
    path, spec = _csv_table(tmp_path, ["Zoe,\ufffdbidos".encode()])
    assert "\ufffdbidos" in inprocess.load(path, spec).dictionaries["city"].labels


def test_an_unknown_encoding_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="'klingon' is not a known text encoding"):
        _csv_table(tmp_path, [b"a,b"], encoding="klingon")


def _parquet_table(tmp_path):
    (tmp_path / "data").mkdir(parents=True)
    pd.DataFrame({"name": ["a", "b"], "city": ["x", "y"]}).to_parquet(
        tmp_path / "data" / "a.parquet"
    )
    (tmp_path / "data" / "b.parquet").write_bytes(
        (tmp_path / "data" / "a.parquet").read_bytes()[:100]
    )
    (tmp_path / "table.yaml").write_text(
        yaml.safe_dump({"name": "t", "attributes": [{"name": "name"}, {"name": "city"}]})
    )
    return resolve_input(tmp_path, None)


@pytest.mark.spark
def test_a_corrupt_parquet_file_is_named_by_both_engines(tmp_path, inprocess, spark_engine):
    """The Spark engine reads the footers in the driver first: the same error, no job."""
    path, spec = _parquet_table(tmp_path)
    for engine in (inprocess, spark_engine):
        with pytest.raises(DataError, match=r"b\.parquet: cannot read the input: .*magic bytes"):
            engine.load(path, spec)


def _damaged_pages(tmp_path):
    """b.parquet's footer is intact, its first page header is not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir(parents=True)
    table = pa.table(
        {"name": [f"n{i % 50}" for i in range(5000)], "city": [f"c{i % 7}" for i in range(5000)]}
    )
    for name in ("a", "b"):
        pq.write_table(table, tmp_path / "data" / f"{name}.parquet", compression="NONE")
    damaged = bytearray((tmp_path / "data" / "b.parquet").read_bytes())
    damaged[4:60] = b"\xff" * 56
    (tmp_path / "data" / "b.parquet").write_bytes(bytes(damaged))
    assert pq.read_metadata(tmp_path / "data" / "b.parquet").num_rows == 5000
    (tmp_path / "table.yaml").write_text(
        yaml.safe_dump({"name": "t", "attributes": [{"name": "name"}, {"name": "city"}]})
    )
    return resolve_input(tmp_path, None)


@pytest.mark.spark
def test_damaged_pages_are_named_by_both_engines(tmp_path, inprocess, spark_engine):
    """Spark's failed task becomes one line naming the file and Spark's log, which holds
    the trace (it is not on the terminal)."""
    from vpub_spark.engines.spark.session import log_file

    path, spec = _damaged_pages(tmp_path)
    with pytest.raises(DataError, match=r"b\.parquet: cannot read the input: .*thrift"):
        inprocess.load(path, spec)
    with pytest.raises(DataError) as caught:
        spark_engine.load(path, spec)
    message = str(caught.value)
    assert re.fullmatch(
        r"\S*/data/b\.parquet: cannot read the input: .*don't know what type: (15|\\x0f) \(details in \S+\.log\)",
        message,
    ), message
    log = log_file()
    assert log is not None and message.endswith(f"(details in {log})")
    trace = log.read_text()  # the Java trace, or the Python task's when tasks read the files
    assert ("Caused by: " in trace or "Traceback" in trace) and "\n" not in message


@pytest.mark.spark
def test_the_cli_on_spark_prints_one_line_naming_the_file_and_the_log(tmp_path):
    """A fresh process, so that the terminal is what the JVM writes to: one line, exit 2,
    the trace in the log the line names (in `$VPUB_LOG_DIR`)."""
    _damaged_pages(tmp_path)
    env = os.environ | {"VPUB_LOG_DIR": str(tmp_path / "logs")}
    done = subprocess.run(
        vpub("profile", "--input", str(tmp_path), "--engine", "spark"),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    logs = list((tmp_path / "logs").glob("spark-*.log"))
    assert (
        len(logs) == 1
        and done.stderr.startswith("vpub: error: ")
        and "Traceback" not in done.stderr
    )
    assert (
        "b.parquet: cannot read the input" in done.stderr
        and f"(details in {logs[0]})" in done.stderr
    )
    trace = logs[0].read_text()  # Java's reader, or the task's own (engines/spark/direct.py)
    assert "at org.apache.parquet" in trace or ("Traceback" in trace and "b.parquet" in trace)


@pytest.fixture
def release(tmp_path):
    from release_helpers import job_table, publish_inprocess, write_table

    data = write_table(job_table(3, 400), tmp_path / "t")
    out = tmp_path / "out"
    publish_inprocess(data, out, ["age -> job"], 2, output={"path": str(out), "release_id": "r"})
    return out


@pytest.mark.spark
@pytest.mark.parametrize(
    "query, message",
    [
        ("SELEC 1", r"\[PARSE_SYNTAX_ERROR\] Syntax error at or near 'SELEC'"),
        (
            "SELECT * FROM nowhere",
            r"\[TABLE_OR_VIEW_NOT_FOUND\] The table or view `nowhere` cannot be found",
        ),
    ],
)
def test_a_bad_sql_query_is_one_line_and_exit_2(release, spark, capsys, query, message):
    code = main(["releases", "register", str(release), "r", "--sql", query])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert re.match(r"vpub: error: --sql: " + message, err), err


def test_the_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    _parquet_table(tmp_path)
    assert main(["profile", "--input", str(tmp_path), "--engine", "inprocess"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vpub: error: ") and "b.parquet" in err
