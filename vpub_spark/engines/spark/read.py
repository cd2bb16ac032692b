"""Reading an input on Spark: CSV as RFC 4180 writes it (the header read without Spark
when the files agree), Parquet footers checked in the driver, Parquet or CSV objects on
an object store read by the tasks through `pyarrow.fs` (`store_frame`), and the checks
that make a read fail in one line naming the file."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import DataError, SpecError
from ...model import TableSpec
from ..base import (
    encoding_error,
    unreadable,
)
from .errors import spark_errors
from .schema import struct_type

SPARK_CHARSETS = {  # Python's codec name -> the charsets Spark 4's CSV reader accepts
    "latin_1": "iso-8859-1",
    "iso8859-1": "iso-8859-1",
    "ascii": "us-ascii",
    "utf-8": "utf-8",
    "utf-16": "utf-16",
    "utf-16-be": "utf-16be",
    "utf-16-le": "utf-16le",
    "utf-32": "utf-32",
}


def spark_charset(encoding: str) -> str:
    import codecs

    name = codecs.lookup(encoding).name
    if name not in SPARK_CHARSETS:
        accepted = ", ".join(sorted(set(SPARK_CHARSETS.values())))
        raise SpecError(
            f"encoding {encoding!r}: Spark reads CSV in {accepted} only; use --engine inprocess or convert the file"
        )
    return SPARK_CHARSETS[name]


def check_decoded(df, spec: TableSpec) -> None:
    """Spark replaces bytes that are not the CSV's encoding with U+FFFD: find the files
    showing one and refuse the first undecodable line (a U+FFFD the file really holds,
    correctly encoded, is kept)."""
    from functools import reduce

    from pyspark.sql import functions as F

    bad = reduce(lambda a, b: a | b, [F.col(c).contains("\ufffd") for c in df.columns])
    files = df.filter(bad).select(F.input_file_name().alias("f")).distinct().limit(20).collect()
    for row in files:
        local = re.sub(r"^file:(//)?", "", row["f"])
        error = encoding_error(unquote(local), spec.encoding)
        if error is not None:
            raise error


def csv_header(path: Path, encoding: str) -> list[str] | None:
    """The column names every plain CSV file under `path` starts with, read here rather
    than by a Spark job; None (Spark reads the header) when a file is compressed,
    starts with a byte-order mark, or the files disagree."""
    import csv

    files = [path] if path.is_file() else sorted(path.rglob("*.csv*"))
    if not files or any(f.suffix != ".csv" for f in files):
        return None
    headers = set()
    for f in files:
        try:
            with open(f, encoding=encoding, newline="") as handle:
                headers.add(tuple(next(csv.reader(handle), ())))
        except (OSError, UnicodeDecodeError, csv.Error):
            return None
    names = headers.pop() if len(headers) == 1 else ()
    if not names or names[0].startswith("\ufeff") or len(set(names)) != len(names):
        return None
    return list(names)


def read_csv(reader, path: Path, spec: TableSpec):
    """CSV as RFC 4180 says, like the in-process engine (pyarrow): a header line, fields
    in `"` quotes may hold the delimiter, line breaks and `""` (one quote); a record of
    another width than the header is an error (FAILFAST), as in pyarrow. Line breaks
    inside quotes need `multiLine`, which makes a CSV file unsplittable: each file is
    read by one task (Parquet is unaffected)."""
    reader = reader.options(
        header=True, inferSchema=False, multiLine=True, quote='"', escape='"', mode="FAILFAST"
    ).option("encoding", spark_charset(spec.encoding))
    header = csv_header(path, spec.encoding)
    if header is not None:  # no job to read the header
        reader = reader.schema(struct_type(pa.schema([(c, pa.string()) for c in header])))
    return reader.csv(str(path))


def as_arrow_csv(df):
    """CSV strings as both engines give them: an empty field is `""` (Spark reads null),
    a CRLF inside quotes LF (Spark turns it into LF in a CRLF file only; the in-process
    engine always, `inprocess.lf_newlines`)."""
    from pyspark.sql import functions as F

    empty, crlf, lf = F.lit(""), F.lit("\r\n"), F.lit("\n")
    return df.select(
        *[F.replace(F.coalesce(F.col(c), empty), crlf, lf).alias(c) for c in df.columns]
    )


def check_footers(files: list[str]) -> None:
    """Every Parquet file's footer read in the driver (its end only: cheap), so that a
    truncated or foreign file is a one-line error naming it, not a failed Spark task."""
    for f in files:
        try:
            pq.read_metadata(f)
        except (pa.ArrowException, OSError) as e:
            raise unreadable(f, e) from None


def files_frame(spark, files: list[str], read, schema: pa.Schema):
    """A DataFrame of the objects `files`, one task per file running `read`."""
    from .direct import item_frame

    return item_frame(spark, [(f,) for f in files], ("file",), read, struct_type(schema))


def store_frame(spark, files: list[str], columns: list[str] | None = None, check=None):
    """Parquet objects on an object store as a DataFrame, read by the tasks through
    `pyarrow.fs`: no Hadoop S3 connector. The schema is the first file's footer (`check`
    sees its column names first)."""
    from ...storage import filesystem, fs_path

    with spark_errors(files[0]):
        schema = pq.read_schema(fs_path(files[0]), filesystem=filesystem())
    if check is not None:
        check(schema.names)
    cols = columns or schema.names
    schema = pa.schema([schema.field(c) for c in cols])
    return files_frame(
        spark,
        files,
        partial(read_object, kind="parquet", spec=None, cols=cols, schema=schema),
        schema,
    )


def read_object(batches, kind: str, spec: TableSpec | None, cols: list[str], schema: pa.Schema):
    """In a task: the data files named in `batches` read from the object store."""
    import tempfile

    from ...storage import filesystem, fs_path, read_bytes
    from ..inprocess import read_arrow

    for b in batches:
        for uri in b.column(0).to_pylist():
            if kind == "parquet":
                with filesystem().open_input_file(fs_path(uri)) as f:
                    for batch in pq.ParquetFile(f).iter_batches(columns=cols):
                        yield from (
                            pa.Table.from_batches([batch]).select(cols).cast(schema).to_batches()
                        )
                continue
            assert spec is not None  # CSV needs the table spec (its encoding)
            with tempfile.TemporaryDirectory(prefix="vpub-in-") as tmp:
                local = Path(tmp) / uri.rsplit("/", 1)[-1]
                local.write_bytes(read_bytes(uri))
                try:
                    table = read_arrow(str(local), spec, "csv")
                except DataError as e:
                    raise DataError(str(e).replace(str(local), uri)) from None
            yield from table.select(cols).cast(schema).to_batches()
