"""Code space for estimates: a release's labels as integer codes, and query masks.

Each attribute's domain is the set of labels the release itself shows (every table
covers every row, so every value present appears), ordered numerically when all labels
are numbers, else as strings; a generalized marginal's QI domains are the ones its
manifest entry lists (docs/reference/release-format.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd

Query = Mapping[str, frozenset[int]]


@dataclass
class LocalCodes:
    """A part read file by file into arrays of its final size (`utility/release_models`):
    its label columns hold each file's own dictionary indices, and `labels[column]`
    lists (first row, dictionary) per file, until `to_codes` recodes them in place into
    a release's domains, once. The part never exists as labels nor as Arrow whole."""

    columns: dict[str, np.ndarray]
    labels: dict[str, list[tuple[int, list]]]
    recoded: bool = False


Part: TypeAlias = pd.DataFrame | LocalCodes
"""One part of a published table: read file by file (`LocalCodes`), or a frame of
labels."""
EST = "__est"


def sort_labels(labels: Iterable[object]) -> list[str]:
    out = sorted({str(v) for v in labels})
    try:
        return sorted(out, key=float)
    except ValueError:
        return out


def shown_labels(part: Part, columns: Iterable[str]) -> dict[str, set]:
    """The labels a part shows in each of `columns` (nulls and NaN are not labels): a
    label column's dictionaries (its files', or a categorical's categories), another
    column's distinct values."""
    return {a: _shown(part, a) for a in columns}


def _shown(part: Part, a: str) -> set:
    if isinstance(part, pd.DataFrame):
        col = part[a]
        if isinstance(col.dtype, pd.CategoricalDtype):
            return set(col.cat.categories)
        return set(col.dropna().unique())
    files = part.labels.get(a)
    if files is None:
        return set(pd.Series(part.columns[a]).dropna().unique())
    return {v for _, d in files for v in d} - {None}


def to_codes(frame: Part, domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Labels -> codes of `domains` (-1 for a label outside the domain or null). The
    other columns are framed as they are, not copied (a 10M-row QIT's copy was 0.5 GB)."""
    if isinstance(frame, LocalCodes):
        return _recoded(frame, domains)
    columns = {a: _label_codes(frame[a], domains[a]) if a in domains else frame[a] for a in frame}
    return pd.DataFrame(columns, index=frame.index, copy=False)


def _recoded(part: LocalCodes, domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """`to_codes` of `LocalCodes`: each file's indices through its dictionary's lookup,
    in place (so once); a label column outside `domains` back to its labels."""
    if part.recoded:
        raise RuntimeError("a part's local codes are recoded once")
    part.recoded = True
    columns = {}
    for a, values in part.columns.items():
        files = part.labels.get(a)
        if files is None:
            columns[a] = _label_codes(pd.Series(values), domains[a]) if a in domains else values
            continue
        ends = [start for start, _ in files[1:]] + [len(values)]
        out = values if a in domains else np.empty(len(values), object)
        position = _positions(domains[a]) if a in domains else {}
        for (start, dictionary), end in zip(files, ends, strict=True):
            lut = (
                _lookup(dictionary, position)
                if a in domains
                else np.array([*dictionary, None], object)
            )
            out[start:end] = lut[values[start:end]]
        columns[a] = out
    return pd.DataFrame(columns, copy=False)


def _positions(domain: Sequence[str]) -> dict[str, int]:
    """Each label's code in `domain`."""
    return {str(label): i for i, label in enumerate(domain)}


def _lookup(values: Sequence[object], position: Mapping[str, int]) -> np.ndarray:
    """Codes (`position`: each label's) for `values` (by their text), then -1 for a
    null or a label outside the domain: the last entry, where a null's index points.
    A dictionary lookup per value: a part's files each have a few (709 lookups of a
    10M-row release: 0.5 s by pandas categoricals)."""
    codes = [position.get(str(v), -1) if v is not None else -1 for v in values]
    return np.array([*codes, -1], dtype=np.int32)


def _label_codes(column: pd.Series, domain: Sequence[str]) -> np.ndarray:
    """One column's labels -> codes of `domain`: each distinct value is looked up once
    (a release's columns have few distinct values and come as categoricals), then one
    gather; a null (suppressed) value or a label outside `domain` is -1."""
    if isinstance(column.dtype, pd.CategoricalDtype):  # its codes as they are: 3x faster
        seen, values = column.cat.codes.to_numpy(), column.cat.categories
    else:
        seen, values = pd.factorize(column)  # nulls -> -1, the lookup's last entry
    return _lookup(values, _positions(domain))[seen]


def recoding(loaded, domains: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
    """Per attribute, a lookup from a loaded source's own codes to a release's codes."""
    return {
        a: pd.Categorical(
            list(loaded.dictionaries[a].labels), categories=list(domains[a])
        ).codes.astype(np.int32)
        for a in loaded.names
    }


def with_unpublished(domains: Mapping[str, list[str]], loaded) -> dict[str, list[str]]:
    """A release's `domains` and, for the attributes no table publishes (a marginal
    release), the loaded source's labels: the estimate is uniform over them."""
    unpublished = {a: list(loaded.dictionaries[a].labels) for a in loaded.names if a not in domains}
    return {**domains, **unpublished}


def source_codes(loaded, domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """A loaded source table (its own codes) recoded into a release's code space; a
    column whose codes already are the release's (its labels in the same order, as
    when the release shows every label of the source) is framed as it is."""
    columns = {}
    for a, lut in recoding(loaded, domains).items():
        own = loaded.data[a].to_numpy()
        same = own.dtype == lut.dtype and bool(np.array_equal(lut, np.arange(len(lut))))
        columns[a] = own if same else lut[own]
    return pd.DataFrame(columns, copy=False)  # framed as they are, not copied into one block


def mask(frame: pd.DataFrame, query: Query) -> np.ndarray:
    """Rows meeting every condition on `frame`'s columns (a lookup table per attribute:
    no hashing, one gather per condition). Codes are -1 (suppressed, `to_codes`) or a
    domain's; -1 meets no condition: it reads the table's last cell, one past every
    code, which stays False, so a query for the largest code never counts suppressed rows
    (tested with `Estimator.counts`)."""
    m = np.ones(len(frame), dtype=bool)
    for a, values in query.items():
        if a in frame.columns:
            col = frame[a].to_numpy()
            lut = np.zeros(max(int(col.max(initial=0)), max(values, default=0)) + 2, dtype=bool)
            lut[list(values)] = True
            m &= lut[col]
    return m
