"""Small NumPy helpers shared by the kernels."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D array, as `np.unique(values)` but by one
    sort. NumPy 2.3+ finds a plain `np.unique`'s values with a hash table: on this
    machine 1.06 s for 1M distinct int64 against 0.02 s by sorting (4M: 5.1 s against
    0.1 s), as its hash table misses the cache at every insert (docs/explanation/performance.md)."""
    s = np.sort(np.asarray(values).ravel())
    return s[run_starts(s)]


def dense_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)` for non-negative integers: by counting
    when their range is at most a few times their number (node and group ids), else by
    `np.unique`. The ids, ascending, and each value's index among them."""
    v = np.asarray(values).ravel()
    if len(v) and int(v.min()) >= 0 and int(v.max()) <= 4 * len(v) + 65536:
        present = np.bincount(v, minlength=int(v.max()) + 1) > 0
        index = np.cumsum(present) - 1
        return np.flatnonzero(present).astype(v.dtype, copy=False), index[v]
    ids, inverse = np.unique(v, return_inverse=True)
    return ids, inverse.reshape(-1)


def run_starts(sorted_values: np.ndarray) -> np.ndarray:
    """Where each run of equal values of a sorted array starts (empty for no values)."""
    new = np.empty(len(sorted_values), bool)
    new[:1] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=new[1:])
    return np.flatnonzero(new)


def positions(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`np.searchsorted(ids, values)` for ascending distinct non-negative `ids` (as
    `dense_ids` gives them), as int32 when that holds them: through a table of every
    position when the ids' range is at most a few times their number and the values
    fall inside it (10M values among 1M ids: 0.03 s against 0.25 s), else by search."""
    v = np.asarray(values).ravel()
    small = len(ids) and int(ids[0]) >= 0 and int(ids[-1]) <= 4 * len(ids) + 65536
    if small and len(v) and int(v.min()) >= 0 and int(v.max()) <= int(ids[-1]):
        table = np.searchsorted(ids, np.arange(int(ids[-1]) + 1))
        found = table.astype(np.int32) if len(ids) < 2**31 else table
        return found[v]
    return np.searchsorted(ids, v)


_HEADER = struct.Struct("<3sQ")  # the values' NumPy type (e.g. "<u2") and their number


def pack_counts(values: np.ndarray) -> bytes:
    """Non-negative integers as compact bytes for a task's result (`unpack_counts`): in
    the narrowest unsigned type that holds them, compressed by zstd. A workload task's
    cubes (1.1M cells, 42% non-zero at 1M `sal` rows) took 7.4 MB as int64 cell indexes
    and counts, and 0.83 MB so; moving those bytes from the task to the driver took
    about half of its job (docs/explanation/performance.md)."""
    v = np.asarray(values).ravel()
    if len(v) and int(v.min()) < 0:
        raise ValueError("pack_counts takes non-negative integers")
    top = int(v.max()) if len(v) else 0
    dtype = next(
        np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64) if top <= np.iinfo(t).max
    )
    raw = v.astype(dtype, copy=False).tobytes()
    return _HEADER.pack(dtype.str.encode(), len(v)) + pa.compress(raw, codec="zstd", asbytes=True)


def unpack_counts(blob: bytes) -> np.ndarray:
    """The int64 values `pack_counts` packed."""
    code, n = _HEADER.unpack_from(blob)
    dtype = np.dtype(code.decode())
    raw = pa.decompress(
        memoryview(blob)[_HEADER.size :], n * dtype.itemsize, codec="zstd", asbytes=True
    )
    return np.frombuffer(raw, dtype).astype(np.int64)


def pack_sorted(keys: np.ndarray) -> bytes:
    """Sorted non-negative integers as compact bytes (`unpack_sorted`): their gaps, by
    `pack_counts`. Half of the 1M `sal` source's distinct packed keys and their counts
    took 8.0 MB as int64, 1.2 MB so (docs/explanation/performance.md)."""
    return pack_counts(np.diff(np.asarray(keys).ravel(), prepend=0))


def unpack_sorted(blob: bytes) -> np.ndarray:
    """The int64 values `pack_sorted` packed."""
    return np.cumsum(unpack_counts(blob))


def pack_codes(codes: Sequence[np.ndarray], radix: Sequence[int], rows: int) -> np.ndarray:
    """Codes of several columns as one int64 per row (mixed radix; no columns: zeros)."""
    key = np.zeros(rows, dtype=np.int64)
    for c, r in zip(codes, radix, strict=True):
        key *= r  # in place: no new array per column, nor an int64 copy of it
        np.add(key, c, out=key, casting="unsafe")  # any integer type; codes < radix
    return key


def dense_counts(
    codes: Sequence[np.ndarray], radix: Sequence[int], cells: int = 1 << 24
) -> tuple[list[np.ndarray], np.ndarray] | None:
    """Rows per distinct combination of `codes` (one array a column, each code in
    [0, radix)), sorted by the columns in order: each column's codes (in its own type)
    and the counts. By one count per cell of the combinations' space (no sort) when it
    has at most `cells` cells and as many as a few per row, else None."""
    rows = len(codes[0]) if codes else 0
    space = math.prod(radix)
    if not codes or space > min(cells, 4 * rows + 1024):
        return None
    counts = np.bincount(pack_codes(codes, radix, rows), minlength=space)
    present = np.flatnonzero(counts)
    columns = np.unravel_index(present, tuple(radix))
    return [c.astype(k.dtype) for c, k in zip(columns, codes, strict=True)], counts[present]


def packed(columns: Sequence[np.ndarray]) -> tuple[np.ndarray, list[int]] | None:
    """The rows of integer columns as one int64 each (`pack_codes`, the first column
    most significant) and each column's radix (its largest code + 1); None when a code
    is negative or the ranges do not fit in 62 bits."""
    radix = [int(c.max()) + 1 if len(c) else 1 for c in columns]
    if any(len(c) and c.min() < 0 for c in columns) or math.prod(radix) >= 2**62:
        return None
    return pack_codes(columns, radix, len(columns[0]) if len(columns) else 0), radix


def lex_order(columns: Sequence[np.ndarray]) -> np.ndarray:
    """The stable lexicographic order of the rows of non-negative integer columns (the
    first column primary), as pandas' stable multi-column sort gives it: the codes packed
    into an int64 where their ranges fit (`packed`) and sorted by `stable_order`, else
    np.lexsort."""
    key = packed(columns)
    return stable_order(key[0]) if key is not None else np.lexsort(tuple(columns[::-1]))


def stable_order(key: np.ndarray) -> np.ndarray:
    """`np.argsort(key, kind="stable")` for non-negative integers, in linear time: a
    least-significant-digit radix sort, 16 bits per pass, each pass NumPy's own radix
    sort of a uint16 (or uint8) digit. On 1M rows of a 25-bit key, 48 ms against 87 ms
    for the comparison sort, and the gap widens with the rows
    (docs/explanation/performance.md)."""
    key = np.asarray(key)
    top = int(key.max()).bit_length() if len(key) else 0
    if top <= 16:
        return np.argsort(key.astype(np.uint8 if top <= 8 else np.uint16), kind="stable")
    if top > 48:  # four passes cost as much as the comparison sort
        return np.argsort(key, kind="stable")
    wide = key.astype(np.uint64, copy=False)
    digits = [
        ((wide >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.uint16)
        for shift in range(0, top, 16)
    ]
    order = np.argsort(digits[0], kind="stable")
    for digit in digits[1:]:
        order = order[np.argsort(digit[order], kind="stable")]
    return order
