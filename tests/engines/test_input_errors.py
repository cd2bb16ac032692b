"""Damaged and foreign input (issue 14): one line naming the file and what is wrong, on
both engines, and the engines agree on what they accept."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

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
    path, spec = _parquet_table(tmp_path)
    with pytest.raises(DataError, match=r"b\.parquet: cannot read the input: .*magic bytes"):
        inprocess.load(path, spec)
    with pytest.raises(DataError, match=r"b\.parquet is not a Parquet file"):
        spark_engine.load(path, spec)


def test_the_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    _parquet_table(tmp_path)
    assert main(["profile", "--input", str(tmp_path), "--engine", "inprocess"]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and err.startswith("vpub: error: ")
        and "b.parquet" in err
        and "Traceback" not in err
    )
