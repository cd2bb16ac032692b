"""CSV as RFC 4180 quotes it (doubled quotes, delimiters and line breaks inside quotes)
is read the same by both engines: the same rows, dictionaries, counts and profile."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import yaml

from vpub_spark.datasets.presets import resolve_input
from vpub_spark.errors import DataError

pytestmark = pytest.mark.spark

HEADER = '"name",job,city'
RECORDS = [  # every quoting case; `\n` and `\r\n` inside quotes are part of the value
    'ann,"say ""hi""",x',
    'bob,"two\nlines",x',
    'cat,"crlf\r\ninside",x',
    'dan,"a, b",x',
    'eve,"",x',
    "fay,,x",
    'gus,"  padded  ",x',
    'hal,Zürich ☃,"Ñandú"',
    'ivy,"multi\n\nblank lines",x',
    'jon,plain,"""quoted"""',
    'kim,"comma, and ""quote""\r\nand crlf",y',
    "lea,?,y",
]
EXPECTED_JOBS = {  # the labels RFC 4180 gives (values are trimmed; "" and "?" are missing)
    'say "hi"',
    "two\nlines",
    "crlf\ninside",
    "a, b",
    "padded",
    "Zürich ☃",
    "multi\n\nblank lines",
    "plain",
    'comma, and "quote"\nand crlf',
}


def _table(tmp_path, spec_extra: dict | None = None):
    """The records over three files: LF line ends, CRLF line ends, and gzip (LF)."""
    data = tmp_path / "data"
    data.mkdir()
    half = len(RECORDS) // 2
    (data / "a.csv").write_bytes("\n".join([HEADER, *RECORDS[:half]]).encode() + b"\n")
    (data / "b.csv").write_bytes("\r\n".join([HEADER, *RECORDS[half:-1]]).encode() + b"\r\n")
    with gzip.open(data / "c.csv.gz", "wb") as f:
        f.write("\n".join([HEADER, RECORDS[-1]]).encode())  # no line end after the last
    spec = {"name": "t", "attributes": [{"name": "name"}, {"name": "job"}, {"name": "city"}]}
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(spec | (spec_extra or {})))
    return resolve_input(tmp_path, None)


def _same(a, b) -> None:
    """Two loads of one input agree on everything a release is built from."""
    assert (a.rows_read, a.rows_dropped) == (b.rows_read, b.rows_dropped)
    for name in a.names:
        assert a.dictionaries[name].labels == b.dictionaries[name].labels, name
        assert np.array_equal(a.counts[name], b.counts[name]), name
    assert a.profile() == b.profile()


def _rows(loaded, frame) -> list[tuple]:
    cols = list(loaded.names)
    return sorted(map(tuple, frame[cols].to_numpy().tolist()))


def test_every_quoting_case_reads_the_same_on_both_engines(tmp_path, inprocess, spark_engine):
    path, spec = _table(tmp_path)
    local, spark = inprocess.load(path, spec), spark_engine.load(path, spec)
    _same(local, spark)
    assert local.rows_read == len(RECORDS) and local.rows_dropped == 3  # eve, fay, lea
    assert set(local.dictionaries["job"].labels) == EXPECTED_JOBS
    assert set(local.dictionaries["city"].labels) == {"x", "y", "Ñandú", '"quoted"'}
    assert _rows(local, local.data) == _rows(spark, spark.data.toPandas())


def test_an_empty_field_is_the_same_value_on_both_engines(tmp_path, inprocess, spark_engine):
    """With "" not a missing value, an empty field (quoted or not) is the label ""."""
    path, spec = _table(tmp_path, {"missing_values": ["?"]})
    local, spark = inprocess.load(path, spec), spark_engine.load(path, spec)
    _same(local, spark)
    labels = local.dictionaries["job"].labels
    assert "" in labels and local.counts["job"][labels.index("")] == 2  # eve and fay


def test_quoted_line_breaks_do_not_add_rows(tmp_path, inprocess, spark_engine):
    """600 records, one in 7 with a line break inside quotes, and `missing: reject`: 600
    rows, none missing, on both engines (Spark read 671 rows, 142 of them "missing")."""
    (tmp_path / "data").mkdir()
    notes = ["first line\nsecond line" if i % 7 == 0 else f"note {i % 5}" for i in range(600)]
    lines = ["id,note"] + [f'{i},"{note}"' for i, note in enumerate(notes)]
    (tmp_path / "data" / "notes.csv").write_text("\n".join(lines) + "\n")
    spec = {"name": "n", "missing": "reject", "attributes": [{"name": "note"}]}
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(spec))
    path, spec = resolve_input(tmp_path, None)
    local, spark = inprocess.load(path, spec), spark_engine.load(path, spec)
    _same(local, spark)
    assert (spark.rows_read, spark.rows_dropped) == (600, 0)
    assert "first line\nsecond line" in spark.dictionaries["note"].labels


def test_a_record_of_another_width_is_refused_naming_the_file(tmp_path, inprocess, spark_engine):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("name,job\nann,x\n")
    (tmp_path / "data" / "b.csv").write_text('name,job\nbob,"y"\ncid,z,extra\n')
    spec = {"name": "t", "attributes": [{"name": "name"}, {"name": "job"}]}
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(spec))
    path, spec = resolve_input(tmp_path, None)
    for engine, says in ((inprocess, "Expected 2 columns"), (spark_engine, "Malformed CSV record")):
        with pytest.raises(DataError, match=rf"b\.csv: cannot read the input: .*{says}") as e:
            engine.load(path, spec)
        assert "extra" not in str(e.value) and "cid" not in str(e.value)  # never a row's values
