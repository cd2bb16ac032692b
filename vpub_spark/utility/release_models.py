"""A release's tables as estimate models, from its files (docs/explanation/algorithms.md):
each part read once, the kind's model (release/kinds.py) built in one code space."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..estimate.codes import LocalCodes, Part, shown_labels, sort_labels
from ..estimate.models import EstimateModel
from ..release.kinds import table_kind
from ..release.reader import ReleaseReader


def read_part(rel: ReleaseReader, table: str, part: str) -> Part:
    """One part, file by file into arrays of its size (`LocalCodes`): no Arrow copy of
    the whole part beside its codes (at 10M rows a QIT's Arrow table was 306 MB), or
    from the part whole when `rel` holds it already (`ReleaseReader.kept`). A
    part this does not fit (a null in a number column, files whose columns differ) is
    read whole, as before, and its reader names a disagreement."""
    files = rel.local_files(table, part)
    schema = pq.read_schema(files[0])
    rows = sum(pq.read_metadata(f).num_rows for f in files)
    strings = [f.name for f in schema if pa.types.is_string(f.type)]
    if not all(
        f.name in strings or pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
        for f in schema
    ):
        return rel.read(table, part).to_pandas()
    columns = {
        f.name: np.empty(rows, np.int32 if f.name in strings else f.type.to_pandas_dtype())
        for f in schema
    }
    labels: dict[str, list[tuple[int, list]]] = {a: [] for a in strings}
    at = 0
    whole = rel.kept(table, part)  # a part the reader holds: no file read again
    for data in [whole] if whole is not None else _each_file(files, strings):
        if not _fills(data, schema, columns, labels, at):
            return rel.read(table, part).to_pandas()
        at += data.num_rows
    return LocalCodes(columns, labels) if at == rows else rel.read(table, part).to_pandas()


def _each_file(files: list[str], strings: list[str]) -> Iterator[pa.Table]:
    for f in files:
        yield pq.read_table(f, read_dictionary=strings)


def _fills(data: pa.Table, schema: pa.Schema, columns, labels, at: int) -> bool:
    """One file's rows into `columns` from row `at`: a label column's dictionary indices
    (a null: one past its dictionary) and its dictionary; False when the file's columns
    or their types are not the first file's, or a number column has a null."""
    if data.schema.names != schema.names or not all(
        _same_type(data.schema.field(f.name).type, f.type) for f in schema
    ):
        return False
    for name, out in columns.items():
        col, start = data.column(name), at
        if name not in labels and col.null_count:
            return False
        for chunk in col.chunks:
            if name in labels:
                labels[name].append((start, chunk.dictionary.to_pylist()))
                index = chunk.indices
                if index.null_count:
                    index = index.cast(pa.int32()).fill_null(len(chunk.dictionary))
                out[start : start + len(chunk)] = index.to_numpy()  # cast as it is copied
            else:
                out[start : start + len(chunk)] = chunk.to_numpy()
            start += len(chunk)
    return True


def _same_type(read: pa.DataType, first: pa.DataType) -> bool:
    """A file's column type (a text column read as a dictionary) against the first's."""
    if pa.types.is_string(first):
        return pa.types.is_dictionary(read) and pa.types.is_string(read.value_type)
    return read == first


def release_domains(
    rel: ReleaseReader, parts: Mapping[tuple[str, str], Part]
) -> dict[str, list[str]]:
    """Each attribute's labels as the release shows them (every table covers every row),
    or as a table's manifest entry lists them (`domains` of a generalized marginal)."""
    labels: dict[str, set] = {}
    listed: dict[str, list[str]] = {}
    for t in rel.tables:
        listed |= {a: list(v) for a, v in (t.get("domains") or {}).items()}
        for part in t["parts"]:
            frame = parts[(t["name"], part)]
            for a, shown in shown_labels(
                frame, [c for c in frame.columns if c in t["attributes"]]
            ).items():
                labels.setdefault(a, set()).update(shown)
    return {a: sort_labels(v) for a, v in labels.items() if a not in listed} | listed


def release_models(
    rel: ReleaseReader, domains: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[EstimateModel], dict[str, list[str]]]:
    """The estimate models of a release's tables, in code space.

    Args:
        rel: the release (`release.reader.open_release`).
        domains: each attribute's labels in code order; default: those the release
            shows.

    Returns:
        One model per table, and the domains used."""
    parts = {(t["name"], p): read_part(rel, t["name"], p) for t in rel.tables for p in t["parts"]}
    used = (
        {a: list(v) for a, v in domains.items()}
        if domains is not None
        else release_domains(rel, parts)
    )
    models = [
        table_kind(t["kind"]).model(t, {p: parts[(t["name"], p)] for p in t["parts"]}, used)
        for t in rel.tables
    ]
    return models, used
