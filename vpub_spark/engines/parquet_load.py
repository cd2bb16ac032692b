"""The in-process engine's Parquet load: each row group read once, on the workers, its
columns as dictionaries and each row's dictionary index written into one int32 array,
turned into codes in place once the driver has planned the encoding.

Decisions and measurements: docs/explanation/performance.md, "A Parquet source read
once, by row groups".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..encoding import missing_mask, normalized, value_codes
from ..errors import DataError
from ..model import TableSpec
from .base import LoadedTable, check_columns, plan_encoding, unreadable
from .files import data_files
from .pool import run_tasks


@dataclass(frozen=True)
class _Unit:
    """A row group: its file, its number in the file, and its first row in the load."""

    file: str
    group: int
    start: int
    rows: int
    strings: tuple[str, ...]  # its string columns, read as Parquet's dictionaries
    cast: pa.Schema | None = None  # the first file's types, where this file's differ


@dataclass(frozen=True)
class _Seen:
    """What a row group's read gives the driver: raw value counts over its complete
    rows, its rows, its rows with a missing value, and per attribute the dictionary its
    indices point into (raw values: integers, or normalized strings)."""

    counts: dict[str, dict[str, int]]
    rows: int
    missing: int
    values: dict[str, pa.Array]


def broken_parquet(files: list[str], error: Exception) -> DataError:
    """The first file pyarrow cannot read, named, with what is wrong."""
    import pyarrow.parquet as pq

    for f in files:
        try:
            pq.ParquetFile(f).read()
        except (pa.ArrowException, OSError) as e:
            return unreadable(f, e)
    return unreadable(files[0] if len(files) == 1 else Path(files[0]).parent, error)


def load_parquet(path: str, spec: TableSpec, workers_for) -> LoadedTable:
    """A Parquet source as a frame of codes (docs/explanation/performance.md); both passes on
    the workers (`workers_for(rows)`), the array shared with them (an anonymous shared
    mapping) and becoming the frame's block (no copy)."""
    import pandas as pd
    import pyarrow.parquet as pq

    files = data_files(path, "parquet")
    try:
        metas = [pq.read_metadata(f) for f in files]  # each footer read once
        units = _units(path, files, metas, spec)
        total = sum(u.rows for u in units)
        workers = workers_for(total)
        tasks = [units[i :: max(1, workers)] for i in range(max(1, workers))]
        codes = _shared_int32((len(spec.attributes), total), workers > 1)

        def read(task: list[_Unit]) -> list[_Seen]:
            return [_read(u, spec, codes) for u in task]

        seen = dict(zip(units, _by_unit(tasks, run_tasks(read, tasks, workers)), strict=True))
        raw, rows, missing = _merged(list(seen.values()), spec)
        plan, dictionaries, per_code = plan_encoding(spec, raw, rows, missing)

        def recode(task: list[_Unit]) -> None:
            for u in task:
                for i, c in enumerate(plan.columns):
                    lookup = value_codes(c, seen[u].values[c.attribute])
                    table = np.append(lookup.fill_null(-1).to_numpy(), np.int32(-1))
                    span = codes[i, u.start : u.start + u.rows]
                    span[:] = table[span]

        run_tasks(recode, tasks, workers)
    except (pa.ArrowException, OSError) as e:
        raise broken_parquet(files, e) from None
    pa.default_memory_pool().release_unused()  # the row groups' buffers, back to the system
    kept = _complete_first(codes) if missing else codes
    if kept.shape[1] < 0.75 * codes.shape[1]:  # do not hold many dropped rows
        kept = np.ascontiguousarray(kept)
    frame = pd.DataFrame(kept.T, columns=plan.schema.names)
    return LoadedTable(spec, dictionaries, per_code, rows, missing, frame, source=str(path))


def _units(path: str, files: list[str], metas: list, spec: TableSpec) -> list[_Unit]:
    """Every file's row groups, in order; a file without a spec's column is an error.
    A file whose columns have other types than the first file's is read as those types
    (cast), as `read_arrow`'s dataset reads it, so both give the same raw values."""
    units, start = [], 0
    cols = sorted({a.column for a in spec.attributes})
    first: pa.Schema | None = None
    for i, (f, m) in enumerate(zip(files, metas, strict=True)):
        schema = m.schema.to_arrow_schema()
        check_columns(schema.names, spec, f if i else path)  # a later file: named
        mine = pa.schema([pa.field(c, schema.field(c).type) for c in cols])  # nullable
        first = first or mine
        cast = None if mine.types == first.types else first
        strings = tuple(c for c in cols if _is_text(schema.field(c).type) and cast is None)
        for g in range(m.num_row_groups):
            rows = m.row_group(g).num_rows
            units.append(_Unit(f, g, start, rows, strings, cast))
            start += rows
    return units


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _read(unit: _Unit, spec: TableSpec, codes: np.ndarray) -> _Seen:
    """One row group read: each attribute's dictionary indices into its rows of
    `codes` (a null as the dictionary's length), and what the driver needs (`_Seen`)."""
    import pyarrow.parquet as pq

    cols = sorted({a.column for a in spec.attributes})
    table = pq.ParquetFile(unit.file, read_dictionary=unit.strings).read_row_group(
        unit.group, columns=cols
    )
    if unit.cast is not None:
        table = table.select(cols).cast(unit.cast)
    by_column = {c: _dictionary_of(table.column(c), spec.missing_values) for c in cols}
    complete: np.ndarray | None = None  # None: every row
    for _, index, missing in by_column.values():
        if missing is not None:
            complete = ~missing[index] if complete is None else complete & ~missing[index]
    counts, values = {}, {}
    for i, a in enumerate(spec.attributes):
        distinct, index, _ = by_column[a.column]
        codes[i, unit.start : unit.start + unit.rows] = index
        kept = index if complete is None else index[complete]
        tally = np.bincount(kept, minlength=len(distinct) + 1)[:-1]
        counts[a.name] = _shown_counts(distinct, tally)
        values[a.name] = distinct
    missing_rows = 0 if complete is None else unit.rows - int(complete.sum())
    return _Seen(counts, unit.rows, missing_rows, values)


def _dictionary_of(
    column: pa.ChunkedArray, tokens: tuple[str, ...]
) -> tuple[pa.Array, np.ndarray, np.ndarray | None]:
    """(distinct raw values, each row's index into them with a null as their count,
    which indices are missing, None if none is): an integer column stays integers,
    others become normalized strings (`normalized`, applied to the distinct values
    only)."""
    if pa.types.is_integer(column.type) and column.null_count == 0:
        distinct, index = _dense_integers(column.to_numpy())
        if distinct is not None:
            distinct = pa.array(distinct, column.type)
            return distinct, index, _missing_of(distinct, tokens, nulls=False)
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    encoded = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    distinct = encoded.dictionary
    if not pa.types.is_integer(distinct.type):
        distinct = normalized(distinct)
    nulls = encoded.indices.null_count > 0
    index = encoded.indices.cast(pa.int32()).fill_null(len(distinct))
    index = index.to_numpy(zero_copy_only=False)
    return distinct, index, _missing_of(distinct, tokens, nulls)


def _dense_integers(values: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Integers over a range at most a few times their count: (distinct values in
    order, each row's index) by counting, without hashing; (None, values) otherwise."""
    if not len(values):
        return None, values
    low, high = int(values.min()), int(values.max())
    if high - low > 4 * len(values) + 4096:
        return None, values
    if values.dtype.itemsize < 4:  # the range may not fit a narrow type
        values = values.astype(np.int32)
    base = values.dtype.type(low)
    shifted = values - base  # within the range: no overflow
    present = np.bincount(shifted, minlength=high - low + 1) > 0
    rank = (np.cumsum(present) - 1).astype(np.int32)
    return np.flatnonzero(present).astype(values.dtype) + base, rank[shifted]


def _missing_of(distinct: pa.Array, tokens: tuple[str, ...], nulls: bool) -> np.ndarray | None:
    """Which of a dictionary's indices (its values, then the null index) are missing;
    None when none is."""
    missing = np.append(missing_mask(distinct, tokens).to_numpy(zero_copy_only=False), True)
    return missing if nulls or missing[:-1].any() else None


def _shown_counts(distinct: pa.Array, tally: np.ndarray) -> dict[str, int]:
    """Counts per raw value as strings (an integer's canonical decimal), the values a
    complete row holds only; values that normalize alike summed."""
    out: dict[str, int] = {}
    present = np.flatnonzero(tally)
    for v, n in zip(distinct.take(pa.array(present)).to_pylist(), tally[present], strict=True):
        key = str(v)
        out[key] = out.get(key, 0) + int(n)
    return out


def _by_unit(tasks: list[list], results: list[list]) -> list:
    """Results per task, back in the order of the units (task i holds units i, i + w, ...)."""
    out: list = [None] * sum(len(t) for t in tasks)
    for i, done in enumerate(results):
        out[i :: len(tasks)] = done
    return out


def _merged(parts: list[_Seen], spec: TableSpec) -> tuple[dict[str, dict[str, int]], int, int]:
    """Raw value counts of several row groups summed."""
    raw: dict[str, dict[str, int]] = {a.name: {} for a in spec.attributes}
    rows = missing = 0
    for part in parts:
        rows, missing = rows + part.rows, missing + part.missing
        for name, values in part.counts.items():
            into = raw[name]
            for value, c in values.items():
                into[value] = into.get(value, 0) + c
    return raw, rows, missing


def _complete_first(codes: np.ndarray) -> np.ndarray:
    """The rows without a missing value (code -1 in some column), moved to the front of
    each column in order; the view of those rows."""
    complete = np.ones(codes.shape[1], dtype=bool)
    for column in codes:
        complete &= column >= 0
    kept = int(complete.sum())
    for column in codes:
        column[:kept] = column[complete]
    return codes[:, :kept]


def _shared_int32(shape: tuple[int, int], shared: bool) -> np.ndarray:
    """An int32 array; with `shared`, in an anonymous shared mapping, so that forked
    workers write into the caller's array."""
    size = int(np.prod(shape)) * 4
    if not shared or size == 0:
        return np.empty(shape, dtype=np.int32)
    import mmap

    return np.frombuffer(mmap.mmap(-1, size), dtype=np.int32).reshape(shape)
